//! `domos mount IMAGE DIR`: serves an ext2 image to Linux through FUSE, so that ordinary
//! programs use Domos' file system. The storage stack of `domos fs` (`drv-disk`, `svc-bcache`,
//! `fs-ext2`, [`crate::fs::storage_config`]) runs with the FUSE driver `drv-fuse` as its client;
//! the kernel mounts `/dev/fuse` at DIR as the `[[fuse]]` device `fuse0`.
//!
//! It serves until DIR is unmounted (`umount DIR`, `fusermount3 -u DIR`) or the process gets
//! SIGINT, SIGTERM or SIGHUP; then the driver answers the requests it took, syncs the file
//! system, the kernel unmounts, and the image is clean with everything written. The image is
//! locked (flock, exclusive) while mounted, as `domos fs` locks it for a change.

use std::ffi::{OsStr, OsString};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

use domos_kernel::{Console, Kernel};
use domos_loader::SystemConfig;

use crate::fs::toml_string;
use crate::signals::StopSignals;

/// The usage text.
pub const USAGE: &str = "usage: domos mount [--single] [--wait] IMAGE DIR
  serves the ext2 file system of IMAGE at the directory DIR through FUSE (/dev/fuse; a user
  without root mounts through fusermount3), until DIR is unmounted (umount DIR, fusermount3 -u
  DIR) or Ctrl-C, SIGTERM or SIGHUP; then syncs and leaves a clean image.
options: --single  run the whole stack in one domain instead of four
         --wait    wait for another domos process using IMAGE instead of failing";

/// How long the driver may take to answer what it holds and sync once asked to stop.
const STOP_LIMIT: Duration = Duration::from_secs(120);

/// How often the wait looks for a signal.
const STEP: Duration = Duration::from_millis(50);

fn usage(message: &str) -> (i32, String) {
    (2, format!("{message}\n{USAGE}"))
}

/// Runs `domos mount ARGS`.
///
/// # Errors
/// The exit code (1 or 2) and what went wrong.
pub fn run(args: &[OsString]) -> Result<(), (i32, String)> {
    let mut args: Vec<&OsStr> = args.iter().map(OsString::as_os_str).collect();
    if matches!(args.as_slice(), [word] if ["--help", "-h", "help"].map(OsStr::new).contains(word)) {
        println!("{USAGE}");
        return Ok(());
    }
    let (mut single, mut wait) = (false, false);
    while let Some(option) = args.first().and_then(|word| word.to_str()).filter(|word| word.starts_with("--")) {
        match option {
            "--single" => single = true,
            "--wait" => wait = true,
            _ => return Err(usage(&format!("domos mount: unknown option {option}"))),
        }
        args.remove(0);
    }
    let [image, dir] = args.as_slice() else {
        return Err(usage("domos mount: an image and a directory are needed"));
    };
    let image = Path::new(image);
    let shown = image.display();
    let dir = std::fs::canonicalize(dir).map_err(|e| (1, format!("domos mount: {}: {e}", Path::new(dir).display())))?;
    if !dir.is_dir() {
        return Err((1, format!("domos mount: {} is not a directory", dir.display())));
    }
    let mountpoint = dir
        .to_str()
        .ok_or_else(|| (1, format!("domos mount: {}: the directory's path must be UTF-8", dir.display())))?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(image)
        .map_err(|e| (1, format!("domos mount: {shown}: {e}")))?;
    crate::fs::lock(&file, &shown, true, wait, crate::fs::WAIT_HINT)
        .map_err(|why| (1, format!("domos mount: {why}")))?;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let fs_args = format!("time={}", u32::try_from(now).unwrap_or(u32::MAX));
    // The kernel opens the image by the descriptor this process holds open and locked.
    let held = format!("image = {}", toml_string(&format!("/proc/self/fd/{}", file.as_raw_fd())));
    let mut text = crate::fs::storage_config_on(2, &held, &fs_args, "drv-fuse", "fuse=fuse0", single);
    text.push_str(&format!("[[fuse]]\nname = \"fuse0\"\nmountpoint = {}\n", toml_string(mountpoint)));
    let config = SystemConfig::parse(&text).map_err(|e| (1, format!("domos mount: {e}")))?;

    // Before any thread starts, so that every thread of the kernel inherits the mask and the
    // signals wait for this thread.
    let signals = StopSignals::block();
    let components = crate::embedded_components_named(&["drv-disk", "svc-bcache", "fs-ext2", "drv-fuse"])
        .map_err(|e| (1, format!("domos mount: {e}")))?;
    let kernel = crate::start_kernel(&config, components, Console::Stdout, false)
        .map_err(|e| (1, format!("domos mount: {e}")))?;
    let result = serve(&kernel, &config, &signals, mountpoint, &shown);
    kernel.shutdown();
    // What the disk driver wrote reaches the image's storage before the lock goes.
    let synced = file.sync_all().map_err(|e| (1, format!("domos mount: {shown}: cannot sync: {e}")));
    drop(file);
    result.and(synced)
}

/// Boots the system and waits until the driver ends: DIR unmounted, or a signal, after which
/// the driver has [`STOP_LIMIT`] to finish.
fn serve(
    kernel: &std::sync::Arc<Kernel>,
    config: &SystemConfig,
    signals: &StopSignals,
    mountpoint: &str,
    shown: &std::path::Display<'_>,
) -> Result<(), (i32, String)> {
    let outcome = kernel.boot(config, Some(Duration::ZERO)).map_err(|e| (1, format!("domos mount: {e}")))?;
    println!("domos mount: {shown} mounted at {mountpoint} (umount {mountpoint}, or Ctrl-C, ends)");
    let mut deadline: Option<Instant> = None;
    loop {
        if kernel.scheduler.wait_idle(Some(STEP)) {
            break;
        }
        if deadline.is_none()
            && let Some(signal) = signals.take()
        {
            println!("domos mount: signal {signal}: unmounting {mountpoint}");
            kernel.stop_fuse_devices();
            deadline = Some(Instant::now() + STOP_LIMIT);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err((1, format!("domos mount: the driver did not finish within {} s", STOP_LIMIT.as_secs())));
        }
    }
    let failed: Vec<String> = outcome
        .domains
        .iter()
        .filter_map(|d| d.termination_reason().map(|reason| format!("{}: {reason}", d.name)))
        .collect();
    if failed.is_empty() {
        println!("domos mount: {mountpoint} unmounted, {shown} synced");
        Ok(())
    } else {
        Err((1, format!("domos mount: domains failed: {}", failed.join("; "))))
    }
}
