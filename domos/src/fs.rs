//! `domos fs IMAGE COMMAND`: inspect and change an ext2 image the way e2tools or `debugfs` do,
//! with the storage stack running as Domos components in domains over the image file — the
//! disk driver (`drv-disk`), the buffer cache (`svc-bcache`), the file system (`fs-ext2`) — and
//! `app-fs` carrying out the command against them.
//!
//! The image is locked with `flock` while the command runs (shared to read, exclusive to
//! write); a file's bytes move between this process and `app-fs` through a [`pipe`] of device
//! memories while the system runs, in a thread of its own.
//!
//! Exit codes: 0 done, 1 the operation failed (the message says why, as `errno` would), 2 bad
//! usage, [`BROKEN_PIPE`] when standard output's reader went away.

use std::ffi::{OsStr, OsString};
use std::fs::{File, TryLockError};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use domos_kernel::{Console, Kernel, KernelOptions};
use domos_loader::SystemConfig;

use crate::progress::Progress;
use pipe::Pipe;

pub mod pipe;

/// The usage text.
pub const USAGE: &str = "usage: domos fs [--single] [--wait] IMAGE COMMAND
  mkfs [SIZE_MIB] [--block 1024|4096] [--force]
                                        make an ext2 file system (creating IMAGE of SIZE_MIB, default 16);
                                        an image that holds one already needs --force
  ls PATH                               list a directory
  stat PATH                             a file's attributes
  df                                    space and inodes
  cat PATH                              a file's bytes to standard output
  get PATH LOCAL                        copy a file out of the image
  put LOCAL PATH                        copy a file into the image (blocks of zeros stay holes)
  readlink PATH                         where a symbolic link points
  mkdir PATH | rm PATH | mv FROM TO | ln TARGET PATH
PATH, FROM, TO and TARGET may hold any bytes a name may (all but NUL; `/` separates names);
ls and readlink print names escaped as `ls -b` does (`\\ ` a space, `\\\\` a backslash, `\\n`,
`\\377` a byte that is not UTF-8).
options (before IMAGE): --single  run the whole stack in one domain instead of four
                        --wait    wait for another domos process using IMAGE instead of failing
A command that changes the image locks it for itself (flock, exclusive); one that only reads
shares it with other readers.";

/// A usage error: the message and exit code 2.
fn usage(message: &str) -> (i32, String) {
    (2, format!("{message}\n{USAGE}"))
}

/// `text` as a TOML basic string, quotes included.
pub fn toml_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A storage system over the disk described by `disk` (`image = "…"` or `size = "…"`): the
/// driver, the buffer cache, the file system (given `fs_args`) and the client component `client`
/// (given `client_args`), one domain per component (JX's Figure 2), or one domain for all with
/// `single`, collocated (one module and heap, plain calls between the components) — the same
/// components either way — on two kernel CPUs.
pub fn storage_config(disk: &str, fs_args: &str, client: &str, client_args: &str, single: bool) -> String {
    storage_config_on(2, disk, fs_args, client, client_args, single)
}

/// [`storage_config`] on `cpus` kernel CPUs.
pub(crate) fn storage_config_on(
    cpus: u32,
    disk: &str,
    fs_args: &str,
    client: &str,
    client_args: &str,
    single: bool,
) -> String {
    let head = format!("[system]\ncpus = {cpus}\n[[disk]]\nname = \"disk0\"\n{disk}\n");
    let components = [
        ("Driver", "drv-disk", "disk=disk0"),
        ("Cache", "svc-bcache", "blocks=4096 block=4096 read_ahead=256"),
        ("Fs", "fs-ext2", fs_args),
        ("Client", client, client_args),
    ];
    let component =
        |name: &str, args: &str| format!("[[domain.component]]\nname = \"{name}\"\nargs = {}\n", toml_string(args));
    let limits = "max_message = \"1 MiB\"\n";
    if single {
        let mut text = format!(
            "{head}[[domain]]\nname = \"Storage\"\ncollocate = true\nheap = \"256 MiB\"\n{limits}grants = [\"devices\"]\n"
        );
        for (_, name, args) in &components {
            text.push_str(&component(name, args));
        }
        return text;
    }
    let mut text = head;
    for (domain, name, args) in &components {
        let grants = if matches!(*domain, "Driver" | "Client") { "grants = [\"devices\"]\n" } else { "" };
        text.push_str(&format!(
            "[[domain]]\nname = \"{domain}\"\nheap = \"64 MiB\"\n{limits}{grants}{}",
            component(name, args)
        ));
    }
    text
}

