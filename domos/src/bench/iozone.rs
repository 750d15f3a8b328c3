//! `domos bench iozone`: IOZone's write, rewrite, read and reread tests (JX section 3.4, Figures
//! 5 and 15) on Domos' storage stack — `bench-iozone` over `fs-ext2`, `svc-bcache` and `drv-disk`
//! on a RAM disk, in one collocated domain (`single`) and in four (`multi`) — against the real `iozone` on
//! Linux's own ext2, mounted from a loop device over an image in tmpfs, as JX measured Linux.
//! Where loop mounting is impossible, the baseline runs on a file in tmpfs and the output says so.
//! iozone runs on a nanosecond clock loaded into it (decision 0016). The suite runs in
//! [`ROUNDS`] rounds, each one run of iozone and one boot of every measured system, one after the other,
//! and each point's best over the rounds counts on both sides: this machine's speed changes
//! from one stretch of milliseconds to the next, and interleaved rounds give both sides the
//! same chances of meeting a good stretch.
//!
//! Figures: `iozone_TEST_CONFIG_FILEKB_RECKB` in KiB/s with Linux's as the baseline, and
//! `iozone_reread_CONFIG_min_pct`, the worst reread point as a percentage of Linux. The human
//! output adds JX's tables (Domos as a percentage of Linux for every file and record size) and
//! draws the reread grids as heat maps.
//!
//! JX's configuration axes (its Figures 9–14: what a safety check or a scheduler costs) where
//! Domos has one: the single-domain layout again with one default changed ([`AXES`]), its reread
//! grid as `iozone_reread_single-AXIS_FILEKB_RECKB` with the default layout's point of the same
//! run as the baseline, `iozone_reread_single-AXIS_median_pct` over the grid, and a heat map
//! each.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::{Figure, leak, measure};

const TESTS: [&str; 4] = ["write", "rewrite", "read", "reread"];
const CONFIGS: [&str; 2] = ["single", "multi"];
/// JX's configuration axes that Domos has: a name, the line that changes the single-domain
/// layout's domain, and what it means. Each is measured against the layout with every default.
const AXES: [(&str, &str, &str); 4] = [
    (
        "copied",
        "collocate = false",
        "each component in a module and heap of its own: portal calls that copy between them, as between domains",
    ),
    ("explicit", "bounds_checks = \"explicit\"", "heap accesses checked by a compare in the code, not by guard pages"),
    ("unpreempted", "preemption = false", "no preemption (epoch) checks in the code"),
    (
        "scheduler",
        "scheduler = { component = \"sched-round-robin\" }",
        "the domain's threads picked by a scheduler component, not the kernel",
    ),
];
/// The clock the real iozone runs on (`iozone_clock.c`, built by build.rs): gettimeofday in
/// nanoseconds given as microseconds, so that iozone's microsecond arithmetic (a tick taken off
/// every interval, a tick at least) does not decide the figures of points that last a few
/// microseconds ([decision 0016](../../../docs/decisions/0016-iozone-on-a-nanosecond-clock.md)).
const IOZONE_CLOCK: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/iozone_clock.so"));
/// What the clock says on standard error when iozone has loaded it.
const IOZONE_CLOCK_LOADED: &str = "domos-iozone-clock: nanoseconds as microseconds";
/// Rounds of the suite: each runs the real iozone once and boots every measured system once
/// (`bench-iozone runs=1`); each point's best over the rounds counts, on both sides. Nine, not
/// three: a point read in one call lasts a microsecond or two, and with three samples a side
/// the grid's worst point was mostly the worst of 36 draws of this machine's noise (decision
/// 0016, "Later: nine rounds").
const ROUNDS: usize = 9;
/// The largest file, in KiB (JX: 4 KiB to 512 KiB); `--max-kib` lowers it.
pub(super) const MAX_FILE_KIB: u64 = 512;

/// Linux's figures: (test, file KiB, record KiB) → KiB/s, and where they were measured.
struct Linux {
    points: BTreeMap<(String, u64, u64), f64>,
    place: String,
}

