//! The costs on this Linux machine that turn the grafts' times into the paper's break-even
//! points (Small and Seltzer 1996, sections 5.3–5.5).
//!
//! - [`signal_ns`] — **Table 1**, signal handling time, the paper's stand-in for the cost of an
//!   upcall to a user-level server: a forked child handles (or ignores) a group of 20 signals
//!   posted while it is stopped; the time per handled signal is the difference of the two, divided
//!   by the signals posted. This is the upcall time of the paper's Figure 1 and of the
//!   "user-level server" column of the break-even points.
//! - [`page_fault_ns`] — **Table 3**, the time of a page fault that reads its page from disk,
//!   measured as lmbench's `lat_pagefault`: pages of a file just dropped from the page cache are
//!   touched in random order through a read-only mapping. The page eviction graft's break-even
//!   point (Table 2) is this time divided by the graft's time per search: how many searches one
//!   saved eviction pays for.
//! - [`minor_fault_ns`] — not in the paper, reported alongside: a fault on a page already in the
//!   page cache, what a saved eviction is worth when the evicted page would not have to be read
//!   back from disk.
//! - [`disk_write_bandwidth`] — **Table 4**, the disk's write bandwidth as lmbench's `lmdd`
//!   measures it (64 KiB writes, then `fsync`); the paper uses it to estimate the time to read the
//!   1 MiB the MD5 graft fingerprints (Table 5): computation faster than that hides behind the
//!   I/O.
//!
//! The logical disk graft (Table 6) needs no measurement of its own: its break-even point is the
//! time a graft adds per block written, compared with the disk's time per block, which follows
//! from the same write bandwidth.
//!
//! Each measurement takes under about 3 s. All the unsafe code of the benchmarks' Linux
//! baseline is here, each block with the reason it is sound.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use domos_grafts::Xorshift;

/// Signals posted per iteration, as in the paper.
const SIGNALS: libc::c_int = 20;
/// Iterations per run, as in the paper.
const SIGNAL_ITERATIONS: u32 = 1000;
/// Runs averaged (the paper averaged 30; 20 keep the measurement near a second here).
const SIGNAL_RUNS: u32 = 20;

/// Size of the file whose pages fault.
const FAULT_FILE_BYTES: usize = 64 << 20;
/// Pages touched by [`page_fault_ns`] at most.
const MAJOR_FAULT_TOUCHES: usize = 4096;
/// Time [`page_fault_ns`] spends touching pages at most, for slow disks.
const MAJOR_FAULT_BUDGET: Duration = Duration::from_millis(1500);

/// Bytes written by [`disk_write_bandwidth`], as lmbench's `lmdd` would with `count=512`.
const WRITE_BYTES: usize = 32 << 20;
/// Size of each write.
const WRITE_CHUNK: usize = 64 << 10;

/// One `sched_yield` between two threads pinned to the same CPU, in ns: each yield switches to
/// the other thread, as a Domos yield on one kernel CPU does (the baseline of `yield`).
///
/// # Errors
/// When the threads cannot be pinned (a machine with a restrictive CPU set).
pub fn sched_yield_ns(iterations: u32) -> Result<f64, String> {
    fn pin_to_first_cpu() -> Result<(), String> {
        // SAFETY: `set` is a plain bit set on this stack frame; CPU_ZERO/CPU_SET only write it,
        // and sched_setaffinity reads it for the calling thread (pid 0).
        let pinned = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_ZERO(&mut set);
            libc::CPU_SET(0, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
        };
        if pinned == 0 { Ok(()) } else { Err(format!("cannot pin a thread: {}", std::io::Error::last_os_error())) }
    }
    let yield_n = move || -> Result<(), String> {
        pin_to_first_cpu()?;
        for _ in 0..iterations {
            // SAFETY: sched_yield takes no arguments and only gives up the CPU.
            unsafe { libc::sched_yield() };
        }
        Ok(())
    };
    let start = Instant::now();
    let other = std::thread::spawn(yield_n);
    yield_n()?;
    other.join().map_err(|_| "the yielding thread panicked".to_string())??;
    Ok(start.elapsed().as_nanos() as f64 / f64::from(2 * iterations))
}