/// Where an ext2 (ext3, ext4) superblock keeps its magic number, and the number's bytes.
const EXT2_MAGIC_OFFSET: u64 = 1024 + 56;
const EXT2_MAGIC: [u8; 2] = 0xEF53u16.to_le_bytes();

/// The exit status when standard output is a pipe its reader closed (`domos fs IMAGE ls / |
/// head -1`): what a shell reports for a program killed by SIGPIPE, 128 + 13. Nothing is said.
pub const BROKEN_PIPE: i32 = 128 + 13;

/// `word` (a command, an option, a size) as text, or a usage error naming it. Paths inside the
/// image are bytes and need not be text.
fn text(word: &OsStr) -> Result<&str, (i32, String)> {
    word.to_str().ok_or_else(|| usage(&format!("domos fs: {}: not a command or an option", Path::new(word).display())))
}

/// What `mkfs` was asked for.
struct Mkfs {
    size_mib: Option<u64>,
    block: u32,
    force: bool,
}

/// A command, parsed: what the file system and `app-fs` are told, and what the host does.
struct Plan<'a> {
    /// `fs-ext2`'s arguments (before the clock and `ro`).
    fs_args: String,
    /// `app-fs`'s arguments: the command and its paths, bytes as given (not through TOML,
    /// whose strings are UTF-8).
    command: Vec<&'a [u8]>,
    /// Whether the command changes the file system: it mounts read-write and locks the image
    /// for itself alone; other commands mount read-only and share the image with other readers.
    writes: bool,
    mkfs: Option<Mkfs>,
    /// The local file `put` reads.
    input: Option<&'a Path>,
    /// Where `get` (a local file) or `cat` (standard output, `None` inside) puts the bytes.
    output: Option<Option<&'a Path>>,
}

/// Parses `COMMAND ARGS…`.
fn plan<'a>(command: &'a str, rest: &'a [&'a OsStr]) -> Result<Plan<'a>, (i32, String)> {
    let mut plan = Plan {
        fs_args: String::new(),
        command: vec![command.as_bytes()],
        writes: true,
        mkfs: None,
        input: None,
        output: None,
    };
    match (command, rest) {
        ("mkfs", rest) => {
            let mut mkfs = Mkfs { size_mib: None, block: 4096, force: false };
            let mut rest = rest.iter().copied();
            while let Some(word) = rest.next() {
                match text(word)? {
                    "--force" => mkfs.force = true,
                    "--block" => {
                        mkfs.block = rest
                            .next()
                            .and_then(|b| b.to_str()?.parse().ok())
                            .ok_or_else(|| usage("--block takes 1024 or 4096"))?
                    }
                    size => mkfs.size_mib = Some(size.parse::<u64>().map_err(|_| usage(&format!("bad size {size}")))?),
                }
            }
            // Made, then mounted read-only for df: a new file system has not been mounted yet.
            plan.fs_args = format!("mkfs block={}", mkfs.block);
            plan.command = vec![b"df"];
            plan.writes = false;
            plan.mkfs = Some(mkfs);
        }
        ("put", [local, path]) => {
            plan.command.push(path.as_bytes());
            plan.input = Some(Path::new(local));
        }
        ("get", [path, local]) => {
            plan.command.push(path.as_bytes());
            plan.output = Some(Some(Path::new(local)));
            plan.writes = false;
        }
        ("cat", [path]) => {
            plan.command.push(path.as_bytes());
            plan.output = Some(None);
            plan.writes = false;
        }
        ("ls" | "stat" | "readlink", [path]) => {
            plan.command.push(path.as_bytes());
            plan.writes = false;
        }
        ("mkdir" | "rm", [path]) => plan.command.push(path.as_bytes()),
        ("mv" | "ln", [a, b]) => plan.command.extend([a.as_bytes(), b.as_bytes()]),
        ("df", []) => plan.writes = false,
        (command, rest) => {
            let words: Vec<String> = rest.iter().map(|w| w.to_string_lossy().into_owned()).collect();
            return Err(usage(&format!("domos fs: unknown or incomplete command: {command} {}", words.join(" "))));
        }
    }
    Ok(plan)
}