/// Runs the suite: `ROUNDS` rounds, each one run of the real iozone and one boot of every
/// measured system, interleaved so that both sides meet the machine's moods alike; each point's
/// best over the rounds counts, on both sides.
///
/// # Errors
/// When `iozone` is missing or fails, or the measured system fails.
pub fn run(max_kib: u64) -> Result<Vec<Figure>, String> {
    let mut progress = super::Progress::new("iozone", ROUNDS * (1 + CONFIGS.len() + AXES.len()));
    // Ctrl-C ends the rounds at the next step, and the loop mount is undone below.
    let _interruptible = crate::host::Interruptible::install();
    let mut linux = LinuxRuns::mount(max_kib);
    let mut layouts: BTreeMap<&str, BTreeMap<String, f64>> = BTreeMap::new();
    let mut axes: BTreeMap<&str, BTreeMap<String, f64>> = BTreeMap::new();
    let measured = (|| -> Result<(), String> {
        for round in 1..=ROUNDS {
            let mut step = |what: &str| {
                progress.step(&format!("round {round}/{ROUNDS}: {what}"));
                crate::host::check_interrupted()
            };
            step("Linux's ext2 under the real iozone")?;
            linux.run_once()?;
            for config in CONFIGS {
                step(&format!("the grid in the {config}-domain layout"))?;
                best(layouts.entry(config).or_default(), measure(&grid_config(max_kib, config == "single"))?);
            }
            for (axis, line, _) in AXES {
                step(&format!("the reread grid in the single-domain layout with {line}"))?;
                best(axes.entry(axis).or_default(), measure(&axis_config(max_kib, line))?);
            }
        }
        Ok(())
    })();
    let linux = linux.finish();
    measured?;
    let mut figures = Vec::new();
    for config in CONFIGS {
        let mut worst_reread = f64::INFINITY;
        for (name, value) in layouts.get(config).into_iter().flatten() {
            let Some(rest) = name.strip_prefix("iozone_") else { continue };
            let mut parts = rest.split('_');
            let (Some(test), Some(file), Some(record)) = (parts.next(), parts.next(), parts.next()) else { continue };
            let (Ok(file), Ok(record)) = (file.parse::<u64>(), record.parse::<u64>()) else { continue };
            let Some(&baseline) = linux.points.get(&(test.to_string(), file, record)) else { continue };
            if test == "reread" {
                worst_reread = worst_reread.min(value / baseline * 100.0);
            }
            figures.push(Figure {
                name: leak(format!("iozone_{test}_{config}_{file}_{record}")),
                unit: "KiB/s",
                value: *value,
                baseline: leak(format!("linux_{test}_{file}_{record}")),
                baseline_value: baseline,
                what: leak(format!("{test}, {file} KiB file in {record} KiB records, {config} domain(s)")),
            });
        }
        figures.push(Figure {
            name: leak(format!("iozone_reread_{config}_min_pct")),
            unit: "%",
            value: worst_reread,
            baseline: "linux",
            baseline_value: 100.0,
            what: leak(format!("worst reread point as a percentage of Linux ({config}; Linux on {})", linux.place)),
        });
    }
    for (axis, _, what) in AXES {
        let mut rereads = Vec::new();
        for (name, value) in axes.get(axis).into_iter().flatten() {
            let Some(point) = name.strip_prefix("iozone_reread_") else { continue };
            let Some((file, record)) = point.split_once('_') else { continue };
            let default = format!("iozone_reread_single_{point}");
            let Some(baseline) = figures.iter().find(|f| f.name == default).map(|f| f.value) else { continue };
            rereads.push(value / baseline * 100.0);
            figures.push(Figure {
                name: leak(format!("iozone_reread_single-{axis}_{point}")),
                unit: "KiB/s",
                value: *value,
                baseline: leak(default),
                baseline_value: baseline,
                what: leak(format!("reread, {file} KiB file in {record} KiB records, single domain, {what}")),
            });
        }
        rereads.sort_by(f64::total_cmp);
        figures.push(Figure {
            name: leak(format!("iozone_reread_single-{axis}_median_pct")),
            unit: "%",
            value: rereads.get(rereads.len() / 2).copied().unwrap_or(f64::NAN),
            baseline: "iozone_reread_single",
            baseline_value: 100.0,
            what: leak(format!("median reread point as a percentage of the default single layout: {what}")),
        });
    }
    Ok(figures)
}

