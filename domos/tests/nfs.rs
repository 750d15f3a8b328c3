//! NFS server tests: `configs/nfs-server.toml` (every component in one domain) and
//! `configs/nfs-server-separate.toml` (one domain each), booted over a TAP card moved into a
//! network namespace the test makes, with addresses inside that namespace only. Judges: libnfs'
//! `nfs-cp`, `nfs-ls` and `nfs-cat` (TCP, through the portmapper), `e2fsck -fn` and `debugfs`
//! on the image afterwards, and a client over UDP written here with the server's own protocol
//! crate (`domos-nfs`), which also sends the malformed calls.

use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::time::Duration;

use domos_kernel::Console;
use domos_loader::ComponentRegistry;
use domos_nfs::mount::{self, DirPath, MountResult};
use domos_nfs::nfs3::{self, *};
use domos_nfs::portmap::{self, Mapping};
use domos_nfs::rpc::{self, AuthSys, Message, OpaqueAuth, ReplyStatus, auth_stat, flavor};
use domos_nfs::xdr::{Decoder, Encoder, Xdr};
use domos_testing::{DEBUGFS, E2FSCK, IP, NFS_CAT, NFS_CP, NFS_LS, PASST, TAP};

domos_testing::main! {
    libnfs_copies_a_tree_in_and_out_of_the_single_domain_server: [TAP, IP, NFS_CP, NFS_LS, NFS_CAT, E2FSCK, DEBUGFS],
    libnfs_copies_a_tree_in_and_out_of_the_separate_domains_server: [TAP, IP, NFS_CP, NFS_LS, NFS_CAT, E2FSCK, DEBUGFS],
    every_nfs_procedure_answers_over_udp: [TAP, IP],
    bad_calls_handles_names_and_abandoned_connections_leave_the_single_domain_server_serving: [TAP, IP, NFS_LS],
    bad_calls_handles_names_and_abandoned_connections_leave_the_separate_domains_server_serving: [TAP, IP, NFS_LS],
    the_default_system_serves_libnfs_on_127_0_0_1_without_root: [PASST, NFS_CP, NFS_LS, NFS_CAT],
}

mod common;
use common::{Run, output_within, registry_with};

fn registry() -> ComponentRegistry {
    registry_with(&[])
}

/// The server's address inside the namespace, and the namespace's own.
const SERVER: &str = "10.99.1.2";
const CLIENT: &str = "10.99.1.1/24";

/// A network namespace made for one test (deleted, with what is in it, when dropped), in which
/// the judges run.
struct Namespace(domos::host::Namespace);

impl Namespace {
    fn new(name: String) -> Namespace {
        Namespace(domos::host::Namespace::new(name).expect("a network namespace"))
    }

    /// Runs a libnfs client, which must succeed; its standard output.
    fn nfs(&self, judge: domos_testing::Judge, args: &[&str]) -> Vec<u8> {
        self.nfs_within(judge, args, Duration::ZERO)
    }