/// Locks the image as Linux's tools lock a block device, with `flock`: shared for a command
/// that only reads, exclusive for one that writes, so that two `domos fs` never change one
/// image at once (each would write back its own idea of the bitmaps, and one's changes would be
/// lost). Without `wait`, an image in use is an error: `SHOWN is in use by another domos
/// process` and `hint`, for the caller to put its name before.
pub(crate) fn lock(
    file: &File,
    shown: impl std::fmt::Display,
    exclusive: bool,
    wait: bool,
    hint: &str,
) -> Result<(), String> {
    let failed = |e: std::io::Error| format!("{shown}: cannot lock: {e}");
    let tried = match (exclusive, wait) {
        (true, true) => return file.lock().map_err(failed),
        (false, true) => return file.lock_shared().map_err(failed),
        (true, false) => file.try_lock(),
        (false, false) => file.try_lock_shared(),
    };
    match tried {
        Ok(()) => Ok(()),
        Err(TryLockError::WouldBlock) => Err(format!("{shown} is in use by another domos process{hint}")),
        Err(TryLockError::Error(e)) => Err(failed(e)),
    }
}

/// What `--wait` changes, said when an image is in use.
pub(crate) const WAIT_HINT: &str = " (--wait waits for it)";

/// Opens and locks (exclusively, without waiting) the image of every `[[disk]]` of `config`, as
/// `domos fs` locks one it changes, and points the disk at the open file (`/proc/self/fd/N`), so
/// that no other `domos` changes an image while a booted system has it. Boot `config` while the
/// returned files (with the paths the configuration gave) are open; sync them after the
/// kernel's shutdown.
///
/// # Errors
/// An image that cannot be opened, or one in use by another `domos` process.
pub fn lock_disk_images(config: &mut SystemConfig) -> Result<Vec<(String, File)>, String> {
    let mut held = Vec::new();
    for disk in &mut config.disks {
        let Some(image) = &disk.image else { continue };
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(image)
            .map_err(|e| format!("disk {}: cannot open {image}: {e}", disk.name))?;
        lock(&file, image, true, false, "").map_err(|why| format!("disk {}: {why}", disk.name))?;
        let path = disk.image.replace(format!("/proc/self/fd/{}", file.as_raw_fd())).unwrap_or_default();
        held.push((path, file));
    }
    Ok(held)
}