/// The single-domain layout with the domain's `line` added.
fn axis_config(max_kib: u64, line: &str) -> String {
    let config = grid_config(max_kib, true);
    // The line replaces the domain's own setting of its key, or joins the domain's settings.
    let key = line.split('=').next().unwrap_or_default().trim();
    match config.lines().find(|l| l.split('=').next().is_some_and(|k| k.trim() == key)) {
        Some(own) => config.replacen(own, line, 1),
        None => config.replacen("name = \"Storage\"\n", &format!("name = \"Storage\"\n{line}\n"), 1),
    }
}

/// The measured system: `bench-iozone` over the storage stack on a 64 MiB RAM disk, in one
/// domain or in four.
fn grid_config(max_kib: u64, single: bool) -> String {
    let args = format!("max={max_kib} runs=1");
    crate::fs::storage_config("size = \"64 MiB\"", "mkfs block=4096", "bench-iozone", &args, single)
}

/// Keeps each name's best (highest) value of `results` in `kept`.
fn best<K: Ord>(kept: &mut BTreeMap<K, f64>, results: impl IntoIterator<Item = (K, f64)>) {
    for (name, value) in results {
        let slot = kept.entry(name).or_insert(0.0f64);
        *slot = slot.max(value);
    }
}

/// The real `iozone` on Linux's ext2 (a loop-mounted image in tmpfs), or on tmpfs where loop
/// mounting fails: mounted once, run once per round, each point's best kept.
struct LinuxRuns {
    image: PathBuf,
    mount: PathBuf,
    /// Where iozone writes its file.
    dir: PathBuf,
    /// What `dir` is, for the report.
    place: String,
    mounted: bool,
    clock: PathBuf,
    clock_written: Result<(), String>,
    max_kib: u64,
    points: BTreeMap<(String, u64, u64), f64>,
    /// Why some run had iozone's own clock, if one had.
    own_clock: Option<String>,
}

impl LinuxRuns {
    /// Makes and mounts the file system iozone runs on.
    fn mount(max_kib: u64) -> LinuxRuns {
        let shm = if Path::new("/dev/shm").is_dir() { Path::new("/dev/shm") } else { Path::new("/tmp") };
        let image = shm.join(format!("domos-iozone-{}.img", std::process::id()));
        let mount = std::env::temp_dir().join(format!("domos-iozone-{}", std::process::id()));
        let mounted = (|| -> Result<(), String> {
            std::fs::write(&image, vec![0u8; 64 << 20]).map_err(|e| e.to_string())?;
            run_tool("mke2fs", &["-q", "-F", "-t", "ext2", &image.to_string_lossy()])?;
            std::fs::create_dir_all(&mount).map_err(|e| e.to_string())?;
            run_tool("mount", &["-o", "loop", &image.to_string_lossy(), &mount.to_string_lossy()])
        })();
        let (dir, place) = match &mounted {
            Ok(()) => (mount.clone(), "ext2 on a loop device over an image in tmpfs".to_string()),
            Err(why) => (shm.to_path_buf(), format!("a file in tmpfs (loop mounting failed: {why})")),
        };
        let clock = std::env::temp_dir().join(format!("domos-iozone-clock-{}.so", std::process::id()));
        let clock_written = std::fs::write(&clock, IOZONE_CLOCK).map_err(|e| e.to_string());
        LinuxRuns {
            image,
            mount,
            dir,
            place,
            mounted: mounted.is_ok(),
            clock,
            clock_written,
            max_kib,
            points: BTreeMap::new(),
            own_clock: None,
        }
    }