/// Time to handle one signal, in ns: the paper's estimate of an upcall to a user-level server
/// (Table 1), as the mean of [`SIGNAL_RUNS`] runs of [`SIGNAL_ITERATIONS`] iterations.
///
/// Real-time signals `SIGRTMIN..SIGRTMIN+20` are used, so the 20 posted in one iteration queue
/// rather than merge. The child stops itself with `SIGSTOP`, not the paper's `SIGTSTP`, which
/// Linux discards when the process group is orphaned (as under some test runners).
///
/// # Errors
/// When `fork`, `kill` or `waitpid` fail, or a child ends unexpectedly.
pub fn signal_ns() -> Result<f64, String> {
    let mut total = 0.0;
    for _ in 0..SIGNAL_RUNS {
        let handled = time_signals(Disposition::Handle)?;
        let ignored = time_signals(Disposition::Ignore)?;
        total += (handled.as_nanos() as f64 - ignored.as_nanos() as f64)
            / (f64::from(SIGNALS) * f64::from(SIGNAL_ITERATIONS));
    }
    Ok(total / f64::from(SIGNAL_RUNS))
}

/// What the child does with the posted signals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Disposition {
    Handle,
    Ignore,
}

/// The signal handler: the cost measured is the kernel's delivery and return, not the handler's.
extern "C" fn on_signal(_: libc::c_int) {}

/// A forked child, killed and reaped when dropped.
struct Child {
    pid: libc::pid_t,
    /// Whether `waitpid` has already reaped it (it ended), after which its pid may be reused.
    reaped: std::cell::Cell<bool>,
}

impl Child {
    /// Waits until the child has stopped itself.
    fn wait_stopped(&self) -> Result<(), String> {
        let mut status = 0;
        loop {
            // SAFETY: `status` is a live local the call writes one int to; `self.pid` is our
            // child, not yet reaped (a reaped child is reported below and not waited for again).
            let pid = unsafe { libc::waitpid(self.pid, &mut status, libc::WUNTRACED) };
            if pid == self.pid {
                break;
            }
            let error = std::io::Error::last_os_error();
            if error.kind() != std::io::ErrorKind::Interrupted {
                return Err(format!("waitpid on the signal child: {error}"));
            }
        }
        if libc::WIFSTOPPED(status) {
            Ok(())
        } else {
            self.reaped.set(true);
            Err(format!("the signal child ended unexpectedly (wait status {status:#x})"))
        }
    }

    /// Sends `signal` to the child.
    fn kill(&self, signal: libc::c_int) -> Result<(), String> {
        if self.reaped.get() {
            return Err("the signal child has ended".into());
        }
        // SAFETY: `kill` takes plain integers; `self.pid` is our child, not yet reaped, so its
        // pid cannot have been reused by another process.
        if unsafe { libc::kill(self.pid, signal) } == 0 {
            Ok(())
        } else {
            Err(format!("kill({signal}) on the signal child: {}", std::io::Error::last_os_error()))
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if self.reaped.get() {
            return;
        }
        let mut status = 0;
        // SAFETY: plain integer calls and a live local `status`; the child is ours and not yet
        // reaped (`wait_stopped` marks it when it reaps it), so its pid has not been reused.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            libc::waitpid(self.pid, &mut status, 0);
        }
    }
}

/// Forks a child that sets `disposition` for the 20 signals from `first` and then stops itself
/// over and over; returns once it has stopped the first time.
fn stopped_child(disposition: Disposition, first: libc::c_int) -> Result<Child, String> {
    // Everything the child needs is prepared here, before `fork`: afterwards the child may only
    // make async-signal-safe calls.
    // SAFETY: `sigaction` is a plain C struct (integers, a handler address, a signal set) for
    // which all-zero bytes are a valid value.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = match disposition {
        Disposition::Handle => on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
        Disposition::Ignore => libc::SIG_IGN,
    };
    // SAFETY: `sigset_t` is a plain bit array, for which all-zero bytes are a valid value.
    let mut signals: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `sigemptyset` and `sigaddset` write only to the live signal sets passed to them;
    // the signal numbers are valid, since `time_signals` checked that `first + 19 <= SIGRTMAX`.
    unsafe {
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigemptyset(&mut signals);
        for signal in first..first + SIGNALS {
            libc::sigaddset(&mut signals, signal);
        }
    }
    // SAFETY: the child runs only `child_main`, which makes async-signal-safe calls (sigaction,
    // sigprocmask, getpid, kill, _exit) on memory that was set up before the fork, and never
    // returns into the parent's code, so the state of other threads' locks does not matter.
    match unsafe { libc::fork() } {
        -1 => Err(format!("fork: {}", std::io::Error::last_os_error())),
        0 => child_main(&action, &signals, first),
        pid => {
            let child = Child { pid, reaped: std::cell::Cell::new(false) };
            child.wait_stopped()?;
            Ok(child)
        }
    }
}

