//! Crash consistency, measured: the file system killed at random moments of a write workload.
//!
//! Each trial copies a fresh image, boots the storage stack with `test-storage churn SEED` as
//! its client (an endless mix of creates, writes, truncations, renames, removals and syncs, each
//! announced on the console before it runs), kills it after a random time, and then judges the
//! image: `e2fsck -p` must repair it (exit 0 or 1), `e2fsck -fn` must find it clean afterwards,
//! and every file as the last sync left it that no later operation touched must read back from
//! `debugfs` byte for byte. Odd trials run every component in one domain and kill that domain
//! (power lost: the buffer cache's dirty blocks die with it); even trials run one domain per
//! component and kill the file system's, as JX's configurations differ. The buffer cache is
//! small (1 MiB), so that dirty blocks reach the disk in the cache's order between syncs.
//!
//! `DOMOS_CRASH_TRIALS=N` (default 20) sets the number of trials; docs/BENCHMARKS.md reports a
//! run of 1,000.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use domos_loader::ComponentRegistry;
use domos_testing::{DEBUGFS, E2FSCK};

domos_testing::main! {
    a_file_system_killed_at_random_moments_keeps_everything_synced: [E2FSCK, DEBUGFS],
}

mod common;
use common::Run;

fn registry() -> ComponentRegistry {
    common::registry_with(&["test-storage"])
}

/// The byte op `op` writes at file offset `at`: test-storage's `pattern`.
fn pattern(at: u64, op: u64) -> u8 {
    ((at * 31 + op * 97) % 251) as u8
}

/// What the churn's console lines say: the operations by number, and the last one synced.
struct Churn {
    ops: BTreeMap<u64, Vec<String>>,
    synced: u64,
}

impl Churn {
    fn parse(lines: &[String]) -> Churn {
        let (mut ops, mut synced) = (BTreeMap::new(), 0);
        for line in lines {
            let Some((_, said)) = line.split_once("] ") else { continue };
            let words: Vec<String> = said.split_whitespace().map(String::from).collect();
            match words.first().map(String::as_str) {
                Some("op") => {
                    let n = words[1].parse().expect("an op number");
                    ops.insert(n, words[2..].to_vec());
                }
                Some("synced") => synced = words[1].parse().expect("a synced op number"),
                _ => {}
            }
        }
        Churn { ops, synced }
    }

    /// The files and directories after the ops up to `last`: path → contents (`None`: a
    /// directory).
    fn state(&self, last: u64) -> BTreeMap<String, Option<Vec<u8>>> {
        let mut tree: BTreeMap<String, Option<Vec<u8>>> = BTreeMap::new();
        for (&n, op) in self.ops.range(..=last) {
            let number = |i: usize| -> u64 { op[i].parse().expect("a number") };
            match op[0].as_str() {
                "mkdir" => drop(tree.insert(op[1].clone(), None)),
                "new" => drop(tree.insert(op[1].clone(), Some((0..number(2)).map(|at| pattern(at, n)).collect()))),
                "write" => {
                    let (offset, len) = (number(2), number(3));
                    let file = tree.get_mut(&op[1]).and_then(Option::as_mut).expect("a file written exists");
                    let end = (offset + len) as usize;
                    if file.len() < end {
                        file.resize(end, 0);
                    }
                    for at in offset..offset + len {
                        file[at as usize] = pattern(at, n);
                    }
                }
                "truncate" => {
                    let file = tree.get_mut(&op[1]).and_then(Option::as_mut).expect("a file truncated exists");
                    file.resize(number(2) as usize, 0);
                }
                "mv" => {
                    let contents = tree.remove(&op[1]).expect("a file renamed exists");
                    tree.insert(op[2].clone(), contents);
                }
                "rm" => drop(tree.remove(&op[1])),
                other => panic!("an op the churn does not do: {other}"),
            }
        }
        tree
    }

    /// The paths an op after the last sync named: their state on the disk is either.
    fn touched_since_sync(&self) -> BTreeSet<String> {
        let mut paths = BTreeSet::new();
        for op in self.ops.range(self.synced + 1..).map(|(_, op)| op) {
            let path_words = if op[0] == "mv" { 1..3 } else { 1..2 };
            paths.extend(op[path_words].iter().cloned());
        }
        paths
    }
}

/// What one trial found.
struct Trial {
    /// What `e2fsck -p` repaired, one line each, numbers left out (empty: nothing but the mark
    /// that the file system was in use).
    repairs: Vec<String>,
    ops: u64,
    synced: u64,
    checked: usize,
}

