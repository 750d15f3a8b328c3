//! System tests of `domos mount`: Linux's own programs (`cp -a`, `tar`, `find`, `fio`) use an
//! ext2 image through Domos' FUSE driver, and e2fsprogs judge the image afterwards (`e2fsck -fn`
//! must find it clean, `debugfs` must read the same bytes). Every wait is bounded; a test that
//! fails leaves no mount behind (the guard unmounts and ends its `domos mount`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use domos_testing::{DEBUGFS, E2FSCK, FIO, FUSE, FUSERMOUNT, MKE2FS};

domos_testing::main! {
    linux_programs_copy_a_tree_in_and_out_and_fio_verifies_through_the_mount: [FUSE, MKE2FS, E2FSCK, DEBUGFS, FIO],
    sigterm_mid_use_leaves_a_clean_image_with_what_was_synced: [FUSE, MKE2FS, E2FSCK, DEBUGFS],
    clients_killed_mid_request_leave_the_mount_serving: [FUSE, MKE2FS, E2FSCK, DEBUGFS],
    an_ordinary_user_mounts_through_fusermount3: [FUSE, FUSERMOUNT, MKE2FS, E2FSCK, DEBUGFS],
}

/// The longest any one program may run.
const LIMIT: Duration = Duration::from_secs(120);

/// Runs `program` with `args` for at most [`LIMIT`]; its output.
fn run(program: &Path, args: &[&str]) -> Output {
    let child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{} runs: {e}", program.display()));
    let id = child.id();
    let (done, waited) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait_with_output());
    });
    match waited.recv_timeout(LIMIT) {
        Ok(output) => output.expect("the program's output"),
        Err(_) => {
            // SAFETY: `id` is the process this function started, still unwaited for (its
            // waiting thread has not returned), so the id is not reused.
            unsafe { libc::kill(id as i32, libc::SIGKILL) };
            panic!("{} {args:?} did not finish within {} s", program.display(), LIMIT.as_secs());
        }
    }
}