    /// One run of iozone's automatic mode over the grid.
    fn run_once(&mut self) -> Result<(), String> {
        let max_kib = self.max_kib;
        let mut iozone = Command::new("iozone");
        iozone
            .args(["-a", "-i", "0", "-i", "1", "-n", "4k", "-g", &format!("{max_kib}k"), "-y", "4k"])
            .args(["-q", &format!("{max_kib}k"), "-f"])
            .arg(self.dir.join("iozone.tmp"));
        if self.clock_written.is_ok() {
            iozone.env("LD_PRELOAD", &self.clock);
        }
        let output = iozone.output().map_err(|e| format!("cannot run iozone (Debian's iozone3, in non-free): {e}"))?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        // Without its clock, iozone's rates are its own, from its microsecond arithmetic.
        let scale = if stderr.contains(IOZONE_CLOCK_LOADED) {
            1000.0
        } else {
            self.own_clock.get_or_insert_with(|| match &self.clock_written {
                Ok(()) => format!("iozone did not load its clock: {}", stderr.trim()),
                Err(e) => format!("cannot write iozone's clock: {e}"),
            });
            1.0
        };
        let run = parse_iozone(&String::from_utf8_lossy(&output.stdout));
        if run.is_empty() {
            return Err(format!("iozone printed no results: {}", stderr.trim()));
        }
        best(&mut self.points, run.into_iter().map(|(point, rate)| (point, rate * scale)));
        Ok(())
    }

    /// Unmounts and removes what [`mount`](Self::mount) made; Linux's figures.
    fn finish(self) -> Linux {
        if self.mounted {
            let _ = run_tool("umount", &[&self.mount.to_string_lossy()]);
        }
        let _ = std::fs::remove_file(&self.image);
        let _ = std::fs::remove_dir(&self.mount);
        let _ = std::fs::remove_file(&self.clock);
        let place = match self.own_clock {
            None => format!("{}; iozone on a nanosecond clock, best of {ROUNDS} runs", self.place),
            Some(why) => format!("{}; best of {ROUNDS} runs, some on iozone's microsecond clock ({why})", self.place),
        };
        Linux { points: self.points, place }
    }
}

fn run_tool(tool: &str, args: &[&str]) -> Result<(), String> {
    let path = ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]
        .iter()
        .map(|d| Path::new(d).join(tool))
        .find(|p| p.exists())
        .ok_or_else(|| format!("{tool} is not installed"))?;
    let status = Command::new(path).args(args).output().map_err(|e| format!("{tool}: {e}"))?;
    if status.status.success() {
        Ok(())
    } else {
        Err(format!("{tool}: {}", String::from_utf8_lossy(&status.stderr).trim()))
    }
}

/// The rows of IOZone's automatic-mode table: `KB reclen write rewrite read reread …`.
fn parse_iozone(text: &str) -> BTreeMap<(String, u64, u64), f64> {
    let mut points = BTreeMap::new();
    for line in text.lines() {
        let numbers: Vec<f64> = line.split_whitespace().map_while(|w| w.parse().ok()).collect();
        if numbers.len() < 6 || line.split_whitespace().count() != numbers.len() {
            continue;
        }
        for (test, value) in TESTS.iter().zip(&numbers[2..6]) {
            points.insert((test.to_string(), numbers[0] as u64, numbers[1] as u64), *value);
        }
    }
    points
}