fn a_file_system_killed_at_random_moments_keeps_everything_synced() {
    let trials: u64 = std::env::var("DOMOS_CRASH_TRIALS").ok().and_then(|n| n.parse().ok()).unwrap_or(20);
    let dir = std::env::temp_dir().join(format!("domos-crash-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let template = dir.join("template.img");
    let made = std::process::Command::new(env!("CARGO_BIN_EXE_domos"))
        .args(["fs", template.to_str().unwrap(), "mkfs", "64"])
        .output()
        .expect("domos runs");
    assert!(made.status.success(), "mkfs: {}", String::from_utf8_lossy(&made.stderr));

    let mut results = Vec::new();
    let mut random = 0x2545_F491_4F6C_DD1Du64 ^ std::process::id() as u64;
    for trial in 1..=trials {
        random ^= random << 13;
        random ^= random >> 7;
        random ^= random << 17;
        let seed = random % 1_000_000;
        let kill_after = Duration::from_millis(20 + random % 480);
        let single = trial % 2 == 1;
        let result = run_trial(&dir, &template, seed, kill_after, single).unwrap_or_else(|e| {
            panic!("trial {trial} (churn {seed}, killed after {kill_after:?}, single {single}): {e}")
        });
        results.push(result);
    }
    let repaired = results.iter().filter(|t| !t.repairs.is_empty()).count();
    let ops: u64 = results.iter().map(|t| t.ops).sum();
    let synced: u64 = results.iter().map(|t| t.synced).sum();
    let checked: usize = results.iter().map(|t| t.checked).sum();
    eprintln!(
        "{trials} trials: e2fsck -p repaired {repaired} images (the others needed nothing but the in-use mark \
         cleared); {ops} ops ran, {synced} were synced before the kill; {checked} synced files read back intact"
    );
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    for repair in results.iter().flat_map(|t| &t.repairs) {
        *kinds.entry(repair).or_default() += 1;
    }
    for (kind, count) in kinds {
        eprintln!("  {count:6} × {kind}");
    }
    assert!(ops > trials * 5, "the churn ran before the kills: {ops} ops in {trials} trials");
    let _ = std::fs::remove_dir_all(&dir);
}

fn run_trial(dir: &Path, template: &Path, seed: u64, kill_after: Duration, single: bool) -> Result<Trial, String> {
    let image = dir.join("trial.img");
    std::fs::copy(template, &image).map_err(|e| e.to_string())?;
    let image_name = image.to_str().unwrap();
    let text = domos::fs::storage_config(
        &format!("image = \"{image_name}\""),
        "",
        "test-storage",
        &format!("churn {seed}"),
        single,
    )
    .replace("blocks=4096 block=4096 read_ahead=256", "blocks=256 block=4096 read_ahead=16")
    // test-storage is a test component, which the collocated build does not link: the one
    // domain runs each component in a module of its own.
    .replace("collocate = true\n", "");
    let run = Run::boot(&text, kill_after);
    // What the churn said before the kill (an error after it is the kill's doing).
    let before_kill = run.lines();
    run.kernel.terminate(run.domain(if single { "Storage" } else { "Fs" }), "killed by the crash test".into());
    run.kernel.scheduler.wait_idle(Some(Duration::from_secs(10)));
    let lines = run.lines();
    drop(run);
    // A full disk ends the churn early, which is no inconsistency (a fast machine may get there).
    if let Some(stopped) = before_kill.iter().find(|l| l.contains("churn stopped") && !l.contains("NoSpace")) {
        return Err(format!("the churn failed before the kill: {stopped}"));
    }

    let repair =
        std::process::Command::new(E2FSCK.path()).args(["-p", image_name]).output().map_err(|e| e.to_string())?;
    if !matches!(repair.status.code(), Some(0 | 1)) {
        return Err(format!("e2fsck -p could not repair the image: {}", String::from_utf8_lossy(&repair.stdout)));
    }
    let check =
        std::process::Command::new(E2FSCK.path()).args(["-fn", image_name]).output().map_err(|e| e.to_string())?;
    if !check.status.success() {
        return Err(format!("e2fsck -fn after the repair: {}", String::from_utf8_lossy(&check.stdout)));
    }

    let churn = Churn::parse(&lines);
    let expected = churn.state(churn.synced);
    let touched = churn.touched_since_sync();
    let dump = dir.join("dump");
    let _ = std::fs::remove_dir_all(&dump);
    std::fs::create_dir_all(&dump).map_err(|e| e.to_string())?;
    let rdump = format!("rdump / {}", dump.display());
    let dumped = std::process::Command::new(DEBUGFS.path())
        .args(["-R", &rdump, image_name])
        .output()
        .map_err(|e| e.to_string())?;
    if !dumped.status.success() {
        return Err(format!("debugfs rdump: {}", String::from_utf8_lossy(&dumped.stderr)));
    }
    let mut checked = 0;
    for (path, contents) in &expected {
        if touched.contains(path) || touched.iter().any(|t| path.starts_with(&format!("{t}/"))) {
            continue;
        }
        let on_disk = dump.join(path.trim_start_matches('/'));
        match contents {
            None if on_disk.is_dir() => {}
            None => return Err(format!("the synced directory {path} is gone")),
            Some(bytes) => {
                let read = std::fs::read(&on_disk).map_err(|e| format!("the synced file {path}: {e}"))?;
                if &read != bytes {
                    let first = read.iter().zip(bytes).position(|(a, b)| a != b);
                    return Err(format!(
                        "the synced file {path} reads back {} bytes, not {} (first difference at {first:?})",
                        read.len(),
                        bytes.len()
                    ));
                }
                checked += 1;
            }
        }
    }
    Ok(Trial {
        repairs: String::from_utf8_lossy(&repair.stdout)
            .lines()
            .filter_map(|line| line.split_once(": ").map(|(_, said)| said))
            .filter(|said| !said.contains("not cleanly unmounted") && !said.contains(" files"))
            .map(|said| said.chars().map(|c| if c.is_ascii_digit() { '#' } else { c }).collect::<String>())
            .map(|said| said.replace("##", "#").replace("##", "#").replace("##", "#"))
            .collect(),
        ops: churn.ops.keys().last().copied().unwrap_or(0),
        synced: churn.synced,
        checked,
    })
}
