//! What the test targets that boot whole systems share: a booted system and the test components
//! it can load. Each target defines `registry()` (the components it boots with) at its root.

use std::sync::Arc;
use std::time::Duration;

use domos_kernel::{BootOutcome, Console, Domain, Kernel};
use domos_loader::ComponentRegistry;

/// The embedded components and the test components `names`, built by domos/build.rs.
pub fn registry_with(names: &[&str]) -> ComponentRegistry {
    let mut registry = domos::embedded_components().expect("embedded components verify");
    for name in names {
        let (threaded, single) = domos::guest_component(name).expect("test components are built by domos/build.rs");
        registry.add_pair(name, &threaded, &single).expect("test components verify");
    }
    registry
}

/// Runs `command` with `input` on its standard input and gives up after `limit` (every judge
/// also has a timeout of its own): its output, whatever its status.
#[allow(dead_code, reason = "only the targets with judges in network namespaces run commands")]
pub fn output_within(mut command: std::process::Command, input: &[u8], limit: Duration) -> std::process::Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child =
        command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("the judge starts");
    let _ = child.stdin.take().map(|mut stdin| stdin.write_all(input));
    let start = std::time::Instant::now();
    while child.try_wait().ok().flatten().is_none() && start.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    child.wait_with_output().expect("the judge ends")
}

/// The number after the word `key` in the console line `line` (a component's report, such as
/// `reads 12 wrong 0`).
#[allow(dead_code, reason = "only the targets whose components report counts read them")]
pub fn figure(line: &str, key: &str) -> u64 {
    let mut words = line.split_whitespace().skip_while(|word| *word != key);
    words.nth(1).and_then(|word| word.parse().ok()).unwrap_or_else(|| panic!("{key} in {line:?}"))
}

/// A booted system, shut down when dropped.
pub struct Run {
    pub kernel: Arc<Kernel>,
    pub outcome: BootOutcome,
}

impl Run {
    /// Boots `config` with the target's `registry()` and waits at most `timeout`.
    #[allow(dead_code, reason = "not every target boots for a fixed time")]
    pub fn boot(config: &str, timeout: Duration) -> Run {
        let (kernel, outcome) =
            domos::boot(config, super::registry(), Console::capture(), Some(timeout)).expect("boots");
        Run { kernel, outcome }
    }

    /// The console's lines so far.
    pub fn lines(&self) -> Vec<String> {
        self.kernel.console.lines()
    }

    /// Whether a console line contains `text`.
    #[allow(dead_code, reason = "not every target looks for one line")]
    pub fn has_line(&self, text: &str) -> bool {
        self.lines().iter().any(|l| l.contains(text))
    }

    /// The booted domain called `name`.
    #[allow(dead_code, reason = "not every target looks domains up")]
    pub fn domain(&self, name: &str) -> &Arc<Domain> {
        self.outcome.domains.iter().find(|d| d.name == name).expect("domain exists")
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        self.kernel.shutdown();
    }
}