/// The forked child: sets the disposition of the signals, unblocks them, then stops itself each
/// time it is continued (after the handlers of the signals posted meanwhile have run).
fn child_main(action: &libc::sigaction, signals: &libc::sigset_t, first: libc::c_int) -> ! {
    // SAFETY: async-signal-safe calls only, with pointers to the live `action` and `signals` and
    // null for the old values; `_exit` ends the process without running Rust or libc teardown.
    unsafe {
        for signal in first..first + SIGNALS {
            if libc::sigaction(signal, action, std::ptr::null_mut()) != 0 {
                libc::_exit(1);
            }
        }
        if libc::sigprocmask(libc::SIG_UNBLOCK, signals, std::ptr::null_mut()) != 0 {
            libc::_exit(1);
        }
        let me = libc::getpid();
        loop {
            if libc::kill(me, libc::SIGSTOP) != 0 {
                libc::_exit(1);
            }
        }
    }
}

/// [`SIGNAL_ITERATIONS`] iterations of posting the signals to a stopped child, continuing it and
/// waiting until it stops again.
fn time_signals(disposition: Disposition) -> Result<Duration, String> {
    let first = libc::SIGRTMIN();
    if first + SIGNALS - 1 > libc::SIGRTMAX() {
        return Err("fewer than 20 real-time signals".into());
    }
    let child = stopped_child(disposition, first)?;
    let iteration = || -> Result<(), String> {
        for signal in first..first + SIGNALS {
            child.kill(signal)?;
        }
        child.kill(libc::SIGCONT)?;
        child.wait_stopped()
    };
    for _ in 0..SIGNAL_ITERATIONS / 10 {
        iteration()?;
    }
    let start = Instant::now();
    for _ in 0..SIGNAL_ITERATIONS {
        iteration()?;
    }
    Ok(start.elapsed())
}