/// Runs `domos fs ARGS`; returns the exit code, or the code and a message for standard error.
///
/// `IMAGE`, the local files of `put` and `get`, and the paths inside the image may be any path
/// the system accepts, UTF-8 or not.
///
/// # Errors
/// The exit code (1, 2 or [`BROKEN_PIPE`]) and what went wrong (empty for a broken pipe).
pub fn run(args: &[OsString]) -> Result<(), (i32, String)> {
    let mut args: Vec<&OsStr> = args.iter().map(OsString::as_os_str).collect();
    if matches!(args.as_slice(), [word] if ["--help", "-h", "help"].map(OsStr::new).contains(word)) {
        return say(format!("{USAGE}\n").as_bytes());
    }
    let (mut single, mut wait) = (false, false);
    while let Some(option) = args.first().and_then(|word| word.to_str()).filter(|word| word.starts_with("--")) {
        match option {
            "--single" => single = true,
            "--wait" => wait = true,
            _ => return Err(usage(&format!("domos fs: unknown option {option}"))),
        }
        args.remove(0);
    }
    let (image, command, rest) = match args.as_slice() {
        [image, command, rest @ ..] => (Path::new(image), text(command)?, rest),
        _ => return Err(usage("domos fs: an image and a command are needed")),
    };
    let shown = image.display();
    let plan = plan(command, rest)?;
    let file = std::fs::OpenOptions::new()
        .create(plan.mkfs.is_some())
        .truncate(false)
        .read(true)
        .write(true)
        .open(image)
        .map_err(|e| (1, format!("domos fs: {shown}: {e}")))?;
    lock(&file, &shown, plan.writes || plan.mkfs.is_some(), wait, WAIT_HINT)
        .map_err(|why| (1, format!("domos fs: {why}")))?;
    if let Some(mkfs) = &plan.mkfs {
        let len = file.metadata().map_err(|e| (1, format!("domos fs: {shown}: {e}")))?.len();
        // As mke2fs asks before it overwrites a file system, refuse without --force.
        let mut magic = [0; 2];
        if !mkfs.force && file.read_exact_at(&mut magic, EXT2_MAGIC_OFFSET).is_ok() && magic == EXT2_MAGIC {
            return Err((
                1,
                format!("domos fs: {shown} already contains an ext2 file system; mkfs --force overwrites it"),
            ));
        }
        if len == 0 || mkfs.size_mib.is_some() {
            let bytes = mkfs.size_mib.unwrap_or(16) << 20;
            file.set_len(bytes).map_err(|e| (1, format!("domos fs: {shown}: {e}")))?;
        }
    }
    // The local file to put is opened now, so that a missing one is said before the boot.
    let input = match plan.input {
        Some(local) => {
            Some((File::open(local).map_err(|e| (1, format!("domos fs: {}: {e}", local.display())))?, local))
        }
        None => None,
    };
    // Commands that only read mount the file system read-only: they change nothing, not even
    // the mount count. Every command gets the host's clock (Domos has none of its own).
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let mut fs_args: Vec<String> = plan.fs_args.split_whitespace().map(str::to_string).collect();
    fs_args.push(format!("time={}", u32::try_from(now).unwrap_or(u32::MAX)));
    if !plan.writes {
        fs_args.push("ro".into());
    }
    let fs_args = fs_args.join(" ");
    // The kernel opens the disk by the name of the file this process holds open (and locked),
    // whatever the image's own name (UTF-8 or not) and even if that name is replaced meanwhile.
    let held = format!("/proc/self/fd/{}", file.as_raw_fd());
    // One kernel CPU: a command is one client whose calls run one after the other, and a
    // second CPU would only spin while the disk's thread and this process's need the machine
    // (a 70 MiB get took 0.34-0.48 s on two, 0.29-0.37 s on one, on this 2-core machine).
    let image = format!("image = {}", toml_string(&held));
    let text = storage_config_on(1, &image, &fs_args, "app-fs", "", single);
    let mut config = SystemConfig::parse(&text).map_err(|e| (1, format!("domos fs: {e}")))?;
    // The command's words go to app-fs as they are, bytes and all, not through TOML text.
    for component in config.domains.iter_mut().flat_map(|domain| &mut domain.components) {
        if component.name == "app-fs" {
            component.args = plan.command.iter().map(|word| word.to_vec()).collect();
        }
    }
    let options = KernelOptions { cpus: config.system.cpus, ..KernelOptions::default() };
    let components =
        crate::embedded_components_named(&["drv-disk", "svc-bcache", "fs-ext2", "app-fs"]).map_err(|e| (1, e))?;
    let kernel = Kernel::start(&options, components, Console::capture()).map_err(|e| (1, e.to_string()))?;
    let moves_bytes = input.is_some() || plan.output.is_some();
    let (outcome, moved) = match moves_bytes.then(|| Pipe::create(&kernel)) {
        None => (kernel.boot(&config, Some(Duration::from_secs(600))), Ok(())),
        Some(Err(e)) => (Err(e), Ok(())),
        Some(Ok(mut pipe)) => {
            // The system runs in a thread of its own while this one moves the bytes.
            let finished = AtomicBool::new(false);
            std::thread::scope(|scope| {
                let system = scope.spawn(|| {
                    let outcome = kernel.boot(&config, Some(Duration::from_secs(600)));
                    finished.store(true, Ordering::Release);
                    outcome
                });
                let moved = match (input, plan.output) {
                    (Some((input, local)), _) => send(&mut pipe, &finished, input, local),
                    (None, Some(output)) => receive(&mut pipe, &finished, output),
                    (None, None) => Ok(()),
                };
                if moved.is_err() {
                    pipe.abort();
                }
                let outcome = system.join().unwrap_or_else(|_| Err("the system's thread panicked".into()));
                (outcome, moved)
            })
        }
    };
    let result = report(&kernel, outcome, moved);
    kernel.shutdown();
    // The lock goes with the file, once the kernel has closed its own descriptor.
    drop(file);
    result
}

