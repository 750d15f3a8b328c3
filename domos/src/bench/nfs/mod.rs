//! `domos bench nfs`: JX's rate benchmark (Golm et al. 2002, §3, Figures 6–8) — GETATTR (and
//! NULL) requests as fast as the server answers, with 1 and 8 in flight, over UDP and TCP, and
//! READ and WRITE throughput of a 64 MiB file, read or written over and over for each round's
//! time — against Domos' NFSv3 server
//! (`configs/nfs-server.toml`: NIC driver, IP stack, RPC, NFS, ext2, buffer cache and disk
//! driver) and against nfs-ganesha serving a copy of the same ext2 image, with the same client,
//! in the same run, interleaved point by point over several rounds; medians reported.
//!
//! Both servers run in network namespaces the bench makes (Domos behind a TAP card moved into
//! one, ganesha on the loopback of another), and the load generator opens its sockets inside
//! them; nothing leaves the machine. Everything the bench sets up — namespaces, processes, the
//! loop mount, the scratch directory in tmpfs — is undone on every way out, Ctrl-C included.
//!
//! It also draws the rate over time of both servers (JX Figure 8) and, with `--trace`, writes a
//! thread activity trace of Domos at one point, GETATTRs over UDP by default (JX Figure 7).

mod activity;
mod client;
mod domos_server;
mod ganesha;
mod image;
mod protocol;

use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::host::{self, Namespace};
use client::{Channel, Load, Outcome, Transport, Xids};
use protocol::Handle;

use super::Figure;
use super::svg::{Series, line_chart};

/// The configuration Domos serves from, unless `--config` names another: JX's Figure 6, every
/// component of the file server in one domain. The bench points its disk at the bench's image and
/// its card at a TAP device of its own.
const DEFAULT_CONFIG: &str = include_str!("../../../../configs/nfs-server.toml");

/// `domos bench nfs`'s own options.
pub const USAGE: &str = "\
usage: domos bench nfs [--json] [--pictures DIR] [--rounds N] [--seconds S] [--config FILE]
                       [--trace OUT.json] [--baseline-only] [--points NAME,...]
  Domos' NFSv3 server against nfs-ganesha on the same ext2 image, same client, interleaved:
  GETATTR/NULL rates (1 and 8 in flight, UDP and TCP) and READ/WRITE of a 64 MiB file.
  --rounds N        rounds of every point, medians reported (default 3)
  --points NAMES    only these points, by their JSON names without `nfs_` (e.g. read_64m,write_64m)
  --seconds S       length of each round of a point (default 3); READ and WRITE repeat their
                    64 MiB transfer until it has passed, at least once
  --config FILE     the Domos server's configuration (default: configs/nfs-server.toml, embedded)
  --trace OUT.json  also record Domos' thread activity at the first of --points (GETATTR over UDP,
                    8 in flight, if not given; a rate for 1 s) in Perfetto's format, and draw 2 ms
                    of it as nfs-activity.svg
  --baseline-only   measure nfs-ganesha alone (to check the baseline)
  Needs root (network namespaces, a TAP card, a loop mount), nfs-ganesha with FSAL VFS,
  rpcbind, iproute2 and e2fsprogs. Draws nfs-rate.svg into the pictures directory.";

/// What the suite is asked to do.
#[derive(Debug, Clone)]
pub struct Options {
    /// Rounds of every point.
    pub rounds: usize,
    /// Length of a round of a point: a rate's window; READ and WRITE repeat their transfer
    /// until it has passed.
    pub seconds: f64,
    /// Domos' configuration file, instead of the embedded one.
    pub config: Option<PathBuf>,
    /// Where to write a thread activity trace of Domos.
    pub trace: Option<PathBuf>,
    /// Only nfs-ganesha.
    pub baseline_only: bool,
    /// The indices into [`POINTS`] of the points measured, in order.
    pub points: Vec<usize>,
    /// The index into [`POINTS`] of the point `--trace` records: the first of `--points`.
    pub traced: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            rounds: 3,
            seconds: 3.0,
            config: None,
            trace: None,
            baseline_only: false,
            points: (0..POINTS.len()).collect(),
            traced: TRACED_BY_DEFAULT,
        }
    }
}