    /// Runs a libnfs client again until it succeeds, for at most `patience` after its first
    /// try; its standard output. For a server still working through a flood it was sent.
    fn nfs_within(&self, judge: domos_testing::Judge, args: &[&str], patience: Duration) -> Vec<u8> {
        let deadline = std::time::Instant::now() + patience;
        loop {
            let mut command = self.0.command(&judge.path());
            command.args(args);
            let out = output_within(command, b"", Duration::from_secs(60));
            if out.status.success() {
                return out.stdout;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{} {args:?}: {}{}",
                judge.name,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// Runs `f` on a thread that has entered the namespace, so the sockets it opens are the
    /// namespace's.
    fn enter<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        self.0.within(|| Ok(f())).expect("a thread enters the namespace")
    }
}

/// A booted file server with its namespace and image.
struct Served {
    run: Option<Run>,
    namespace: Namespace,
    image: PathBuf,
    config: String,
    directory: PathBuf,
    tap: String,
}

impl Served {
    /// Makes a 64 MiB ext2 image (unless `image` is given), boots `config_file` over it with a
    /// TAP card of its own, moves the card into a new namespace and configures the link there.
    fn start(config_file: &str, label: &str) -> Served {
        let pid = std::process::id();
        let directory = std::env::temp_dir().join(format!("domos-nfs-{label}-{pid}"));
        let _ = std::fs::remove_dir_all(&directory);
        std::fs::create_dir_all(&directory).expect("a scratch directory");
        let image = directory.join("nfs.img");
        let made = std::process::Command::new(env!("CARGO_BIN_EXE_domos"))
            .args(["fs", image.to_str().expect("a UTF-8 path"), "mkfs", "64"])
            .output()
            .expect("domos fs runs");
        assert!(made.status.success(), "domos fs mkfs: {}", String::from_utf8_lossy(&made.stderr));
        let tap = format!("dnfs{}{}", &label[..2], pid % 10_000);
        let source = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(config_file))
            .expect("the configuration");
        let config = source
            .replace("tap = \"dnfs0\"", &format!("tap = \"{tap}\""))
            .replace("image = \"nfs-server.img\"", &format!("image = {:?}", image.to_str().unwrap()));
        assert!(config.contains(&tap) && config.contains("nfs.img"), "the configuration names its card and image");
        let namespace = Namespace::new(format!("domos-nfs-{label}-{pid}"));
        let mut served = Served { run: None, namespace, image, config, directory, tap };
        served.boot();
        served
    }

    /// Boots the configuration, waits until the NFS server says it serves, and moves the TAP
    /// card the kernel made into the namespace (a card lives as long as its system).
    fn boot(&mut self) {
        let (kernel, outcome) =
            domos::boot(&self.config, registry(), Console::capture(), Some(Duration::from_millis(1))).expect("boots");
        let run = Run { kernel, outcome };
        let start = std::time::Instant::now();
        let serving = |run: &Run| {
            run.has_line("NFSv3 and MOUNT v3 on UDP and TCP port 2049")
                && run.has_line("rpcbind v2 on UDP and TCP port 111")
        };
        while !serving(&run) && start.elapsed() < Duration::from_secs(30) {
            let failed = run.has_line("failed") || run.outcome.domains.iter().any(|d| d.is_terminated());
            assert!(!failed, "the file server failed to start: {:#?}", run.lines());
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(run.has_line("rpcbind v2 on UDP and TCP port 111"), "{:#?}", run.lines());
        assert!(run.has_line("NFSv3 and MOUNT v3 on UDP and TCP port 2049"), "{:#?}", run.lines());
        self.run = Some(run);
        // The configurations' card has jumbo frames; the Linux end takes the same MTU.
        let mtu = domos_loader::config::SystemConfig::parse(&self.config).expect("parses").nics[0].mtu;
        self.namespace.0.adopt(&self.tap, CLIENT, mtu).expect("the TAP card moves into the namespace");
    }

    /// Shuts the system down (the kernel's disk threads finish what was queued).
    fn stop(&mut self) {
        let run = self.run.take().expect("running");
        for domain in &run.outcome.domains {
            assert!(!domain.is_terminated(), "domain {} was terminated: {:#?}", domain.name, run.lines());
        }
        drop(run);
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.run.take();
        let _ = std::fs::remove_dir_all(&self.directory);
    }
}

/// An NFS client over UDP: one call in flight, retried after a timeout.
struct UdpClient {
    socket: UdpSocket,
    xid: u32,
    credential: Vec<u8>,
}

/// What a call got back: the reply's status and the bytes of its results.
type Reply = (ReplyStatus, Vec<u8>);

impl UdpClient {
    fn new(port: u16) -> UdpClient {
        let socket = UdpSocket::bind("0.0.0.0:0").expect("a UDP socket");
        socket.connect((SERVER, port)).expect("connect");
        socket.set_read_timeout(Some(Duration::from_millis(500))).expect("a timeout");
        let sys = AuthSys { stamp: 1, machine_name: b"test".to_vec(), uid: 0, gid: 0, gids: vec![] };
        UdpClient { socket, xid: std::process::id(), credential: sys.to_xdr() }
    }

    /// Sends `message` and waits for the reply to `xid`; `None` when three tries got none.
    fn exchange(&self, xid: u32, message: &[u8]) -> Option<Reply> {
        let mut buf = vec![0; 65536];
        for _ in 0..3 {
            self.socket.send(message).expect("send");
            while let Ok(len) = self.socket.recv(&mut buf) {
                let mut d = Decoder::new(&buf[..len]);
                if let Ok(Message::Reply(reply)) = Message::decode(&mut d)
                    && reply.xid == xid
                {
                    return Some((reply.status, d.rest().to_vec()));
                }
            }
        }
        None
    }

    /// Calls `procedure` of `program` with AUTH_SYS and the encoded `args`.
    fn call_raw(&mut self, program: u32, version: u32, procedure: u32, args: &[u8]) -> Option<Reply> {
        self.xid = self.xid.wrapping_add(1);
        let mut e = Encoder::new();
        let credential = OpaqueAuth { flavor: flavor::AUTH_SYS, body: &self.credential };
        rpc::encode_call(&mut e, self.xid, program, version, procedure, &credential);
        let mut message = e.into_vec();
        message.extend_from_slice(args);
        self.exchange(self.xid, &message)
    }

    /// Calls and decodes a successful reply's results.
    fn call<R: Xdr>(&mut self, program: u32, version: u32, procedure: u32, args: &impl Xdr) -> R {
        let (status, results) = self.call_raw(program, version, procedure, &args.to_xdr()).expect("the server answers");
        assert_eq!(status, ReplyStatus::Success, "procedure {procedure} of program {program}");
        R::from_xdr(&results).expect("the results decode")
    }

    fn nfs<R: Xdr>(&mut self, procedure: u32, args: &impl Xdr) -> R {
        self.call(nfs3::PROGRAM, nfs3::VERSION, procedure, args)
    }

    fn mount_root(&mut self) -> FileHandle {
        match self.call(mount::PROGRAM, mount::VERSION, mount::procedure::MNT, &DirPath(b"/".to_vec())) {
            MountResult::Ok { handle, flavors } => {
                assert!(flavors.contains(&flavor::AUTH_SYS) && flavors.contains(&flavor::AUTH_NONE), "{flavors:?}");
                handle
            }
            MountResult::Err(status) => panic!("MNT /: {status:?}"),
        }
    }

    fn lookup(&mut self, dir: FileHandle, name: &str) -> LookupRes {
        self.nfs(procedure::LOOKUP, &LookupArgs { what: DirOpArgs { dir, name: name.into() } })
    }

    fn getattr(&mut self, object: FileHandle) -> GetattrRes {
        self.nfs(procedure::GETATTR, &GetattrArgs { object })
    }
}

/// A call header with an empty credential body and AUTH_NONE verifier, word by word.
fn call(xid: u32, rpc_version: u32, program: u32, version: u32, procedure: u32, cred_flavor: u32) -> Vec<u8> {
    let words = [xid, rpc::CALL, rpc_version, program, version, procedure, cred_flavor, 0, 0, 0];
    words.iter().flat_map(|w| w.to_be_bytes()).collect()
}

/// The port the portmapper on the server gives for (program, version, protocol).
fn getport(program: u32, version: u32, protocol: u32) -> u32 {
    let mut portmapper = UdpClient::new(portmap::PORT);
    portmapper.call(
        portmap::PROGRAM,
        portmap::VERSION,
        portmap::procedure::GETPORT,
        &Mapping { program, version, protocol, port: 0 },
    )
}

/// Deterministic bytes for the file `seed`.
fn content(len: usize, seed: u32) -> Vec<u8> {
    let mut x = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

/// The tree copied in and out: path under the export, size.
const TREE: &[(&str, usize)] = &[
    ("empty", 0),
    ("hello.txt", 13),
    ("page.bin", 4096),
    ("odd.bin", 70_001),
    ("big.bin", 3 * 1024 * 1024 + 123),
    ("sub/inner.bin", 200_000),
    ("sub/deeper/last.txt", 5_000),
];

fn copy_a_tree_in_and_out(config_file: &str, label: &str) {
    let mut served = Served::start(config_file, label);
    let url = |path: &str| format!("nfs://{SERVER}//{path}");

    // The portmapper tells where both programs are, on both protocols.
    let (nfs_tcp, mount_udp) = served
        .namespace
        .enter(|| (getport(nfs3::PROGRAM, 3, portmap::IPPROTO_TCP), getport(mount::PROGRAM, 3, portmap::IPPROTO_UDP)));
    assert_eq!((nfs_tcp, mount_udp), (2049, 2049));

    // libnfs-utils cannot make directories or symlinks: the UDP client does.
    let root = served.namespace.enter(|| {
        let mut client = UdpClient::new(2049);
        let root = client.mount_root();
        let mut dir = root;
        for name in ["sub", "deeper"] {
            let made: CreateRes = client.nfs(
                procedure::MKDIR,
                &MkdirArgs {
                    place: DirOpArgs { dir, name: name.into() },
                    attributes: Sattr3 { mode: Some(0o755), ..Sattr3::default() },
                },
            );
            let Res::Ok(CreateOk { obj: Some(handle), .. }) = made else { panic!("MKDIR {name}: {made:?}") };
            dir = handle;
        }
        let link: CreateRes = client.nfs(
            procedure::SYMLINK,
            &SymlinkArgs {
                place: DirOpArgs { dir: root, name: "link".into() },
                symlink_attributes: Sattr3::default(),
                symlink_data: "sub/inner.bin".into(),
            },
        );
        assert!(matches!(link, Res::Ok(_)), "SYMLINK: {link:?}");
        root
    });

    // Into the server with nfs-cp (TCP), then back out, byte for byte.
    let local = served.directory.join("local");
    std::fs::create_dir_all(&local).unwrap();
    for (i, (path, len)) in TREE.iter().enumerate() {
        let file = local.join(path.replace('/', "_"));
        std::fs::write(&file, content(*len, i as u32)).unwrap();
        served.namespace.nfs(NFS_CP, &[file.to_str().unwrap(), &url(path)]);
    }
    for (i, (path, len)) in TREE.iter().enumerate() {
        let back = served.directory.join(format!("back-{i}"));
        served.namespace.nfs(NFS_CP, &[&url(path), back.to_str().unwrap()]);
        let bytes = std::fs::read(&back).unwrap();
        assert_eq!(bytes.len(), *len, "{path} came back with its length");
        assert!(bytes == content(*len, i as u32), "{path} came back byte for byte");
    }
    let hello = served.namespace.nfs(NFS_CAT, &[&url("hello.txt")]);
    assert_eq!(hello, content(13, 1));
    let listing = String::from_utf8(served.namespace.nfs(NFS_LS, &["-R", &format!("nfs://{SERVER}/")])).unwrap();
    for name in ["hello.txt", "big.bin", "sub", "inner.bin", "deeper", "last.txt", "link"] {
        assert!(listing.contains(name), "nfs-ls -R lists {name}: {listing}");
    }

    // The UDP client: LOOKUP, GETATTR, READ, READDIRPLUS, READLINK.
    let big_handle = served.namespace.enter(|| {
        let mut client = UdpClient::new(2049);
        assert_eq!(client.mount_root(), root, "MNT gives the same root handle every time");
        let Res::Ok(found) = client.lookup(root, "odd.bin") else { panic!("LOOKUP odd.bin") };
        let Res::Ok(attributes) = client.getattr(found.object) else { panic!("GETATTR odd.bin") };
        assert_eq!((attributes.kind, attributes.size), (FileType::Regular, 70_001));
        let mut data = Vec::new();
        loop {
            let read: ReadRes =
                client.nfs(procedure::READ, &ReadArgs { file: found.object, offset: data.len() as u64, count: 4096 });
            let Res::Ok(read) = read else { panic!("READ: {read:?}") };
            assert_eq!(read.count as usize, read.data.len());
            data.extend_from_slice(&read.data);
            if read.eof {
                break;
            }
            assert!(!read.data.is_empty(), "READ makes progress");
        }
        assert!(data == content(70_001, 3), "READ over UDP gives the file's bytes");
        let mut names = Vec::new();
        let (mut cookie, mut cookieverf) = (0, [0; 8]);
        loop {
            let listed: ReaddirplusRes = client.nfs(
                procedure::READDIRPLUS,
                &ReaddirplusArgs { dir: root, cookie, cookieverf, dircount: 512, maxcount: 2048 },
            );
            let Res::Ok(listed) = listed else { panic!("READDIRPLUS: {listed:?}") };
            for entry in &listed.entries {
                let name = String::from_utf8(entry.name.0.clone()).unwrap();
                if name == "odd.bin" {
                    assert_eq!(entry.name_handle, Some(found.object), "READDIRPLUS gives LOOKUP's handle");
                    assert_eq!(entry.name_attributes.map(|a| a.size), Some(70_001));
                }
                names.push(name);
                cookie = entry.cookie;
            }
            cookieverf = listed.cookieverf;
            if listed.eof {
                break;
            }
        }
        for name in [".", "..", "lost+found", "empty", "hello.txt", "page.bin", "odd.bin", "big.bin", "sub", "link"] {
            assert!(names.iter().any(|n| n == name), "READDIRPLUS lists {name}: {names:?}");
        }
        let Res::Ok(link) = client.lookup(root, "link") else { panic!("LOOKUP link") };
        let target: ReadlinkRes = client.nfs(procedure::READLINK, &ReadlinkArgs { symlink: link.object });
        assert!(matches!(target, Res::Ok(ReadlinkOk { ref data, .. }) if data.0 == b"sub/inner.bin"), "{target:?}");
        let Res::Ok(big) = client.lookup(root, "big.bin") else { panic!("LOOKUP big.bin") };
        big.object
    });

    // Linux's tools read the image the server wrote.
    served.stop();
    let image = served.image.to_str().unwrap().to_string();
    let fsck = std::process::Command::new(E2FSCK.path()).args(["-fn", &image]).output().unwrap();
    assert!(
        fsck.status.success(),
        "e2fsck -fn: {}{}",
        String::from_utf8_lossy(&fsck.stdout),
        String::from_utf8_lossy(&fsck.stderr)
    );
    for (i, (path, len)) in TREE.iter().enumerate() {
        let out = served.directory.join(format!("debugfs-{i}"));
        let dump = format!("dump /{path} {}", out.to_str().unwrap());
        let ran = std::process::Command::new(DEBUGFS.path()).args(["-R", &dump, &image]).output().unwrap();
        assert!(ran.status.success(), "debugfs {dump}");
        assert!(std::fs::read(&out).unwrap() == content(*len, i as u32), "debugfs reads /{path} as written");
    }
    let stat = std::process::Command::new(DEBUGFS.path()).args(["-R", "stat /link", &image]).output().unwrap();
    assert!(String::from_utf8_lossy(&stat.stdout).contains("sub/inner.bin"), "debugfs sees the symlink's target");

    // File handles outlive the server: boot again over the same image.
    served.boot();
    served.namespace.enter(|| {
        let mut client = UdpClient::new(2049);
        let got = client.getattr(big_handle);
        assert!(matches!(got, Res::Ok(Fattr3 { size, .. }) if size == 3 * 1024 * 1024 + 123), "{got:?}");
    });
    served.stop();
}

fn libnfs_copies_a_tree_in_and_out_of_the_single_domain_server() {
    copy_a_tree_in_and_out("configs/nfs-server.toml", "single");
}

fn libnfs_copies_a_tree_in_and_out_of_the_separate_domains_server() {
    copy_a_tree_in_and_out("configs/nfs-server-separate.toml", "separate");
}

/// Every NFSv3 procedure once (most twice: success, then the error the RFC names), over UDP.
fn every_nfs_procedure_answers_over_udp() {
    let served = Served::start("configs/nfs-server.toml", "ep");
    served.namespace.enter(|| {
        let mut c = UdpClient::new(2049);
        let root = c.mount_root();
        let _: () = c.nfs(procedure::NULL, &());
        let place = |name: &str| DirOpArgs { dir: root, name: name.into() };
        // CREATE: EXCLUSIVE twice with one verifier is one file; another verifier is EXIST.
        let exclusive = |verf| CreateArgs { place: place("x"), how: CreateHow::Exclusive(verf) };
        let first: CreateRes = c.nfs(procedure::CREATE, &exclusive([7; 8]));
        let Res::Ok(CreateOk { obj: Some(file), .. }) = first else { panic!("CREATE EXCLUSIVE: {first:?}") };
        let again: CreateRes = c.nfs(procedure::CREATE, &exclusive([7; 8]));
        assert!(matches!(again, Res::Ok(CreateOk { obj: Some(h), .. }) if h == file), "a retransmitted EXCLUSIVE");
        let other: CreateRes = c.nfs(procedure::CREATE, &exclusive([8; 8]));
        assert!(matches!(other, Res::Err(Status::Exist, _)), "{other:?}");
        // SETATTR: a guard that does not match is NOT_SYNC; one that does changes the mode.
        let Res::Ok(now) = c.getattr(file) else { panic!("GETATTR") };
        let chmod = |guard| SetattrArgs {
            object: file,
            new_attributes: Sattr3 { mode: Some(0o600), mtime: SetTime::ServerTime, ..Sattr3::default() },
            guard,
        };
        let stale_guard = Some(Time::from_seconds(now.ctime.seconds.wrapping_sub(1000)));
        let refused: SetattrRes = c.nfs(procedure::SETATTR, &chmod(stale_guard));
        assert!(matches!(refused, Res::Err(Status::NotSync, _)), "{refused:?}");
        let changed: SetattrRes = c.nfs(procedure::SETATTR, &chmod(Some(now.ctime)));
        assert!(matches!(changed, Res::Ok(WccData { after: Some(a), .. }) if a.mode == 0o600), "{changed:?}");
        // WRITE UNSTABLE and FILE_SYNC, COMMIT with the same verifier, READ back.
        let write =
            |offset, stable| WriteArgs { head: WriteHead { file, offset, count: 5, stable }, data: b"hello".to_vec() };
        let unstable: WriteRes = c.nfs(procedure::WRITE, &write(0, StableHow::Unstable));
        let Res::Ok(unstable) = unstable else { panic!("WRITE UNSTABLE: {unstable:?}") };
        assert_eq!((unstable.count, unstable.committed), (5, StableHow::Unstable));
        let synced: WriteRes = c.nfs(procedure::WRITE, &write(5, StableHow::FileSync));
        assert!(matches!(synced, Res::Ok(WriteOk { committed: StableHow::FileSync, .. })), "{synced:?}");
        let committed: CommitRes = c.nfs(procedure::COMMIT, &CommitArgs { file, offset: 0, count: 0 });
        assert!(matches!(committed, Res::Ok(CommitOk { verf, .. }) if verf == unstable.verf), "{committed:?}");
        let read: ReadRes = c.nfs(procedure::READ, &ReadArgs { file, offset: 0, count: 100 });
        assert!(matches!(read, Res::Ok(ReadOk { ref data, eof: true, .. }) if data == b"hellohello"), "{read:?}");
        // Offsets past 2^63 (NFSv3's are unsigned 64-bit): READ finds the end of the file, WRITE
        // is too large (as Linux's EFBIG) and the file keeps its size.
        let far: ReadRes = c.nfs(procedure::READ, &ReadArgs { file, offset: (1 << 63) + 5, count: 100 });
        assert!(matches!(far, Res::Ok(ReadOk { ref data, eof: true, .. }) if data.is_empty()), "{far:?}");
        let too_far: WriteRes = c.nfs(procedure::WRITE, &write(u64::MAX - 2, StableHow::FileSync));
        assert!(matches!(too_far, Res::Err(Status::FBig, _)), "{too_far:?}");
        let read: ReadRes = c.nfs(procedure::READ, &ReadArgs { file, offset: 0, count: 100 });
        assert!(matches!(read, Res::Ok(ReadOk { ref data, eof: true, .. }) if data == b"hellohello"), "{read:?}");
        // ACCESS as root: everything asked.
        let access: AccessRes = c.nfs(procedure::ACCESS, &AccessArgs { object: file, access: 0x3f });
        assert!(matches!(access, Res::Ok(AccessOk { access: 0x3f, .. })), "{access:?}");
        // MKDIR, SYMLINK, READLINK, LINK, RENAME, READDIR, REMOVE, RMDIR.
        let made: CreateRes = c.nfs(procedure::MKDIR, &MkdirArgs { place: place("d"), attributes: Sattr3::default() });
        let Res::Ok(CreateOk { obj: Some(dir), .. }) = made else { panic!("MKDIR: {made:?}") };
        let link: CreateRes = c.nfs(
            procedure::SYMLINK,
            &SymlinkArgs { place: place("s"), symlink_attributes: Sattr3::default(), symlink_data: "x".into() },
        );
        let Res::Ok(CreateOk { obj: Some(symlink), .. }) = link else { panic!("SYMLINK: {link:?}") };
        let target: ReadlinkRes = c.nfs(procedure::READLINK, &ReadlinkArgs { symlink });
        assert!(matches!(target, Res::Ok(ReadlinkOk { ref data, .. }) if data.0 == b"x"), "{target:?}");
        let not_a_link: ReadlinkRes = c.nfs(procedure::READLINK, &ReadlinkArgs { symlink: file });
        assert!(matches!(not_a_link, Res::Err(_, _)), "READLINK of a file: {not_a_link:?}");
        let linked: LinkRes = c.nfs(procedure::LINK, &LinkArgs { file, link: DirOpArgs { dir, name: "hard".into() } });
        assert!(matches!(linked, Res::Ok(LinkWcc { file_attributes: Some(a), .. }) if a.nlink == 2), "{linked:?}");
        let renamed: RenameRes =
            c.nfs(procedure::RENAME, &RenameArgs { from: place("x"), to: DirOpArgs { dir, name: "moved".into() } });
        assert!(matches!(renamed, Res::Ok(_)), "{renamed:?}");
        let gone = c.lookup(root, "x");
        assert!(matches!(gone, Res::Err(Status::NoEnt, _)), "{gone:?}");
        let mut names = Vec::new();
        let listed: ReaddirRes =
            c.nfs(procedure::READDIR, &ReaddirArgs { dir, cookie: 0, cookieverf: [0; 8], count: 4096 });
        let Res::Ok(listed) = listed else { panic!("READDIR: {listed:?}") };
        names.extend(listed.entries.iter().map(|e| String::from_utf8(e.name.0.clone()).unwrap()));
        assert!(listed.eof && names.contains(&"hard".into()) && names.contains(&"moved".into()), "{names:?}");
        let not_empty: RemoveRes = c.nfs(procedure::RMDIR, &place("d"));
        assert!(matches!(not_empty, Res::Err(Status::NotEmpty, _)), "{not_empty:?}");
        for name in ["hard", "moved"] {
            let removed: RemoveRes = c.nfs(procedure::REMOVE, &DirOpArgs { dir, name: name.into() });
            assert!(matches!(removed, Res::Ok(_)), "REMOVE {name}: {removed:?}");
        }
        let rmdir: RemoveRes = c.nfs(procedure::RMDIR, &place("d"));
        assert!(matches!(rmdir, Res::Ok(_)), "{rmdir:?}");
        let is_file: RemoveRes = c.nfs(procedure::RMDIR, &place("s"));
        assert!(matches!(is_file, Res::Err(_, _)), "RMDIR of a symlink: {is_file:?}");
        // FSSTAT, FSINFO, PATHCONF.
        let stat: FsstatRes = c.nfs(procedure::FSSTAT, &FsstatArgs { fsroot: root });
        assert!(matches!(stat, Res::Ok(FsstatOk { tbytes, fbytes, .. }) if fbytes < tbytes && tbytes >= 60 << 20));
        let info: FsinfoRes = c.nfs(procedure::FSINFO, &FsinfoArgs { fsroot: root });
        assert!(matches!(info, Res::Ok(FsinfoOk { rtmax: 4096, wtmax: 4096, .. })), "FSINFO over UDP: {info:?}");
        let conf: PathconfRes = c.nfs(procedure::PATHCONF, &PathconfArgs { object: root });
        assert!(matches!(conf, Res::Ok(PathconfOk { name_max: 255, no_trunc: true, .. })), "{conf:?}");
        // MOUNT's other procedures.
        let exports: mount::Exports = c.call(mount::PROGRAM, 3, mount::procedure::EXPORT, &());
        assert_eq!(exports.0.len(), 1);
        assert_eq!(exports.0[0].directory, b"/");
        let mounts: mount::MountList = c.call(mount::PROGRAM, 3, mount::procedure::DUMP, &());
        assert!(mounts.0.iter().any(|m| m.directory == b"/" && m.hostname == b"10.99.1.1"), "{mounts:?}");
        let _: () = c.call(mount::PROGRAM, 3, mount::procedure::UMNT, &DirPath(b"/".to_vec()));
        let _: () = c.call(mount::PROGRAM, 3, mount::procedure::UMNTALL, &());
        let mounts: mount::MountList = c.call(mount::PROGRAM, 3, mount::procedure::DUMP, &());
        assert!(mounts.0.is_empty(), "{mounts:?}");
        // The portmapper's DUMP and a refused SET.
        let mut portmapper = UdpClient::new(portmap::PORT);
        let table: portmap::MappingList = portmapper.call(portmap::PROGRAM, 2, portmap::procedure::DUMP, &());
        assert_eq!(table.0.len(), 6, "{table:?}");
        let set: bool = portmapper.call(
            portmap::PROGRAM,
            2,
            portmap::procedure::SET,
            &Mapping { program: 1, version: 1, protocol: portmap::IPPROTO_UDP, port: 9 },
        );
        assert!(!set, "SET from the network is refused");
    });
}

fn bad_calls_handles_names_and_abandoned_connections_leave_the_single_domain_server_serving() {
    bad_input("configs/nfs-server.toml", "b1");
}

fn bad_calls_handles_names_and_abandoned_connections_leave_the_separate_domains_server_serving() {
    bad_input("configs/nfs-server-separate.toml", "b2");
}

/// Malformed calls (headers and arguments), forged and stale handles, names that try to leave
/// the export, an over-long TCP record, clients that pipeline READs and never read the replies,
/// and 300 connections opened and abandoned: each gets the protocol's error or is dropped, and
/// the server goes on serving libnfs.
fn bad_input(config_file: &str, label: &str) {
    let served = Served::start(config_file, label);
    served.namespace.enter(|| {
        let mut client = UdpClient::new(2049);
        let root = client.mount_root();
        // Headers: truncated ones and replies are dropped, the rest refused as the RPC says.
        let good = call(7, 2, nfs3::PROGRAM, 3, 0, 0);
        for cut in [0, 3, 8, 20, 27, 36] {
            assert_eq!(client.exchange(7, &good[..cut]), None, "a header cut at {cut} bytes is dropped");
        }
        let mut cases = vec![
            (call(8, 3, nfs3::PROGRAM, 3, 0, 0), ReplyStatus::RpcMismatch { low: 2, high: 2 }),
            (call(9, 2, 200_000, 1, 0, 0), ReplyStatus::ProgramUnavailable),
            (call(10, 2, nfs3::PROGRAM, 2, 0, 0), ReplyStatus::ProgramMismatch { low: 3, high: 3 }),
            (call(11, 2, mount::PROGRAM, 1, 0, 0), ReplyStatus::ProgramMismatch { low: 3, high: 3 }),
            (call(12, 2, nfs3::PROGRAM, 3, 22, 0), ReplyStatus::ProcedureUnavailable),
            (call(13, 2, nfs3::PROGRAM, 3, 0, flavor::RPCSEC_GSS), ReplyStatus::AuthError(auth_stat::AUTH_TOOWEAK)),
            (call(14, 2, nfs3::PROGRAM, 3, 0, flavor::AUTH_SYS), ReplyStatus::AuthError(auth_stat::AUTH_BADCRED)),
        ];
        // Arguments: cut short, a length beyond the datagram, an over-long handle.
        let mut getattr = call(15, 2, nfs3::PROGRAM, 3, procedure::GETATTR, 0);
        getattr.extend_from_slice(&[0, 0, 0, 16, 1, 2]);
        cases.push((getattr, ReplyStatus::GarbageArguments));
        let mut lookup = call(16, 2, nfs3::PROGRAM, 3, procedure::LOOKUP, 0);
        lookup.extend(root.to_xdr());
        lookup.extend_from_slice(&[0x7f, 0xff, 0xff, 0xff, b'a', 0, 0, 0]);
        cases.push((lookup, ReplyStatus::GarbageArguments));
        let mut long = call(17, 2, nfs3::PROGRAM, 3, procedure::GETATTR, 0);
        long.extend_from_slice(&[0, 0, 0, 65]);
        long.extend_from_slice(&[0; 68]);
        cases.push((long, ReplyStatus::GarbageArguments));
        let mut mnt = call(18, 2, mount::PROGRAM, 3, mount::procedure::MNT, 0);
        mnt.extend_from_slice(&[0, 0, 0x10, 0]);
        cases.push((mnt, ReplyStatus::GarbageArguments));
        for (message, expected) in cases {
            let xid = u32::from_be_bytes(message[..4].try_into().unwrap());
            let got = client.exchange(xid, &message).map(|(status, _)| status);
            assert_eq!(got, Some(expected), "call {xid}");
        }

        // Forged, short, long and stale handles.
        let forge = |bytes: &[u8]| FileHandle::new(bytes).unwrap();
        let mut other_fs = root.as_bytes().to_vec();
        other_fs[7] ^= 0xff;
        let mut no_inode = root.as_bytes().to_vec();
        no_inode[8..12].copy_from_slice(&0x00ff_ffffu32.to_be_bytes());
        let mut old_generation = root.as_bytes().to_vec();
        old_generation[15] ^= 1;
        for (handle, expected) in [
            (forge(&[]), Status::BadHandle),
            (forge(&[1, 2, 3]), Status::BadHandle),
            (forge(&[0xee; 16]), Status::BadHandle),
            (forge(&[0xee; 64]), Status::BadHandle),
            (forge(&other_fs), Status::Stale),
            (forge(&no_inode), Status::Stale),
            (forge(&old_generation), Status::Stale),
        ] {
            assert_eq!(client.getattr(handle), Res::Err(expected, ()), "GETATTR {handle:?}");
        }
        let made: CreateRes = client.nfs(
            procedure::CREATE,
            &CreateArgs {
                place: DirOpArgs { dir: root, name: "doomed".into() },
                how: CreateHow::Guarded(Sattr3::default()),
            },
        );
        let Res::Ok(CreateOk { obj: Some(doomed), .. }) = made else { panic!("CREATE: {made:?}") };
        let again: CreateRes = client.nfs(
            procedure::CREATE,
            &CreateArgs {
                place: DirOpArgs { dir: root, name: "doomed".into() },
                how: CreateHow::Guarded(Sattr3::default()),
            },
        );
        assert!(matches!(again, Res::Err(Status::Exist, _)), "GUARDED over a file: {again:?}");
        let removed: RemoveRes = client.nfs(procedure::REMOVE, &DirOpArgs { dir: root, name: "doomed".into() });
        assert!(matches!(removed, Res::Ok(_)), "{removed:?}");
        assert_eq!(client.getattr(doomed), Res::Err(Status::Stale, ()), "a removed file's handle is stale");

        // Names that try to leave the export, or are no names.
        let parent = client.lookup(root, "..");
        assert!(matches!(parent, Res::Ok(LookupOk { object, .. }) if object == root), "the root's .. is the root");
        for name in ["..", ".", "a/b", "", "../escape"] {
            let made: CreateRes = client.nfs(
                procedure::MKDIR,
                &MkdirArgs { place: DirOpArgs { dir: root, name: name.into() }, attributes: Sattr3::default() },
            );
            assert!(matches!(made, Res::Err(Status::Inval, _)), "MKDIR {name:?}: {made:?}");
        }
        let long_name = "n".repeat(300);
        let made: CreateRes = client.nfs(
            procedure::CREATE,
            &CreateArgs {
                place: DirOpArgs { dir: root, name: long_name.as_str().into() },
                how: CreateHow::Unchecked(Sattr3::default()),
            },
        );
        assert!(matches!(made, Res::Err(Status::NameTooLong, _)), "{made:?}");
        assert!(!matches!(client.lookup(root, "a/b"), Res::Ok(_)), "LOOKUP of a/b finds nothing");
        let escape =
            client.call::<MountResult>(mount::PROGRAM, 3, mount::procedure::MNT, &DirPath(b"/../etc".to_vec()));
        assert!(matches!(escape, MountResult::Err(_)), "MNT /../etc: {escape:?}");
        let mknod: CreateRes = client.nfs(
            procedure::MKNOD,
            &MknodArgs {
                place: DirOpArgs { dir: root, name: "fifo".into() },
                what: MknodData::Pipe(FileType::Fifo, Sattr3::default()),
            },
        );
        assert!(matches!(mknod, Res::Err(Status::NotSupp, _)), "MKNOD: {mknod:?}");

        // And the server still serves, over UDP and TCP.
        assert!(matches!(client.getattr(root), Res::Ok(Fattr3 { kind: FileType::Directory, .. })));
    });
    // Over TCP, errors come back in records of their own, with the call's xid.
    served.namespace.enter(|| {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect((SERVER, 2049)).expect("connects");
        stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut garbage = call(50, 2, nfs3::PROGRAM, 3, procedure::GETATTR, 0);
        garbage.extend_from_slice(&[0, 0, 0, 16, 1, 2]);
        let unknown = call(51, 2, nfs3::PROGRAM, 3, 99, 0);
        let mut both = rpc::record::frame(&garbage);
        both.extend(rpc::record::frame(&unknown));
        stream.write_all(&both).unwrap();
        let mut reader = rpc::record::RecordReader::new(1 << 16);
        let mut replies = Vec::new();
        let mut buf = [0; 4096];
        while replies.len() < 2 {
            let len = stream.read(&mut buf).expect("the replies come");
            assert!(len > 0, "the server keeps the connection");
            reader.push(&buf[..len]);
            while let Some(record) = reader.next_record().unwrap() {
                let Ok(Message::Reply(reply)) = Message::decode(&mut Decoder::new(record)) else { panic!("a reply") };
                replies.push((reply.xid, reply.status));
            }
        }
        assert_eq!(replies, [(50, ReplyStatus::GarbageArguments), (51, ReplyStatus::ProcedureUnavailable)]);
    });
    // A TCP record announcing 2 GiB: the connection is closed, the next one served.
    served.namespace.enter(|| {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect((SERVER, 2049)).expect("connects");
        stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        stream.write_all(&[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1]).unwrap();
        let mut buf = [0; 16];
        assert!(matches!(stream.read(&mut buf), Ok(0) | Err(_)), "the server closes the connection");
        // A client that vanishes in the middle of a WRITE's record.
        let mut stream = std::net::TcpStream::connect((SERVER, 2049)).expect("connects");
        let mut half = rpc::record::header(9000).to_vec();
        half.extend(call(40, 2, nfs3::PROGRAM, 3, procedure::WRITE, 0));
        half.extend_from_slice(&[0; 500]);
        stream.write_all(&half).unwrap();
        drop(stream);
        // A flood of datagrams, most of them garbage, then a call that must be answered.
        let flood = UdpSocket::bind("0.0.0.0:0").unwrap();
        for i in 0..5000u32 {
            let mut datagram = call(1000 + i, 2, nfs3::PROGRAM, 3, i % 30, 0);
            datagram.truncate((i as usize * 7) % 48);
            let _ = flood.send_to(&datagram, (SERVER, 2049));
        }
        let mut client = UdpClient::new(2049);
        let root = client.mount_root();
        assert!(matches!(client.getattr(root), Res::Ok(_)), "served after the flood");
    });
    // Ten clients (more than the server's 8 workers) pipeline 64 READs of 32 KiB each and
    // never read a reply: each holds its own connection's threads once the replies fill its
    // receive window, never the workers, so a newcomer's two READs over TCP (handed to the
    // workers, not answered by its connection's own thread) are answered.
    served.namespace.enter(|| {
        use std::io::{Read, Write};
        let mut client = UdpClient::new(2049);
        let root = client.mount_root();
        let place = DirOpArgs { dir: root, name: "wide".into() };
        let made: CreateRes =
            client.nfs(procedure::CREATE, &CreateArgs { place, how: CreateHow::Unchecked(Sattr3::default()) });
        let Res::Ok(CreateOk { obj: Some(file), .. }) = made else { panic!("CREATE: {made:?}") };
        let data = content(32 * 1024, 7);
        for (i, piece) in data.chunks(4096).enumerate() {
            let offset = (i * 4096) as u64;
            let head = WriteHead { file, offset, count: 4096, stable: StableHow::FileSync };
            let args = WriteArgs { head, data: piece.to_vec() };
            let wrote: WriteRes = client.nfs(procedure::WRITE, &args);
            assert!(matches!(wrote, Res::Ok(_)), "WRITE: {wrote:?}");
        }
        let read = |xid| {
            let mut message = call(xid, 2, nfs3::PROGRAM, 3, procedure::READ, 0);
            message.extend(ReadArgs { file, offset: 0, count: 32 * 1024 }.to_xdr());
            rpc::record::frame(&message)
        };
        let stalled: Vec<_> = (0..10u32)
            .map(|n| {
                let mut stream = std::net::TcpStream::connect((SERVER, 2049)).expect("connects");
                stream.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
                let _ = stream.write_all(&(0..64).flat_map(|i| read(1000 * n + i)).collect::<Vec<u8>>());
                stream
            })
            .collect();
        std::thread::sleep(Duration::from_millis(500));
        let mut stream = std::net::TcpStream::connect((SERVER, 2049)).expect("connects");
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        stream.write_all(&[read(90_001), read(90_002)].concat()).unwrap();
        let mut reader = rpc::record::RecordReader::new(1 << 20);
        let mut answered = Vec::new();
        let mut buf = vec![0; 65536];
        while answered.len() < 2 {
            let len = stream.read(&mut buf).expect("the newcomer's READs are answered");
            assert!(len > 0, "the server keeps the newcomer's connection");
            reader.push(&buf[..len]);
            while let Some(record) = reader.next_record().unwrap() {
                let mut d = Decoder::new(record);
                let Ok(Message::Reply(reply)) = Message::decode(&mut d) else { panic!("a reply") };
                let result = ReadRes::from_xdr(d.rest());
                assert!(matches!(result, Ok(Res::Ok(ReadOk { ref data, .. })) if data == &content(32 * 1024, 7)));
                answered.push(reply.xid);
            }
        }
        answered.sort();
        assert_eq!(answered, [90_001, 90_002]);
        drop(stalled);
    });
    // Many more connections than the server serves (32) or its stack's socket table holds
    // (256), opened by 20 clients at once and left silent. None is refused: a full backlog
    // holds connection requests back until the server accepts (a client that waits longer
    // than 10 s here gives up; under a flood that is no failure of the server's). The server
    // takes a newcomer in the place of the connection idle longest once that has been idle a
    // while, and resets connections it closed whose peer never closes its end, so many more
    // get in than it serves at once; and it still serves a newcomer afterwards.
    let server: std::net::SocketAddr = format!("{SERVER}:2049").parse().expect("an address");
    let abandoned = served.namespace.enter(|| {
        std::thread::scope(|scope| {
            let clients: Vec<_> = (0..20)
                .map(|_| {
                    scope.spawn(|| {
                        (0..15)
                            .map(|_| std::net::TcpStream::connect_timeout(&server, Duration::from_secs(10)))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            clients.into_iter().flat_map(|c| c.join().expect("a client")).collect::<Vec<_>>()
        })
    });
    let opened = abandoned.iter().filter(|c| c.is_ok()).count();
    eprintln!("{opened} of 300 abandoned connections opened within 10 s each");
    let refused: Vec<_> = abandoned
        .iter()
        .filter_map(|c| c.as_ref().err())
        .filter(|e| e.kind() != std::io::ErrorKind::TimedOut)
        .collect();
    let lines = served.run.as_ref().map(|r| r.lines()).unwrap_or_default();
    assert!(
        refused.is_empty() && opened > 100,
        "{opened} of 300 connections opened, {} refused: {:?} {:?}",
        refused.len(),
        refused.first(),
        &lines[lines.len().saturating_sub(15)..]
    );
    // The listener's backlog may still hold abandoned connections, each of which the server
    // takes in turn in the place of one idle 2 s (found failing once in a loaded test run): a
    // newcomer is served once they are worked through.
    std::thread::sleep(Duration::from_millis(2500));
    let listing = served.namespace.nfs_within(NFS_LS, &[&format!("nfs://{SERVER}/")], Duration::from_secs(30));
    assert!(String::from_utf8_lossy(&listing).contains("lost+found"));
    drop(abandoned);
}

/// `domos boot` with no file, as the README's first command runs it: the embedded file server
/// on 127.0.0.1:20490 through passt, and libnfs' clients, started by `--run`, copy a file in,
/// list the export and read the file back. `--run`'s command ending ends the boot.
fn the_default_system_serves_libnfs_on_127_0_0_1_without_root() {
    let dir = std::env::temp_dir().join(format!("domos-default-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let local = dir.join("greeting.txt");
    std::fs::write(&local, "served by Domos\n").unwrap();
    let (cp, ls, cat) = (NFS_CP.path(), NFS_LS.path(), NFS_CAT.path());
    let ports = "?nfsport=20490&mountport=20490";
    let client = format!(
        "{} {} 'nfs://127.0.0.1//greeting.txt{ports}' && {} 'nfs://127.0.0.1/{ports}' && {} 'nfs://127.0.0.1//greeting.txt{ports}'",
        cp.display(),
        local.display(),
        ls.display(),
        cat.display()
    );
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_domos"))
        .args(["boot", "--timeout", "60", "--run", &client])
        .output()
        .expect("domos runs");
    let _ = std::fs::remove_dir_all(&dir);
    let out = String::from_utf8_lossy(&output.stdout);
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{out}{err}");
    for line in [
        "domos: booting embedded default (configs/file-server.toml)",
        "domos: ready: NFSv3 and MOUNT v3 on 127.0.0.1 port 20490",
        "copied 16 bytes",
        "greeting.txt",
        "lost+found",
        "served by Domos",
        "domos: --run command done",
    ] {
        assert!(out.contains(line), "missing {line:?} in {out}{err}");
    }
}