/// Sends the bytes of `input` (the local file `local`) through the pipe, leaving out whole
/// slots of zeros (`app-fs` leaves zero blocks of the rest as holes), then the end.
fn send(pipe: &mut Pipe<'_>, finished: &AtomicBool, mut input: File, local: &Path) -> Result<(), (i32, String)> {
    use std::io::Read;
    let failed = |e: std::io::Error| (1, format!("domos fs: {}: {e}", local.display()));
    let mut buffer = vec![0u8; pipe::SLOT];
    let mut offset = 0u64;
    let size = input.metadata().map_or(0, |m| m.len());
    let mut progress = Progress::new(format!("domos fs: {}", local.display()));
    loop {
        progress.update(|| format!("{} of {}", mib(offset), mib(size)));
        // A whole slot, but for the end of the file.
        let mut filled = 0;
        while filled < buffer.len() {
            match input.read(&mut buffer[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(failed(e)),
            }
        }
        let data = &buffer[..filled];
        let record = |kind, len| pipe::Record { offset, len, kind };
        let taken = if filled == 0 {
            pipe.send(finished, record(pipe::END, 0), &[])
        } else if all_zeros(data) {
            Ok(true)
        } else {
            pipe.send(finished, record(pipe::DATA, filled as u32), data)
        };
        // The system finished before it took the bytes: it failed, and says why.
        if !taken.map_err(|e| (1, format!("domos fs: {e}")))? || filled == 0 {
            return Ok(());
        }
        offset += filled as u64;
    }
}

/// Whether `data` is all zeros (block by block: a branch per byte is slow over a large hole).
fn all_zeros(data: &[u8]) -> bool {
    data.chunks(4096).all(|block| block.iter().fold(0, |any, &byte| any | byte) == 0)
}

/// Receives the bytes `app-fs` sends into the local file `output` (created at the first
/// record, holes left as holes) or, for `None`, standard output.
fn receive(pipe: &mut Pipe<'_>, finished: &AtomicBool, output: Option<&Path>) -> Result<(), (i32, String)> {
    let mut file = None;
    let failed = |e: std::io::Error| (1, format!("domos fs: {}: {e}", output.unwrap_or(Path::new("-")).display()));
    let mut stdout = std::io::stdout().lock();
    // Only a get into a file shows progress: `cat` writes to the terminal itself.
    let mut progress = Progress::new(format!("domos fs: {}", output.unwrap_or(Path::new("-")).display()));
    let written = |result: std::io::Result<()>| match result {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err((BROKEN_PIPE, String::new())),
        Err(e) => Err((1, format!("domos fs: standard output: {e}"))),
        Ok(()) => Ok(()),
    };
    while let Some((record, data)) = pipe.receive(finished).map_err(|e| (1, format!("domos fs: {e}")))? {
        let Some(path) = output else {
            match record.kind {
                pipe::DATA => written(stdout.write_all(&data))?,
                pipe::HOLE => {
                    let zeros = vec![0u8; record.len as usize];
                    written(stdout.write_all(&zeros))?;
                }
                _ => return written(stdout.flush()),
            }
            continue;
        };
        let file = match &file {
            Some(file) => file,
            None => file.insert(File::create(path).map_err(failed)?),
        };
        match record.kind {
            pipe::DATA => file.write_all_at(&data, record.offset).map_err(failed)?,
            pipe::HOLE => {}
            _ => return file.set_len(record.offset).map_err(failed),
        }
        progress.update(|| mib(record.offset + u64::from(record.len)));
    }
    Ok(())
}

/// `bytes` for people, in MiB.
fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
}

/// Writes `bytes` to standard output; a reader that went away ends the command quietly with
/// [`BROKEN_PIPE`], as a program killed by SIGPIPE would.
fn say(bytes: &[u8]) -> Result<(), (i32, String)> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err((BROKEN_PIPE, String::new())),
        Err(e) => Err((1, format!("domos fs: standard output: {e}"))),
    }
}

/// Prints the command's output and turns its last line into the exit code; `moved` is how
/// moving the file's bytes went, on this side.
fn report(
    kernel: &Kernel,
    outcome: Result<domos_kernel::BootOutcome, String>,
    moved: Result<(), (i32, String)>,
) -> Result<(), (i32, String)> {
    let outcome = outcome.map_err(|e| (1, format!("domos fs: {e}")))?;
    // This side's failure (a local file, a reader that went away) is the cause of app-fs's.
    moved?;
    let lines = kernel.console.lines();
    // app-fs marks its lines; in `--single` every component shares the domain's prefix.
    let said: Vec<&str> = lines.iter().filter_map(|l| l.split_once("] ").map(|(_, text)| text)).collect();
    let verdict = said.iter().rev().find(|t| **t == "ok" || t.starts_with("error: "));
    let body: Vec<&str> = said.iter().filter_map(|t| t.strip_prefix("out: ")).collect();
    // What Linux would warn of at the mount (fs-ext2 says it): the command still ran.
    for warning in said.iter().filter(|t| t.starts_with("warning: ")) {
        eprintln!("domos fs: {warning}");
    }
    match verdict {
        Some(t) if *t == "ok" => {}
        Some(t) => return Err((1, format!("domos fs: {}", &t["error: ".len()..]))),
        None => {
            let why = said
                .iter()
                .find(|t| t.starts_with("cannot mount"))
                .map(|t| t.to_string())
                .or_else(|| outcome.domains.iter().find_map(|d| d.termination_reason()))
                .unwrap_or_else(|| lines.join("; "));
            return Err((1, format!("domos fs: the storage stack failed: {why}")));
        }
    }
    let text: String = body.iter().map(|line| format!("{line}\n")).collect();
    say(text.as_bytes())
}