/// Runs `program` and checks that it succeeded; its standard output.
fn ok(program: &Path, args: &[&str]) -> Vec<u8> {
    let output = run(program, args);
    assert!(
        output.status.success(),
        "{} {args:?} failed: {}\n{}",
        program.display(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

fn tool(name: &str) -> PathBuf {
    domos_testing::tool(name).unwrap_or_else(|| panic!("{name} is installed"))
}

/// A directory of the test's own, an image in it made by mke2fs, and a mount of it by
/// `domos mount`, ended when dropped.
struct Mounted {
    dir: PathBuf,
    image: PathBuf,
    mountpoint: PathBuf,
    domos: Option<Child>,
}

/// The uid and gid of Debian's `nobody` and `nogroup`: the ordinary user a test mounts as.
const NOBODY: u32 = 65534;

impl Mounted {
    /// Makes a `mib` MiB ext2 image with 4 KiB blocks and mounts it as root.
    fn new(name: &str, mib: u64) -> Mounted {
        Mounted::start(name, mib, false)
    }

    /// Makes a `mib` MiB ext2 image with 4 KiB blocks and mounts it, as [`NOBODY`] when
    /// `ordinary` (the test's directory, the image and its root directory then belong to that
    /// user, and `domos mount` runs from a copy of the binary there, with its code cache there).
    fn start(name: &str, mib: u64, ordinary: bool) -> Mounted {
        let dir = std::env::temp_dir().join(format!("domos-fuse-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("mnt")).expect("a test directory");
        let image = dir.join("image");
        std::fs::File::create(&image).and_then(|f| f.set_len(mib << 20)).expect("an image file");
        let owner = format!("root_owner={NOBODY}:{NOBODY}");
        let mut mkfs = vec!["-q", "-F", "-t", "ext2", "-b", "4096"];
        if ordinary {
            mkfs.extend(["-E", &owner]);
        }
        mkfs.push(image.to_str().unwrap());
        ok(&MKE2FS.path(), &mkfs);
        let mountpoint = dir.join("mnt");
        let log = std::fs::File::create(dir.join("domos.log")).expect("a log file");
        let mut command = if ordinary {
            let binary = dir.join("domos");
            std::fs::copy(env!("CARGO_BIN_EXE_domos"), &binary).expect("a copy of domos");
            ok(&tool("chown"), &["-R", &format!("{NOBODY}:{NOBODY}"), dir.to_str().unwrap()]);
            let mut command = as_nobody();
            command.env("HOME", &dir).arg(binary);
            command
        } else {
            Command::new(env!("CARGO_BIN_EXE_domos"))
        };
        let domos = command
            .arg("mount")
            .args([&image, &mountpoint])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("the log twice"))
            .stderr(log)
            .spawn()
            .expect("domos mount runs");
        let mut mounted = Mounted { dir, image, mountpoint, domos: Some(domos) };
        // A first boot as another user compiles the components for its own code cache.
        let deadline = Instant::now() + Duration::from_secs(60);
        while !mounted.is_mounted() {
            assert!(Instant::now() < deadline, "not mounted within 60 s: {}", mounted.log());
            if let Some(status) = mounted.domos.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                panic!("domos mount ended with {status}: {}", mounted.log());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        mounted
    }

    fn is_mounted(&self) -> bool {
        let target = format!(" {} ", self.mountpoint.display());
        std::fs::read_to_string("/proc/self/mountinfo")
            .is_ok_and(|info| info.lines().any(|l| l.contains(&target) && l.contains("fuse.domos")))
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("domos.log")).unwrap_or_default()
    }

    fn path(&self, inside: &str) -> PathBuf {
        self.mountpoint.join(inside)
    }

    /// Waits at most a minute for `domos mount` to end; whether it succeeded.
    fn wait_for_exit(&mut self) -> bool {
        let mut child = self.domos.take().expect("domos mount is running");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = child.try_wait().expect("waiting for domos mount") {
                return status.success();
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("domos mount did not end within 60 s: {}", self.log());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `e2fsck -fn` on the image: it must find nothing to fix.
    fn check_clean(&self) {
        let output = run(&E2FSCK.path(), &["-fn", self.image.to_str().unwrap()]);
        assert!(
            output.status.success(),
            "e2fsck finds the image unclean:\n{}{}\ndomos mount said:\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
            self.log()
        );
    }

    /// The bytes of `path` in the image, as debugfs reads them.
    fn debugfs_cat(&self, path: &str) -> Vec<u8> {
        ok(&DEBUGFS.path(), &["-R", &format!("cat {path}"), self.image.to_str().unwrap()])
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if let Some(mut child) = self.domos.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if self.is_mounted() {
            let _ = run(&tool("umount"), &["-l", self.mountpoint.to_str().unwrap()]);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A command that runs its program as [`NOBODY`], without supplementary groups (`setpriv`).
fn as_nobody() -> Command {
    let mut command = Command::new(tool("setpriv"));
    command.args([&format!("--reuid={NOBODY}"), &format!("--regid={NOBODY}"), "--clear-groups"]);
    command
}

/// Runs `script` with `sh -c` as [`NOBODY`] and checks that it succeeded; its standard output.
fn ok_as_nobody(script: &str) -> String {
    let output = as_nobody().args(["sh", "-c", script]).stdin(Stdio::null()).output().expect("setpriv runs");
    let said = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "as nobody, {script:?} failed: {said}{}", String::from_utf8_lossy(&output.stderr));
    said
}

/// `len` bytes that differ from file to file (xorshift from `seed`).
fn bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

/// Every path under `root`, relative to it, sorted.
fn walk(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut todo = vec![PathBuf::new()];
    while let Some(relative) = todo.pop() {
        let here = root.join(&relative);
        if here.symlink_metadata().expect("a walked path").is_dir() {
            for entry in std::fs::read_dir(&here).expect("a directory") {
                todo.push(relative.join(entry.expect("an entry").file_name()));
            }
        }
        found.push(relative);
    }
    found.sort();
    found
}

/// Asserts that the trees `a` and `b` hold the same names, kinds, bytes, link targets and
/// permission bits.
fn same_tree(a: &Path, b: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let (names_a, names_b) = (walk(a), walk(b));
    assert_eq!(names_a, names_b, "the same names");
    for name in names_a {
        let (pa, pb) = (a.join(&name), b.join(&name));
        let (ma, mb) = (pa.symlink_metadata().unwrap(), pb.symlink_metadata().unwrap());
        assert_eq!(ma.file_type(), mb.file_type(), "{}", name.display());
        assert_eq!(ma.permissions().mode() & 0o7777, mb.permissions().mode() & 0o7777, "{}", name.display());
        if ma.is_symlink() {
            assert_eq!(std::fs::read_link(&pa).unwrap(), std::fs::read_link(&pb).unwrap(), "{}", name.display());
        } else if ma.is_file() {
            assert!(std::fs::read(&pa).unwrap() == std::fs::read(&pb).unwrap(), "{}: other bytes", name.display());
        }
    }
}

fn linux_programs_copy_a_tree_in_and_out_and_fio_verifies_through_the_mount() {
    let mut mounted = Mounted::new("tree", 64);
    // The tree: files of several sizes (a hole's worth of zeros too), directories, a symlink
    // and a hard link.
    let source = mounted.dir.join("source");
    std::fs::create_dir_all(source.join("sub/deeper")).unwrap();
    for (i, (name, len)) in
        [("empty", 0), ("one", 1), ("block", 4096), ("odd", 4097), ("mid", 70_000), ("big", 3 << 20)].iter().enumerate()
    {
        std::fs::write(source.join(name), bytes(*len, i as u64 + 1)).unwrap();
    }
    std::fs::write(source.join("sub/deeper/zeros"), vec![0u8; 300_000]).unwrap();
    std::fs::write(source.join("sub/two-mib"), bytes(2 << 20, 99)).unwrap();
    std::os::unix::fs::symlink("../big", source.join("sub/link")).unwrap();
    std::fs::hard_link(source.join("mid"), source.join("sub/mid-again")).unwrap();
    // Names with every byte ext2 allows (all but NUL and `/`), in a directory with such a name,
    // and a symbolic link whose target is no text: names are bytes from Linux to the disk.
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let odd = source.join(OsStr::from_bytes(b"odd \\ \" ' \n \t \xff dir"));
    std::fs::create_dir(&odd).unwrap();
    let every_byte: Vec<u8> = (1..=255u8).filter(|&b| b != b'/').collect();
    let high: Vec<u8> = (0x80..=0xffu8).collect();
    let names: [&[u8]; 9] =
        [b"a b", b"back\\slash", b"x\"y", b"it's", b"\\u0041", b"new\nline\ttab", &high, &every_byte, &[b'n'; 255]];
    for (i, name) in names.iter().enumerate() {
        std::fs::write(odd.join(OsStr::from_bytes(name)), bytes(100 + i, 200 + i as u64)).unwrap();
    }
    std::os::unix::fs::symlink(OsStr::from_bytes(b"a target \xfe\n"), odd.join("link \\ odd")).unwrap();
    let src = source.to_str().unwrap();
    let inside = mounted.path("tree");
    ok(&tool("cp"), &["-a", src, inside.to_str().unwrap()]);

    // Out again with tar, and compared byte for byte; the hard link is one inode inside.
    let archive = mounted.dir.join("tree.tar");
    ok(&tool("tar"), &["-C", mounted.mountpoint.to_str().unwrap(), "-cf", archive.to_str().unwrap(), "tree"]);
    let back = mounted.dir.join("back");
    std::fs::create_dir_all(&back).unwrap();
    ok(&tool("tar"), &["-C", back.to_str().unwrap(), "-xf", archive.to_str().unwrap()]);
    same_tree(&source, &back.join("tree"));
    same_tree(&source, &inside);
    use std::os::unix::fs::MetadataExt;
    let (a, b) =
        (std::fs::metadata(inside.join("mid")).unwrap(), std::fs::metadata(inside.join("sub/mid-again")).unwrap());
    assert_eq!((a.ino(), a.nlink()), (b.ino(), 2), "a hard link is one inode with two names");
    let count = |root: &Path| ok(&tool("find"), &[root.to_str().unwrap()]).iter().filter(|&&b| b == b'\n').count();
    assert_eq!(count(&inside), count(&source), "find counts the same entries");

    // Past ext2's largest file (about 2 TiB with 4 KiB blocks): EFBIG, as Linux's ext2 says.
    let huge = std::fs::File::create(mounted.path("huge")).unwrap().set_len(5 << 40);
    assert_eq!(huge.map_err(|e| e.raw_os_error()), Err(Some(libc::EFBIG)), "a 5 TiB file");
    std::fs::remove_file(mounted.path("huge")).unwrap();

    // fio writes a file at random offsets and verifies every block's checksum.
    let fio = run(
        &FIO.path(),
        &[
            "--name=verify",
            &format!("--filename={}", mounted.path("fio.dat").display()),
            "--size=4M",
            "--bs=4k",
            "--rw=randwrite",
            "--ioengine=psync",
            "--verify=crc32c",
            "--do_verify=1",
            "--loops=3",
            "--verify_state_save=0",
        ],
    );
    let said = String::from_utf8_lossy(&fio.stdout).into_owned() + &String::from_utf8_lossy(&fio.stderr);
    assert!(fio.status.success() && said.contains("err= 0"), "fio verifies: {said}");

    // An outside unmount ends domos mount, which syncs: a clean image with the same bytes.
    ok(&tool("umount"), &[mounted.mountpoint.to_str().unwrap()]);
    assert!(mounted.wait_for_exit(), "domos mount succeeds: {}", mounted.log());
    mounted.check_clean();
    assert!(mounted.debugfs_cat("/tree/big") == bytes(3 << 20, 6), "debugfs reads the bytes cp wrote");
    assert!(mounted.debugfs_cat("/tree/sub/two-mib") == bytes(2 << 20, 99));
}

fn sigterm_mid_use_leaves_a_clean_image_with_what_was_synced() {
    let mut mounted = Mounted::new("sigterm", 32);
    let synced = bytes(2 << 20, 7);
    {
        use std::io::Write;
        let mut file = std::fs::File::create(mounted.path("synced")).unwrap();
        file.write_all(&synced).unwrap();
        file.sync_all().unwrap();
    }
    // A writer keeps the mount busy while the signal comes, through a file it opened inside
    // (so that it never writes beside the mount once it is gone); it stops at the first error
    // (the connection goes away) or after a bounded amount of work.
    let mut busy = std::fs::File::create(mounted.path("busy")).unwrap();
    let writer = std::thread::spawn(move || {
        use std::os::unix::fs::FileExt;
        let block = vec![0x5au8; 64 * 1024];
        for i in 0..2_000u64 {
            if busy.write_all_at(&block, i % 64 * 65536).is_err() {
                return i;
            }
        }
        let _ = &mut busy;
        2_000
    });
    std::thread::sleep(Duration::from_millis(300));
    let pid = mounted.domos.as_ref().expect("running").id();
    // SAFETY: `pid` is the child this test started and has not waited for, so it is still ours.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGTERM) }, 0, "the signal is sent");
    assert!(mounted.wait_for_exit(), "domos mount ends cleanly on SIGTERM: {}", mounted.log());
    let _ = writer.join();
    assert!(!mounted.is_mounted(), "unmounted");
    mounted.check_clean();
    assert!(mounted.debugfs_cat("/synced") == synced, "the synced file survives");
}

/// Programs killed while their requests are in the driver (a large read and a large write, each
/// killed after 0 to 45 ms, ten times): Linux drops their replies; the mount goes on serving,
/// and the image is clean afterwards.
fn clients_killed_mid_request_leave_the_mount_serving() {
    let mut mounted = Mounted::new("killed-clients", 64);
    let big = bytes(8 << 20, 3);
    std::fs::write(mounted.path("big"), &big).unwrap();
    let dd = tool("dd");
    for round in 0..10u64 {
        let spawn = |args: Vec<String>| {
            Command::new(&dd).args(args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("dd runs")
        };
        let reader =
            spawn(vec![format!("if={}", mounted.path("big").display()), "of=/dev/null".into(), "bs=1M".into()]);
        let writer = spawn(vec![
            "if=/dev/zero".into(),
            format!("of={}", mounted.path(&format!("w{round}")).display()),
            "bs=1M".into(),
            "count=16".into(),
            "oflag=sync".into(),
        ]);
        std::thread::sleep(Duration::from_millis(round * 5));
        for mut child in [reader, writer] {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
    // Still serving: a new file written and read back, the big one unchanged.
    std::fs::write(mounted.path("after"), b"still here").unwrap();
    assert_eq!(std::fs::read(mounted.path("after")).unwrap(), b"still here");
    assert!(std::fs::read(mounted.path("big")).unwrap() == big, "the big file reads back whole");
    ok(&tool("umount"), &[mounted.mountpoint.to_str().unwrap()]);
    assert!(mounted.wait_for_exit(), "domos mount succeeds: {}", mounted.log());
    mounted.check_clean();
    assert_eq!(mounted.debugfs_cat("/after"), b"still here");
}

/// `/dev/fuse` readable and writable by every user, as Linux makes it (`fusermount3` opens it
/// as the user who mounts; containers may create it for root only), its mode restored when
/// dropped.
struct DeviceOpenToAll {
    restore: Option<u32>,
}

impl DeviceOpenToAll {
    fn new() -> DeviceOpenToAll {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata("/dev/fuse").expect("/dev/fuse").permissions().mode() & 0o7777;
        if mode & 0o666 == 0o666 {
            return DeviceOpenToAll { restore: None };
        }
        std::fs::set_permissions("/dev/fuse", std::fs::Permissions::from_mode(0o666)).expect("chmod /dev/fuse");
        DeviceOpenToAll { restore: Some(mode) }
    }
}

impl Drop for DeviceOpenToAll {
    fn drop(&mut self) {
        use std::os::unix::fs::PermissionsExt;
        if let Some(mode) = self.restore {
            let _ = std::fs::set_permissions("/dev/fuse", std::fs::Permissions::from_mode(mode));
        }
    }
}

/// Without root, `domos mount` falls back on `fusermount3`: the user's files are the user's,
/// the user's `fusermount3 -u` ends the mount with a clean image, and a `domos mount` killed
/// outright leaves no mount behind (the helper unmounts when its socket closes).
fn an_ordinary_user_mounts_through_fusermount3() {
    let _device = DeviceOpenToAll::new();
    let mut mounted = Mounted::start("user", 32, true);
    let mnt = mounted.mountpoint.display().to_string();
    let listing = ok_as_nobody(&format!(
        "mkdir {mnt}/d && printf hello > {mnt}/d/f && ln -s f {mnt}/d/l && cp -a {mnt}/d {mnt}/e && ls -ln {mnt} {mnt}/d {mnt}/e"
    ));
    let entries: Vec<&str> = listing.lines().filter(|line| line.starts_with(['-', 'd', 'l'])).collect();
    assert_eq!(entries.len(), 7, "d, e, lost+found (root's), and the f and l in d and e: {listing}");
    for line in entries.iter().filter(|line| !line.ends_with("lost+found")) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(fields[2..4], ["65534", "65534"], "made by nobody, owned by nobody: {line}");
    }
    let others_allowed = std::fs::read_to_string("/etc/fuse.conf")
        .is_ok_and(|conf| conf.lines().any(|line| line.trim() == "user_allow_other"));
    if !others_allowed {
        assert!(
            std::fs::read_dir(&mounted.mountpoint).is_err(),
            "without user_allow_other in /etc/fuse.conf only the mounting user reaches the files"
        );
    }
    ok_as_nobody(&format!("fusermount3 -u {mnt}"));
    assert!(mounted.wait_for_exit(), "domos mount ends when its user unmounts: {}", mounted.log());
    assert!(!mounted.is_mounted(), "unmounted");
    mounted.check_clean();
    assert_eq!(mounted.debugfs_cat("/e/f"), b"hello", "debugfs reads what cp wrote");
    let stat = ok(&DEBUGFS.path(), &["-R", "stat /e/f", mounted.image.to_str().unwrap()]);
    let stat = String::from_utf8_lossy(&stat);
    assert!(stat.contains("User: 65534") && stat.contains("Group: 65534"), "owned by nobody on the disk: {stat}");

    // SIGTERM: domos mount syncs and unmounts through fusermount3 itself.
    let mut stopped = Mounted::start("user-stopped", 32, true);
    ok_as_nobody(&format!("printf kept > {}/f", stopped.mountpoint.display()));
    let pid = stopped.domos.as_ref().expect("running").id();
    // SAFETY: `pid` is the child this test started and has not waited for, so it is still ours.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGTERM) }, 0, "the signal is sent");
    assert!(stopped.wait_for_exit(), "domos mount ends cleanly on SIGTERM: {}", stopped.log());
    assert!(!stopped.is_mounted(), "unmounted by domos mount");
    stopped.check_clean();
    assert_eq!(stopped.debugfs_cat("/f"), b"kept");

    // SIGKILL: fusermount3's auto_unmount removes the dead mount where it can see the connection
    // is gone: with allow_other, or from fuse3 3.15 on (libfuse issue 586); elsewhere the user's
    // own fusermount3 -u does.
    let mut killed = Mounted::start("user-killed", 32, true);
    let mut domos = killed.domos.take().expect("running");
    domos.kill().expect("SIGKILL");
    let _ = domos.wait();
    let version = ok(&FUSERMOUNT.path(), &["-V"]);
    let version = String::from_utf8_lossy(&version);
    let fixed = version
        .rsplit(' ')
        .next()
        .and_then(|v| v.trim().strip_prefix("3."))
        .and_then(|v| v.split('.').next()?.parse::<u32>().ok())
        .is_some_and(|minor| minor >= 15);
    if others_allowed || fixed {
        let deadline = Instant::now() + Duration::from_secs(10);
        while killed.is_mounted() {
            assert!(Instant::now() < deadline, "a killed domos mount's mount is gone within 10 s ({version})");
            std::thread::sleep(Duration::from_millis(50));
        }
    } else {
        ok_as_nobody(&format!("fusermount3 -u {}", killed.mountpoint.display()));
        assert!(!killed.is_mounted(), "the user removes the dead mount");
    }
}
