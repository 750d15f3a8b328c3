//! For the kernel's unit tests: components written in WAT, booted in a kernel of one CPU.
//!
//! A test component's `main` usually makes host calls and stores each result as an `i64` at
//! address 0, 8, 16, … of its heap, which the test reads back with [`System::results`].

use std::sync::Arc;
use std::time::Duration;

use domos_loader::component::ComponentRegistry;
use domos_loader::config::SystemConfig;

use crate::domain::Domain;
use crate::object::guest_memory::GuestView;
use crate::runtime::BootOutcome;
use crate::{Console, Kernel, KernelOptions};

/// The entry points an ordinary component must export, doing nothing.
const ENTRY_POINTS: [(&str, &str); 4] = [
    ("domos_init", "(result i32) i32.const 0"),
    ("domos_thread_entry", "(param i32) (result i32) i32.const 0"),
    ("domos_dispatch", "(param i32 i32 i32 i32 i32) (result i32) i32.const 0"),
    ("domos_release", "(param i32)"),
];

/// Whether `body` names `$name` (and not only a longer name that starts so).
fn names(body: &str, name: &str) -> bool {
    let needle = format!("${name}");
    body.match_indices(&needle).any(|(at, _)| {
        body[at + needle.len()..].chars().next().is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_'))
    })
}

/// The module of component `name` (with `manifest`, more lines of its manifest): it imports a
/// one-page heap and every host call `body` calls by its name (`call $memory_create`), defines
/// `body`, and gets the entry points `body` does not define, doing nothing.
pub(crate) fn component(name: &str, manifest: &str, body: &str) -> Vec<u8> {
    module(name, manifest, body, "shared")
}

/// The single-threaded build of the same component, for interpreted domains: its heap unshared.
pub(crate) fn single_component(name: &str, manifest: &str, body: &str) -> Vec<u8> {
    module(name, manifest, body, "")
}

fn module(name: &str, manifest: &str, body: &str, shared: &str) -> Vec<u8> {
    let imports: String = domos_abi::HOST_CALLS
        .iter()
        .filter(|call| names(body, call.name))
        .map(|call| {
            let params: Vec<_> = call.params.iter().map(|(_, t)| t.wasm().name()).collect();
            let result = call.result.map_or(String::new(), |r| format!("(result {})", r.wasm().name()));
            format!("(import \"domos\" \"{0}\" (func ${0} (param {1}) {result}))\n", call.name, params.join(" "))
        })
        .collect();
    let entry_points: String = ENTRY_POINTS
        .iter()
        .filter(|(export, _)| !body.contains(&format!("(export \"{export}\")")))
        .map(|(export, signature)| format!("(func (export \"{export}\") {signature})\n"))
        .collect();
    let manifest = format!("name = \"{name}\"\nversion = \"1\"\n{manifest}").replace('"', "\\\"").replace('\n', "\\n");
    wat::parse_str(format!(
        r#"(module
          (import "env" "memory" (memory 1 65536 {shared}))
          {imports}
          {body}
          {entry_points}
          (global (export "__stack_pointer") (mut i32) (i32.const 65536))
          (@custom "domos:manifest" "{manifest}"))"#
    ))
    .unwrap()
}

/// A `domos_main` that runs `body` and returns 0.
pub(crate) fn main(body: &str) -> String {
    format!("(func (export \"domos_main\") (result i32) {body} i32.const 0)")
}

/// A booted system; shut down when dropped.
pub(crate) struct System {
    pub kernel: Arc<Kernel>,
    pub outcome: BootOutcome,
}

impl System {
    /// Boots the domains of `config` (TOML) on one CPU, with `components` registered, and waits
    /// until every thread has ended.
    pub(crate) fn boot(components: &[Vec<u8>], config: &str) -> System {
        let (kernel, config) = Self::start(components, config, 1);
        let outcome = kernel.boot(&config, Some(Duration::from_secs(60)));
        let system = System { kernel, outcome: outcome.unwrap() };
        assert!(system.outcome.finished, "{:?}", system.kernel.console.lines());
        system
    }