/// JX's Figure 5/15 as tables (Domos as a percentage of Linux, file sizes down, record sizes
/// across), and the reread grids as heat maps in `pictures`.
///
/// # Errors
/// When a picture cannot be written.
pub fn report(figures: &[Figure], pictures: &Path, max_kib: u64) -> Result<String, String> {
    let mut out = String::new();
    let pct = |config: &str, test: &str, file: u64, record: u64| {
        let name = format!("iozone_{test}_{config}_{file}_{record}");
        figures.iter().find(|f| f.name == name).map(|f| f.value / f.baseline_value * 100.0)
    };
    let sizes: Vec<u64> = (0..).map(|i| 4u64 << i).take_while(|&s| s <= max_kib).collect();
    std::fs::create_dir_all(pictures).map_err(|e| format!("cannot create {}: {e}", pictures.display()))?;
    for config in CONFIGS {
        for test in TESTS {
            let _ = writeln!(out, "\n{test}, {config}: Domos as % of Linux (rows: file KiB, columns: record KiB)");
            let _ = write!(out, "{:>6}", "");
            for record in &sizes {
                let _ = write!(out, "{record:>6}");
            }
            out.push('\n');
            for file in &sizes {
                let _ = write!(out, "{file:>6}");
                for record in &sizes {
                    match pct(config, test, *file, *record) {
                        Some(p) => {
                            let _ = write!(out, "{p:>6.0}");
                        }
                        None => out.push_str("      "),
                    }
                }
                out.push('\n');
            }
        }
        let path = pictures.join(format!("iozone-reread-{config}.svg"));
        let title = format!("IOZone reread, {config}: Domos as % of Linux");
        std::fs::write(&path, heat_map(&title, &sizes, &|f, r| pct(config, "reread", f, r)))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        let _ = writeln!(out, "\nreread heat map ({config}): {}", path.display());
    }
    for (axis, line, _) in AXES {
        let relative = |file: u64, record: u64| {
            let name = format!("iozone_reread_single-{axis}_{file}_{record}");
            figures.iter().find(|f| f.name == name).map(|f| f.value / f.baseline_value * 100.0)
        };
        let title = format!("IOZone reread, single domain with {line}: as % of the default");
        let path = pictures.join(format!("iozone-reread-single-{axis}.svg"));
        std::fs::write(&path, heat_map(&title, &sizes, &relative))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        let _ = writeln!(out, "reread heat map, {line}, as % of the default single layout: {}", path.display());
    }
    Ok(out)
}