impl Options {
    /// Takes `word` (and the value after it from `rest`) if it is one of this suite's options.
    ///
    /// # Errors
    /// A missing or malformed value.
    pub fn take(&mut self, word: &str, rest: &mut dyn Iterator<Item = &String>) -> Result<bool, String> {
        let mut value = |what: &str| rest.next().cloned().ok_or(format!("{word} needs {what}"));
        match word {
            "--rounds" => {
                self.rounds =
                    value("a number")?.parse().ok().filter(|n| (1..=50).contains(n)).ok_or("--rounds takes 1 to 50")?;
            }
            "--seconds" => {
                self.seconds = value("a number")?
                    .parse()
                    .ok()
                    .filter(|s: &f64| (0.2..=60.0).contains(s))
                    .ok_or("--seconds takes 0.2 to 60")?;
            }
            "--config" => self.config = Some(value("a file")?.into()),
            "--trace" => self.trace = Some(value("a file")?.into()),
            "--baseline-only" => self.baseline_only = true,
            "--points" => {
                self.points = value("point names")?
                    .split(',')
                    .map(|name| {
                        POINTS.iter().position(|(n, _)| *n == name).ok_or_else(|| {
                            let names: Vec<&str> = POINTS.iter().map(|(n, _)| *n).collect();
                            format!("--points: no point {name:?} (there are {})", names.join(", "))
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                self.traced = self.points[0];
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// One measured point.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Point {
    /// A request rate.
    Rate { procedure: Procedure, transport: Transport, in_flight: usize },
    /// READ of the 64 MiB file over TCP, over and over for the round's window.
    Read,
    /// WRITE of a new 64 MiB file over TCP, then COMMIT, over and over for the round's window.
    Write,
}

/// The procedure of a rate point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Procedure {
    Getattr,
    Null,
}

/// The points, in the order measured, with their JSON names.
const POINTS: [(&str, Point); 7] = [
    ("getattr_udp_1", Point::Rate { procedure: Procedure::Getattr, transport: Transport::Udp, in_flight: 1 }),
    ("getattr_udp_8", Point::Rate { procedure: Procedure::Getattr, transport: Transport::Udp, in_flight: 8 }),
    ("getattr_tcp_1", Point::Rate { procedure: Procedure::Getattr, transport: Transport::Tcp, in_flight: 1 }),
    ("getattr_tcp_8", Point::Rate { procedure: Procedure::Getattr, transport: Transport::Tcp, in_flight: 8 }),
    ("null_udp_8", Point::Rate { procedure: Procedure::Null, transport: Transport::Udp, in_flight: 8 }),
    ("read_64m", Point::Read),
    ("write_64m", Point::Write),
];

/// The point `--trace` records unless `--points` names others: GETATTR over UDP, 8 in flight
/// (JX Figure 7's load).
const TRACED_BY_DEFAULT: usize = 1;
const _: () = assert!(matches!(
    POINTS[TRACED_BY_DEFAULT].1,
    Point::Rate { procedure: Procedure::Getattr, transport: Transport::Udp, in_flight: 8 }
));

/// Size of a READ or WRITE request (less if the server's FSINFO says so).
const TRANSFER: u32 = 64 << 10;

/// READs or WRITEs in flight.
const TRANSFER_IN_FLIGHT: usize = 4;

/// Rate points' request bound, beside their time bound.
const RATE_LIMIT: u64 = 10_000_000;

/// The rate-over-time picture's points: (JSON name, label).
const PICTURED: [(&str, &str); 2] = [("getattr_udp_8", "GETATTR UDP ×8"), ("getattr_tcp_8", "GETATTR TCP ×8")];

/// The suite's figures, and the text it adds below the table.
pub struct Results {
    /// The figures.
    pub figures: Vec<Figure>,
    /// Per-round values, retransmissions, where the pictures went.
    pub report: String,
}

/// A server as the load generator sees it.
struct Endpoint<'a> {
    /// `Domos` or `nfs-ganesha`.
    name: &'static str,
    namespace: &'a Namespace,
    address: Ipv4Addr,
    /// NFS's port over UDP and over TCP.
    nfs_udp: u16,
    nfs_tcp: u16,
    /// The `bench` directory and the file READ reads.
    directory: Handle,
    read_file: Handle,
    /// The largest READ and WRITE (FSINFO), at most [`TRANSFER`].
    read_size: u32,
    write_size: u32,
}

impl<'a> Endpoint<'a> {
    /// Asks rpcbind (port 111) at `address` for the NFS and MOUNT ports, mounts `export`, and
    /// looks up the bench's directory and file; waits up to 10 s for the first answer.
    fn connect(name: &'static str, namespace: &'a Namespace, address: Ipv4Addr, export: &str) -> Result<Self, String> {
        let mut xids = Xids::new();
        let at = move |port: u16| SocketAddr::from((address, port));
        let mut rpcbind = namespace.within(move || Channel::open(Transport::Udp, at(protocol::RPCBIND_PORT)))?;
        let mut port = |program: u32, version: u32, transport: Transport| -> Result<u16, String> {
            let reply = rpcbind.call(&mut xids, &|xid| protocol::getport(xid, program, version, transport))?;
            match protocol::getport_reply(&reply)? {
                0 => Err(format!(
                    "{name}'s rpcbind knows no program {program} version {version} over {}",
                    transport.name()
                )),
                port => Ok(port),
            }
        };
        let nfs_udp = port(protocol::NFS_PROGRAM, 3, Transport::Udp)?;
        let nfs_tcp = port(protocol::NFS_PROGRAM, 3, Transport::Tcp)?;
        let mount_udp = port(protocol::MOUNT_PROGRAM, 3, Transport::Udp)?;
        let mut mount = namespace.within(move || Channel::open(Transport::Udp, at(mount_udp)))?;
        let export_owned = export.to_string();
        let root = protocol::mount_reply(&mount.call(&mut xids, &|xid| protocol::mount(xid, &export_owned))?)
            .map_err(|e| format!("{name}: MOUNT {export}: {e}"))?;
        let mut nfs = namespace.within(move || Channel::open(Transport::Udp, at(nfs_udp)))?;
        let mut lookup = |dir: &Handle, entry: &str| -> Result<Handle, String> {
            protocol::lookup_reply(&nfs.call(&mut xids, &|xid| protocol::lookup(xid, dir, entry))?)
                .map_err(|e| format!("{name}: LOOKUP {entry}: {e}"))
        };
        let directory = lookup(&root, image::DIRECTORY)?;
        let read_file = lookup(&directory, image::READ_FILE)?;
        // READ and WRITE go over TCP, whose limits a server may set apart from UDP's.
        let mut tcp = namespace.within(move || Channel::open(Transport::Tcp, at(nfs_tcp)))?;
        let (rtmax, wtmax) = protocol::fsinfo_reply(&tcp.call(&mut xids, &|xid| protocol::fsinfo(xid, &root))?)
            .map_err(|e| format!("{name}: FSINFO: {e}"))?;
        Ok(Endpoint {
            name,
            namespace,
            address,
            nfs_udp,
            nfs_tcp,
            directory,
            read_file,
            read_size: rtmax.clamp(4096, TRANSFER),
            write_size: wtmax.clamp(4096, TRANSFER),
        })
    }

    /// A new connection to NFS over `transport`.
    fn channel(&self, transport: Transport) -> Result<Channel, String> {
        let port = if transport == Transport::Udp { self.nfs_udp } else { self.nfs_tcp };
        let server = SocketAddr::from((self.address, port));
        self.namespace.within(move || Channel::open(transport, server))
    }

    /// GETATTR or NULL for `window`, `in_flight` at a time.
    fn rate(
        &self,
        procedure: Procedure,
        transport: Transport,
        in_flight: usize,
        window: Duration,
    ) -> Result<Outcome, String> {
        let mut channel = self.channel(transport)?;
        let mut xids = Xids::new();
        let load = Load { in_flight, window: Some(window), limit: RATE_LIMIT };
        let file = &self.read_file;
        let outcome = match procedure {
            Procedure::Getattr => client::drive(
                &mut channel,
                &mut xids,
                load,
                &mut |xid, _| protocol::getattr(xid, file),
                &mut |_, reply| protocol::getattr_reply(reply).map(|()| 0),
            ),
            Procedure::Null => {
                client::drive(&mut channel, &mut xids, load, &mut |xid, _| protocol::null(xid), &mut |_, reply| {
                    protocol::null_reply(reply).map(|()| 0)
                })
            }
        };
        outcome.map_err(|e| format!("{}: {e}", self.name))
    }

    /// READs the whole 64 MiB file over TCP, checking every byte against `data`.
    fn read(&self, data: &[u8]) -> Result<Outcome, String> {
        let mut channel = self.channel(Transport::Tcp)?;
        let size = self.read_size as usize;
        let load = Load { in_flight: TRANSFER_IN_FLIGHT, window: None, limit: data.len().div_ceil(size) as u64 };
        let file = &self.read_file;
        client::drive(
            &mut channel,
            &mut Xids::new(),
            load,
            &mut |xid, seq| protocol::read(xid, file, seq * size as u64, size as u32),
            &mut |seq, reply| {
                let got = protocol::read_reply(reply)?;
                let from = seq as usize * size;
                let want = &data[from..(from + size).min(data.len())];
                if got.as_slice() != want {
                    return Err(format!("READ at {from} returned {} bytes that differ from the file", got.len()));
                }
                Ok(got.len() as u64)
            },
        )
        .map_err(|e| format!("{}: READ: {e}", self.name))
    }

    /// CREATEs `name` in the bench's directory, WRITEs 64 MiB into it over TCP (unstable) and
    /// COMMITs; the time runs from the first WRITE to COMMIT's reply. Removes the file after.
    fn write(&self, name: &str, data: &[u8]) -> Result<Outcome, String> {
        let mut channel = self.channel(Transport::Tcp)?;
        let mut xids = Xids::new();
        let directory = &self.directory;
        let file = protocol::create_reply(&channel.call(&mut xids, &|xid| protocol::create(xid, directory, name))?)
            .map_err(|e| format!("{}: CREATE {name}: {e}", self.name))?;
        let size = self.write_size as usize;
        let load = Load { in_flight: TRANSFER_IN_FLIGHT, window: None, limit: data.len().div_ceil(size) as u64 };
        let start = std::time::Instant::now();
        let mut outcome = client::drive(
            &mut channel,
            &mut xids,
            load,
            &mut |xid, seq| {
                let from = seq as usize * size;
                protocol::write(xid, &file, from as u64, &data[from..(from + size).min(data.len())])
            },
            &mut |_, reply| protocol::write_reply(reply),
        )
        .map_err(|e| format!("{}: WRITE: {e}", self.name))?;
        protocol::commit_reply(&channel.call(&mut xids, &|xid| protocol::commit(xid, &file))?)
            .map_err(|e| format!("{}: COMMIT: {e}", self.name))?;
        outcome.elapsed = start.elapsed();
        if outcome.bytes != data.len() as u64 {
            return Err(format!("{}: WRITE took {} of {} bytes", self.name, outcome.bytes, data.len()));
        }
        protocol::remove_reply(&channel.call(&mut xids, &|xid| protocol::remove(xid, directory, name))?)
            .map_err(|e| format!("{}: REMOVE {name}: {e}", self.name))?;
        Ok(outcome)
    }

    /// Measures `point` once: its value (ops/s or MiB/s) and the outcome behind it.
    fn measure(&self, point: Point, window: Duration, round: usize, data: &[u8]) -> Result<(f64, Outcome), String> {
        host::check_interrupted()?;
        match point {
            Point::Rate { procedure, transport, in_flight } => {
                let outcome = self.rate(procedure, transport, in_flight, window)?;
                Ok((outcome.rate(), outcome))
            }
            Point::Read => {
                let outcome = passes(window, || self.read(data))?;
                Ok((outcome.mib_per_second(), outcome))
            }
            Point::Write => {
                let outcome = passes(window, || self.write(&format!("write-{round}"), data))?;
                Ok((outcome.mib_per_second(), outcome))
            }
        }
    }
}

/// Runs `pass` (a READ or WRITE of the whole file) again and again until `window` has passed,
/// at least once, and sums what the passes moved and the time they took. One pass takes a
/// tenth of a second or so, too short a sample on a shared machine; and the first pass of a run
/// fills the server's cache (and touches the memory it fills for the first time), which a longer
/// round counts as a file server lives it: once.
fn passes(window: Duration, mut pass: impl FnMut() -> Result<Outcome, String>) -> Result<Outcome, String> {
    let start = std::time::Instant::now();
    let mut sum = Outcome::default();
    loop {
        let outcome = pass()?;
        sum.completed += outcome.completed;
        sum.bytes += outcome.bytes;
        sum.elapsed += outcome.elapsed;
        if start.elapsed() >= window {
            return Ok(sum);
        }
        host::check_interrupted()?;
    }
}

/// What one server did at one point over the rounds.
#[derive(Default)]
struct Samples {
    values: Vec<f64>,
    retransmitted: u64,
    /// The last round's replies per tick.
    per_tick: Vec<u32>,
}

impl Samples {
    fn add(&mut self, value: f64, outcome: Outcome) {
        self.values.push(value);
        self.retransmitted += outcome.retransmitted;
        self.per_tick = outcome.per_tick;
    }

    fn median(&self) -> f64 {
        let mut sorted = self.values.clone();
        sorted.sort_by(f64::total_cmp);
        match sorted.len() {
            0 => f64::NAN,
            n if n % 2 == 1 => sorted[n / 2],
            n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
        }
    }
}

/// Runs the suite: sets everything up, measures, and tears everything down.
///
/// # Errors
/// When the bench cannot run (not root, nfs-ganesha missing, no Domos server), a server fails,
/// or the operator interrupts it.
pub fn run(options: &Options, pictures: &Path) -> Result<Results, String> {
    ganesha::Ganesha::check().map_err(|e| format!("cannot run the nfs-ganesha baseline: {e}"))?;
    if !options.baseline_only && !Path::new("/dev/net/tun").exists() {
        return Err("Domos' server needs a TAP card and this machine has no /dev/net/tun".into());
    }
    let config_text = match &options.config {
        Some(path) => std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?,
        None => DEFAULT_CONFIG.to_string(),
    };
    let _interruptible = host::Interruptible::install();
    let steps = 3 + options.rounds * options.points.len() + usize::from(options.trace.is_some());
    let mut progress = super::Progress::new("nfs", steps);
    let scratch = host::ScratchDir::new()?;
    progress.step("the ext2 image and its copy");
    let images = image::make(scratch.path())?;
    let pid = std::process::id();
    progress.step("nfs-ganesha in its namespace");
    let ganesha = ganesha::Ganesha::start(&images.ganesha, scratch.path(), format!("domos-nfs-ganesha-{pid}"))?;
    progress.step("Domos' NFS server behind its TAP card");
    let domos = if options.baseline_only {
        None
    } else {
        let tap = format!("dnfs{}", pid % 100_000);
        Some(domos_server::DomosServer::start(
            &config_text,
            &images.domos,
            &tap,
            format!("domos-nfs-domos-{pid}"),
            options.trace.is_some(),
        )?)
    };
    let export = ganesha.export().to_string_lossy().into_owned();
    let mut servers = vec![Endpoint::connect("nfs-ganesha", ganesha.namespace(), Ipv4Addr::LOCALHOST, &export)?];
    if let Some(domos) = &domos {
        let endpoint = Endpoint::connect("Domos", domos.namespace(), domos.address(), protocol::DOMOS_EXPORT);
        // The threads its services started meanwhile are named in the trace too.
        domos.end_boot_trace();
        let endpoint = endpoint.map_err(|e| match domos.failure() {
            Some(failure) => format!("{e}\n{failure}"),
            None => format!("{e}\nthe Domos server's console:\n  {}", domos.console().join("\n  ")),
        })?;
        servers.insert(0, endpoint);
    }
    // The same requests to both: the smaller of the servers' largest READ and WRITE.
    let read_size = servers.iter().map(|s| s.read_size).min().unwrap_or(TRANSFER);
    let write_size = servers.iter().map(|s| s.write_size).min().unwrap_or(TRANSFER);
    for server in &mut servers {
        (server.read_size, server.write_size) = (read_size, write_size);
    }
    let window = Duration::from_secs_f64(options.seconds);
    let mut samples: Vec<Vec<Samples>> =
        servers.iter().map(|_| POINTS.iter().map(|_| Samples::default()).collect()).collect();
    for round in 0..options.rounds {
        for &p in &options.points {
            let (name, point) = &POINTS[p];
            progress.step(&format!("round {}: {name}", round + 1));
            // Interleaved, and in the other order every other round.
            let mut order: Vec<usize> = (0..servers.len()).collect();
            if round % 2 == 1 {
                order.reverse();
            }
            for s in order {
                let (value, outcome) = servers[s].measure(*point, window, round, &images.data)?;
                samples[s][p].add(value, outcome);
            }
        }
    }
    let mut report = String::new();
    if domos.is_none() {
        report.push_str("(--baseline-only: nfs-ganesha alone; its figures fill both columns)\n");
    }
    if let (Some(path), Some(domos)) = (&options.trace, &domos) {
        let (name, point) = POINTS[options.traced];
        let what = what(point, read_size, write_size);
        progress.step(&format!("a thread activity trace of Domos at {name}"));
        let title = format!("Domos at {what}: 2 ms of thread activity");
        let ((value, _), json, picture) = domos.traced(2_000_000, &title, || {
            servers[0].measure(point, Duration::from_secs(1), options.rounds, &images.data)
        })?;
        std::fs::write(path, json).map_err(|e| format!("cannot write the trace to {}: {e}", path.display()))?;
        std::fs::create_dir_all(pictures).map_err(|e| format!("cannot create {}: {e}", pictures.display()))?;
        let activity = pictures.join("nfs-activity.svg");
        std::fs::write(&activity, picture).map_err(|e| format!("cannot write {}: {e}", activity.display()))?;
        let _ = writeln!(
            report,
            "thread activity trace of Domos at {name} ({value:.1} {}): {} (open it in https://ui.perfetto.dev); \
             2 ms of it drawn in {}",
            unit(point),
            path.display(),
            activity.display()
        );
    }
    let figures = figures(&servers, &samples, &options.points, read_size, write_size);
    report.push_str(&describe(&servers, &samples, &options.points, options.rounds));
    if PICTURED.iter().any(|(pictured, _)| options.points.iter().any(|&p| POINTS[p].0 == *pictured)) {
        let picture = pictures.join("nfs-rate.svg");
        std::fs::create_dir_all(pictures).map_err(|e| format!("cannot create {}: {e}", pictures.display()))?;
        std::fs::write(&picture, rate_picture(&servers, &samples))
            .map_err(|e| format!("cannot write {}: {e}", picture.display()))?;
        let _ = writeln!(report, "rate over time (last round): {}", picture.display());
    }
    drop(servers);
    drop(domos);
    drop(ganesha);
    drop(scratch);
    Ok(Results { figures, report })
}

/// The JSON figures: Domos' median with nfs-ganesha's as the baseline (with `--baseline-only`,
/// nfs-ganesha's own figures, as `ganesha_*` with themselves as the baseline).
fn figures(
    servers: &[Endpoint],
    samples: &[Vec<Samples>],
    points: &[usize],
    read_size: u32,
    write_size: u32,
) -> Vec<Figure> {
    let ganesha = servers.len() - 1;
    points
        .iter()
        .map(|&p| {
            let (name, point) = &POINTS[p];
            let baseline_value = samples[ganesha][p].median();
            let value = if servers.len() > 1 { samples[0][p].median() } else { baseline_value };
            let prefix = if servers.len() > 1 { "nfs" } else { "ganesha" };
            Figure {
                name: super::leak(format!("{prefix}_{name}")),
                unit: unit(*point),
                value,
                baseline: super::leak(format!("ganesha_{name}")),
                baseline_value,
                what: what(*point, read_size, write_size),
            }
        })
        .collect()
}

/// The unit of a point's figure.
fn unit(point: Point) -> &'static str {
    if matches!(point, Point::Rate { .. }) { "ops/s" } else { "MiB/s" }
}

/// What a point measures, for the table.
fn what(point: Point, read_size: u32, write_size: u32) -> &'static str {
    match point {
        Point::Rate { procedure: Procedure::Getattr, transport: Transport::Udp, in_flight: 1 } => {
            "GETATTR/s, UDP, 1 in flight"
        }
        Point::Rate { procedure: Procedure::Getattr, transport: Transport::Udp, .. } => "GETATTR/s, UDP, 8 in flight",
        Point::Rate { procedure: Procedure::Getattr, transport: Transport::Tcp, in_flight: 1 } => {
            "GETATTR/s, TCP, 1 in flight"
        }
        Point::Rate { procedure: Procedure::Getattr, transport: Transport::Tcp, .. } => "GETATTR/s, TCP, 8 in flight",
        Point::Rate { procedure: Procedure::Null, .. } => "NULL/s, UDP, 8 in flight",
        Point::Read => super::leak(format!(
            "READ of a 64 MiB file, over and over, TCP, {} KiB × {TRANSFER_IN_FLIGHT} in flight",
            read_size >> 10
        )),
        Point::Write => super::leak(format!(
            "WRITE of a 64 MiB file + COMMIT, over and over, TCP, {} KiB × {TRANSFER_IN_FLIGHT} in flight",
            write_size >> 10
        )),
    }
}

/// Every round's value per server and point, and the retransmissions.
fn describe(servers: &[Endpoint], samples: &[Vec<Samples>], points: &[usize], rounds: usize) -> String {
    let mut out = format!("\nevery round ({rounds}), interleaved:\n");
    for &p in points {
        let (name, point) = &POINTS[p];
        for (s, server) in servers.iter().enumerate() {
            let values: Vec<String> = samples[s][p].values.iter().map(|v| format!("{v:.1}")).collect();
            let lost = samples[s][p].retransmitted;
            let lost = if lost > 0 { format!("  ({lost} UDP requests sent again)") } else { String::new() };
            let _ = writeln!(out, "  {name:<14} {:<12} {} {}{lost}", server.name, values.join(" "), unit(*point));
        }
    }
    out
}

/// JX Figure 8: replies per second in each 100 ms of the last round's pictured points, every
/// server a line.
fn rate_picture(servers: &[Endpoint], samples: &[Vec<Samples>]) -> String {
    let mut series = Vec::new();
    for (name, label) in PICTURED {
        let Some(p) = POINTS.iter().position(|(n, _)| *n == name) else { continue };
        for (s, server) in servers.iter().enumerate().filter(|(s, _)| !samples[*s][p].per_tick.is_empty()) {
            let tick = client::TICK.as_secs_f64();
            let points = samples[s][p]
                .per_tick
                .iter()
                .enumerate()
                .map(|(i, n)| ((i as f64 + 0.5) * tick, f64::from(*n) / tick))
                .collect();
            series.push(Series { label: format!("{} {label}", server.name), points });
        }
    }
    line_chart("NFS request rate over time (per 100 ms)", "time (s)", "replies per second", &series)
}