    /// Only creates the domains of `config`: no thread runs.
    pub(crate) fn create(components: &[Vec<u8>], config: &str) -> System {
        let (kernel, config) = Self::start(components, config, 1);
        let domains = config.domains.iter().map(|d| kernel.create_domain(d).unwrap()).collect();
        System { kernel, outcome: BootOutcome { domains, finished: true } }
    }

    /// Boots the domains of `config` on `cpus` CPUs and returns after `wait`, with whatever
    /// threads have not ended still running.
    /// Components given with a single-threaded build (`single_component`) can run interpreted.
    pub(crate) fn running(
        components: &[(Vec<u8>, Option<Vec<u8>>)],
        config: &str,
        cpus: usize,
        wait: Duration,
    ) -> System {
        let mut registry = ComponentRegistry::default();
        for (n, (threaded, single)) in components.iter().enumerate() {
            match single {
                Some(single) => registry.add_pair(&format!("test component {n}"), threaded, single),
                None => registry.add(&format!("test component {n}"), threaded),
            }
            .unwrap();
        }
        let (kernel, config) = Self::start_with(registry, config, cpus);
        let outcome = kernel.boot(&config, Some(wait)).unwrap();
        System { kernel, outcome }
    }

    /// Boots `config` as [`System::boot`] does, with `collocated` as the collocated build of
    /// (some of) `components`.
    pub(crate) fn boot_collocated(components: &[Vec<u8>], collocated: &[u8], config: &str) -> System {
        let mut registry = Self::registry(components);
        registry.add_collocated("test collocated build", collocated);
        let (kernel, config) = Self::start_with(registry, config, 1);
        let outcome = kernel.boot(&config, Some(Duration::from_secs(60)));
        let system = System { kernel, outcome: outcome.unwrap() };
        assert!(system.outcome.finished, "{:?}", system.kernel.console.lines());
        system
    }

    fn registry(components: &[Vec<u8>]) -> ComponentRegistry {
        let mut registry = ComponentRegistry::default();
        for (n, bytes) in components.iter().enumerate() {
            registry.add(&format!("test component {n}"), bytes).unwrap();
        }
        registry
    }

    fn start(components: &[Vec<u8>], config: &str, cpus: usize) -> (Arc<Kernel>, SystemConfig) {
        Self::start_with(Self::registry(components), config, cpus)
    }

    fn start_with(registry: ComponentRegistry, config: &str, cpus: usize) -> (Arc<Kernel>, SystemConfig) {
        let options = KernelOptions { cpus, slice: Duration::from_millis(10) };
        (Kernel::start(&options, registry, Console::capture()).unwrap(), SystemConfig::parse(config).unwrap())
    }

    /// The domain called `name`.
    pub(crate) fn domain(&self, name: &str) -> &Arc<Domain> {
        self.outcome.domains.iter().find(|d| d.name == name).unwrap()
    }

    /// `len` bytes at `addr` of the heap of the first component of domain `name`.
    pub(crate) fn heap(&self, name: &str, addr: u32, len: usize) -> Vec<u8> {
        let mut bytes = vec![0u8; len];
        GuestView::of(&self.domain(name).instances()[0].memory).read(addr, &mut bytes).unwrap();
        bytes
    }

    /// The `count` results stored at address 0, 8, 16, … of domain `name`'s first heap.
    pub(crate) fn results(&self, name: &str, count: usize) -> Vec<i64> {
        let bytes = self.heap(name, 0, 8 * count);
        bytes.chunks(8).map(|b| i64::from_le_bytes(b.try_into().unwrap())).collect()
    }

    /// The console's lines.
    pub(crate) fn lines(&self) -> Vec<String> {
        self.kernel.console.lines()
    }
}

impl Drop for System {
    fn drop(&mut self) {
        self.kernel.shutdown();
    }
}