/// A heat map of percentages titled `title`, red below 100 %, green above.
fn heat_map(title: &str, sizes: &[u64], pct: &dyn Fn(u64, u64) -> Option<f64>) -> String {
    let cell = 56.0;
    let (left, top) = (70.0, 50.0);
    let side = sizes.len() as f64 * cell;
    let mut svg = super::svg::document(left + side + 20.0, top + side + 40.0, (left + side) / 2.0, title);
    let _ = writeln!(svg, "<text x=\"{}\" y=\"40\" text-anchor=\"middle\">record size (KiB)</text>", left + side / 2.0);
    for (i, size) in sizes.iter().enumerate() {
        let at = i as f64 * cell + cell / 2.0;
        let _ = writeln!(
            svg,
            "<text x=\"{:.0}\" y=\"{:.0}\" text-anchor=\"middle\">{size}</text>",
            left + at,
            top + side + 16.0
        );
        let _ = writeln!(
            svg,
            "<text x=\"{:.0}\" y=\"{:.0}\" text-anchor=\"end\">{size}</text>",
            left - 6.0,
            top + at + 4.0
        );
    }
    for (row, file) in sizes.iter().enumerate() {
        for (column, record) in sizes.iter().enumerate() {
            let Some(p) = pct(*file, *record) else { continue };
            // 0 % red, 100 % white, 200 % and above green.
            let t = (p / 100.0).clamp(0.0, 2.0);
            let (r, g, b) =
                if t < 1.0 { (255.0, 255.0 * t, 255.0 * t) } else { (255.0 * (2.0 - t), 255.0, 255.0 * (2.0 - t)) };
            let (x, y) = (left + column as f64 * cell, top + row as f64 * cell);
            let _ = writeln!(
                svg,
                "<rect x=\"{x:.0}\" y=\"{y:.0}\" width=\"{cell}\" height=\"{cell}\" fill=\"rgb({r:.0},{g:.0},{b:.0})\" stroke=\"#999\"/><text x=\"{:.0}\" y=\"{:.0}\" text-anchor=\"middle\">{p:.0}</text>",
                x + cell / 2.0,
                y + cell / 2.0 + 4.0
            );
        }
    }
    let _ = writeln!(
        svg,
        "<text x=\"14\" y=\"{0:.0}\" transform=\"rotate(-90 14 {0:.0})\" text-anchor=\"middle\">file size (KiB)</text>",
        top + side / 2.0
    );
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_iozone_automatic_mode_tables() {
        let text = "\
              kB  reclen    write  rewrite    read    reread    read     write
               4       4   479476  3459188  7115451  7758090
             512     128   1000000  2000000  3000000  4000000
iozone test complete.
";
        let points = parse_iozone(text);
        assert_eq!(points.get(&("reread".into(), 4, 4)), Some(&7_758_090.0));
        assert_eq!(points.get(&("write".into(), 512, 128)), Some(&1_000_000.0));
        assert_eq!(points.len(), 8);
    }

    #[test]
    fn the_clock_given_to_iozone_counts_nanoseconds_as_microseconds() {
        let path = std::env::temp_dir().join(format!("domos-iozone-clock-test-{}.so", std::process::id()));
        std::fs::write(&path, IOZONE_CLOCK).expect("writes the clock");
        let name = std::ffi::CString::new(path.to_string_lossy().as_bytes()).expect("no NUL in a temporary path");
        // SAFETY: `name` is a NUL-terminated path; the library's only initialiser reads the clock
        // and writes a line to standard error.
        let library = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        let _ = std::fs::remove_file(&path);
        assert!(!library.is_null(), "the clock loads");
        // SAFETY: a valid handle and a NUL-terminated name.
        let symbol = unsafe { libc::dlsym(library, c"gettimeofday".as_ptr()) };
        assert!(!symbol.is_null(), "the clock defines gettimeofday");
        type GetTimeOfDay = unsafe extern "C" fn(*mut libc::timeval, *mut libc::c_void) -> libc::c_int;
        // SAFETY: the symbol is the library's `gettimeofday`, of this signature; the library is
        // never closed, so the function stays mapped.
        let gettimeofday = unsafe { std::mem::transmute::<*mut libc::c_void, GetTimeOfDay>(symbol) };
        let read = || {
            let mut now = libc::timeval { tv_sec: 0, tv_usec: 0 };
            // SAFETY: `now` is a valid timeval for the call to fill; no time zone is asked for.
            assert_eq!(unsafe { gettimeofday(&mut now, std::ptr::null_mut()) }, 0);
            now.tv_sec * 1_000_000 + now.tv_usec
        };
        let before = read();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let ticks = read() - before;
        // Two milliseconds are two million of its "microseconds" (one second allows for a slow machine).
        assert!((2_000_000..1_000_000_000).contains(&ticks), "2 ms counted as {ticks} µs");
    }

    #[test]
    fn each_axis_changes_its_setting_of_the_single_domain() {
        use domos_loader::codegen::BoundsChecks;
        use domos_loader::config::SchedulerChoice;
        let default = domos_loader::SystemConfig::parse(&grid_config(64, true)).expect("parses");
        for (axis, line, _) in AXES {
            let changed = domos_loader::SystemConfig::parse(&axis_config(64, line)).expect("parses");
            let (before, after) = (&default.domains[0], &changed.domains[0]);
            assert_eq!(changed.domains.len(), 1, "{axis}");
            let differs = match axis {
                "copied" => !after.collocate && before.collocate,
                "explicit" => after.bounds_checks == Some(BoundsChecks::Explicit) && before.bounds_checks.is_none(),
                "unpreempted" => after.preemption == Some(false) && before.preemption.is_none(),
                "scheduler" => {
                    matches!(after.scheduler, SchedulerChoice::Component(_))
                        && matches!(before.scheduler, SchedulerChoice::BuiltIn(_))
                }
                other => panic!("an axis the test does not know: {other}"),
            };
            assert!(differs, "{axis}: {line}");
        }
    }

    #[test]
    fn heat_maps_colour_by_percentage() {
        let svg = heat_map("single", &[4, 8], &|f, r| (r <= f).then_some(if f == 4 { 50.0 } else { 150.0 }));
        assert!(svg.contains("fill=\"rgb(255,128,128)\""), "50 % is pink: {svg}");
        assert!(svg.contains("fill=\"rgb(128,255,128)\""), "150 % is light green: {svg}");
        assert_eq!(svg.matches("<rect x=").count(), 3, "only the points with record ≤ file");
    }
}