/// Time of a page fault that reads its page from disk, in ns (the paper's Table 3, lmbench's
/// `lat_pagefault`).
///
/// A 64 MiB file is written, synced and dropped from the page cache
/// (`POSIX_FADV_DONTNEED`), mapped read-only with `MADV_RANDOM` (so each fault reads one page,
/// as Linux did in the paper, instead of reading ahead), and up to 4096 of its pages are touched
/// once each in pseudo-random order (for at most 1.5 s). `getrusage` confirms that the touches
/// were major faults.
///
/// # Errors
/// When the file cannot be made, mapped or dropped from the page cache (e.g. on tmpfs), or the
/// touches did not fault.
pub fn page_fault_ns() -> Result<f64, String> {
    let scratch = ScratchFile::filled("fault", FAULT_FILE_BYTES)?;
    // SAFETY: plain integer arguments on a file descriptor `scratch` keeps open.
    let advice = unsafe { libc::posix_fadvise(scratch.file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if advice != 0 {
        return Err(format!("posix_fadvise: {}", std::io::Error::from_raw_os_error(advice)));
    }
    let map = Mapping::read_only(&scratch, FAULT_FILE_BYTES)?;
    map.advise(libc::MADV_RANDOM)?;
    let resident = map.resident_pages()?;
    let cached = resident.iter().filter(|&&r| r).count();
    if cached > resident.len() / 2 {
        return Err(format!("{cached} of {} pages stayed in the page cache after POSIX_FADV_DONTNEED", resident.len()));
    }
    let pages: Vec<usize> =
        shuffled(resident.len()).into_iter().filter(|&p| !resident[p]).take(MAJOR_FAULT_TOUCHES).collect();

    let before = faults()?;
    let start = Instant::now();
    let mut touched = 0;
    let mut sum = 0u8;
    for &page in &pages {
        sum = sum.wrapping_add(map.touch(page));
        touched += 1;
        if start.elapsed() > MAJOR_FAULT_BUDGET {
            break;
        }
    }
    let elapsed = start.elapsed();
    let after = faults()?;
    std::hint::black_box(sum);
    let major = after.major - before.major;
    if touched == 0 || major < touched as u64 / 2 {
        return Err(format!("only {major} of {touched} touches were major faults"));
    }
    Ok(elapsed.as_nanos() as f64 / touched as f64)
}

/// Time of a page fault on a page already in the page cache, in ns.
///
/// The same 64 MiB file, written and read so that every page is cached, is mapped afresh and
/// every page touched once in pseudo-random order. Linux maps the cached neighbours of a faulting
/// page too ("fault-around"), so not every touch faults: the time of a second pass over the same
/// pages, all mapped by then, is subtracted, and the rest divided by the faults `getrusage`
/// counted.
///
/// # Errors
/// When the file cannot be made or mapped, or the touches did not fault.
pub fn minor_fault_ns() -> Result<f64, String> {
    let scratch = ScratchFile::filled("minor-fault", FAULT_FILE_BYTES)?;
    std::io::copy(&mut File::open(&scratch.path).map_err(io_error)?, &mut std::io::sink()).map_err(io_error)?;
    let map = Mapping::read_only(&scratch, FAULT_FILE_BYTES)?;
    let pages = shuffled(map.len / page_size());
    let mut sum = 0u8;
    let before = faults()?;
    let start = Instant::now();
    for &page in &pages {
        sum = sum.wrapping_add(map.touch(page));
    }
    let faulting = start.elapsed();
    let after = faults()?;
    let start = Instant::now();
    for &page in &pages {
        sum = sum.wrapping_add(map.touch(page));
    }
    let mapped = start.elapsed();
    std::hint::black_box(sum);
    let minor = after.minor - before.minor;
    if minor == 0 {
        return Err("touching the mapped file caused no page fault".into());
    }
    Ok(faulting.saturating_sub(mapped).as_nanos() as f64 / minor as f64)
}

/// The disk's write bandwidth in bytes per second (the paper's Table 4, lmbench's `lmdd`):
/// 32 MiB written in 64 KiB writes to a new file, then `fsync`, timed together.
///
/// # Errors
/// When the file cannot be made or written.
pub fn disk_write_bandwidth() -> Result<f64, String> {
    let mut scratch = ScratchFile::create("write")?;
    let chunk = random_bytes(WRITE_CHUNK);
    let start = Instant::now();
    for _ in 0..WRITE_BYTES / WRITE_CHUNK {
        scratch.file.write_all(&chunk).map_err(io_error)?;
    }
    scratch.file.sync_all().map_err(io_error)?;
    Ok(WRITE_BYTES as f64 / start.elapsed().as_secs_f64())
}

/// A new file of our own under `/var/tmp` (on disk, unlike `/tmp` on many systems), or the
/// temporary directory; removed when dropped.
struct ScratchFile {
    path: PathBuf,
    file: File,
}

impl ScratchFile {
    /// An empty file, created here (never an existing one).
    fn create(purpose: &str) -> Result<Self, String> {
        let name = format!("domos-bench-{purpose}-{}-{:x}", std::process::id(), Xorshift::new(nanos()).next_u64());
        let mut last = None;
        for dir in [PathBuf::from("/var/tmp"), std::env::temp_dir()] {
            let path = dir.join(&name);
            match OpenOptions::new().read(true).write(true).create_new(true).open(&path) {
                Ok(file) => return Ok(ScratchFile { path, file }),
                Err(e) => last = Some(format!("cannot create {}: {e}", path.display())),
            }
        }
        Err(last.unwrap_or_default())
    }

    /// A file of `bytes` pseudo-random bytes, written in 64 KiB writes and synced to disk.
    fn filled(purpose: &str, bytes: usize) -> Result<Self, String> {
        let mut scratch = Self::create(purpose)?;
        let chunk = random_bytes(WRITE_CHUNK);
        for _ in 0..bytes.div_ceil(WRITE_CHUNK) {
            scratch.file.write_all(&chunk).map_err(io_error)?;
        }
        scratch.file.sync_all().map_err(io_error)?;
        Ok(scratch)
    }
}

impl Drop for ScratchFile {
    fn drop(&mut self) {
        drop(std::fs::remove_file(&self.path));
    }
}

/// A read-only shared mapping of a whole [`ScratchFile`], unmapped when dropped.
struct Mapping {
    address: *mut libc::c_void,
    len: usize,
}

impl Mapping {
    /// Maps the first `len` bytes of `scratch`, which must be at least that long.
    fn read_only(scratch: &ScratchFile, len: usize) -> Result<Self, String> {
        let size = scratch.file.metadata().map_err(io_error)?.len();
        if size < len as u64 {
            return Err(format!("{} has {size} bytes, not {len}", scratch.path.display()));
        }
        // SAFETY: a new read-only mapping at an address the kernel chooses, of a file descriptor
        // `scratch` keeps open; it overlaps no Rust object. The result is checked below.
        let address = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, scratch.file.as_raw_fd(), 0)
        };
        if address == libc::MAP_FAILED {
            return Err(format!("mmap: {}", std::io::Error::last_os_error()));
        }
        Ok(Mapping { address, len })
    }

    /// Advises the kernel of the access pattern (`madvise`).
    fn advise(&self, advice: libc::c_int) -> Result<(), String> {
        // SAFETY: the range is exactly this live mapping; advice changes no memory contents.
        if unsafe { libc::madvise(self.address, self.len, advice) } == 0 {
            Ok(())
        } else {
            Err(format!("madvise: {}", std::io::Error::last_os_error()))
        }
    }

    /// For each page of the mapping, whether it is in the page cache (`mincore`).
    fn resident_pages(&self) -> Result<Vec<bool>, String> {
        let mut residency = vec![0u8; self.len.div_ceil(page_size())];
        // SAFETY: the range is exactly this live, page-aligned mapping, and `residency` holds one
        // byte per page of it, as `mincore` writes.
        if unsafe { libc::mincore(self.address, self.len, residency.as_mut_ptr()) } != 0 {
            return Err(format!("mincore: {}", std::io::Error::last_os_error()));
        }
        Ok(residency.into_iter().map(|r| r & 1 != 0).collect())
    }

    /// Reads the first byte of page `page`, faulting it in if needed.
    fn touch(&self, page: usize) -> u8 {
        let offset = page * page_size();
        assert!(offset < self.len, "page {page} lies outside the mapping");
        // SAFETY: `offset` lies inside this live readable mapping, and the file behind it is one
        // this process created (`create_new`) with at least `len` bytes and never truncates, so
        // the read cannot fault with SIGBUS. A volatile read keeps the touch from being elided.
        unsafe { std::ptr::read_volatile(self.address.cast::<u8>().add(offset)) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: exactly the range `mmap` returned, unmapped once; no reference into it
        // outlives `self` (`touch` returns bytes by value).
        unsafe { libc::munmap(self.address, self.len) };
    }
}

/// Page faults of the calling thread so far.
struct Faults {
    minor: u64,
    major: u64,
}

/// The calling thread's page faults (`getrusage(RUSAGE_THREAD)`).
fn faults() -> Result<Faults, String> {
    // SAFETY: `rusage` is a plain C struct of integers, valid when zeroed.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a live local the call fills in.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) } != 0 {
        return Err(format!("getrusage: {}", std::io::Error::last_os_error()));
    }
    Ok(Faults { minor: usage.ru_minflt as u64, major: usage.ru_majflt as u64 })
}

/// The size of a page.
fn page_size() -> usize {
    // SAFETY: `sysconf` takes and returns plain integers.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).unwrap_or(4096)
}

/// `0..n` in pseudo-random order (Fisher–Yates).
fn shuffled(n: usize) -> Vec<usize> {
    let mut random = Xorshift::new(0x5eed_0004);
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        order.swap(i, (random.next_u64() % (i as u64 + 1)) as usize);
    }
    order
}

/// `n` pseudo-random bytes, so that no file system can compress or deduplicate the files.
fn random_bytes(n: usize) -> Vec<u8> {
    let mut random = Xorshift::new(nanos());
    (0..n).map(|_| random.next_u64() as u8).collect()
}

/// The clock's nanoseconds, a seed that differs between runs.
fn nanos() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
}

fn io_error(error: std::io::Error) -> String {
    error.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shuffled_is_a_permutation() {
        let mut order = shuffled(1000);
        order.sort_unstable();
        assert!(order.into_iter().eq(0..1000));
    }
}
