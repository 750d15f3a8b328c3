//! The kernel's tables — every domain, engine, device and disk — and the lifetime of its CPUs and
//! timer. The operations on domains are in the layers above: stores here (`store`), portals
//! (`portal`), creating and running domains (`runtime`), host calls (`host`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use domos_loader::codegen::{CodeGen, Translator};
use domos_loader::component::{Component, ComponentRegistry};
use wasmtime::{Engine, Linker, Store};

use super::Domain;
use super::names::NameService;
use super::store::StoreCtx;
use crate::console::Console;
use crate::object::disk::Disk;
use crate::object::interrupt::Timers;
use crate::object::memory::{Block, MemoryObject};
use crate::sched::{GlobalScheduler, Scheduler};

/// Makes the linkers of one engine with every host call: for thread stores, where the calls
/// that wait are async, and for service-thread stores, where nothing blocks. The host layer
/// (`host::link`) provides it when the kernel starts.
pub type LinkHostCalls = fn(&Engine) -> wasmtime::Result<[Linker<StoreCtx>; 2]>;

/// Which of a backend's linkers a store uses (an index into `Backend::linkers` and
/// `ComponentInstance::pre_linked`).
#[derive(Debug, Clone, Copy)]
pub(crate) enum LinkerKind {
    /// Thread stores, and service stores of services that wait.
    Thread = 0,
    /// Service stores, where nothing blocks.
    Service = 1,
}

/// One code generation's engine, the host calls linked for its stores, and the components
/// translated for it.
pub(crate) struct Backend {
    code: CodeGen,
    pub(crate) engine: Engine,
    /// Translated modules by the address of their code (`Backend::module`), made on first use.
    modules: Mutex<std::collections::BTreeMap<usize, wasmtime::Module>>,
    /// The host calls for each kind of store (indexed by `LinkerKind`). Pre-linking an instance
    /// defines its heap in the linker for a moment: a map entry replaced, where a copy of the
    /// linker per instance cost a third of a domain's creation.
    linkers: [Mutex<Linker<StoreCtx>>; 2],
    /// What `env.memory` names between two pre-linkings, so that no linker keeps a heap alive.
    /// None for an engine without shared memories (Pulley), whose instances are not pre-linked.
    no_heap: Option<wasmtime::SharedMemory>,
}

impl Backend {
    fn new(code: CodeGen, link: LinkHostCalls) -> wasmtime::Result<Backend> {
        let engine = super::engine::engine(code)?;
        let linkers = link(&engine)?.map(|mut linker| {
            linker.allow_shadowing(true);
            Mutex::new(linker)
        });
        let no_heap = match code.translator {
            Translator::Cranelift => Some(wasmtime::SharedMemory::new(&engine, wasmtime::MemoryType::shared(0, 0))?),
            Translator::Pulley => None,
        };
        Ok(Backend { linkers, no_heap, engine, code, modules: Mutex::new(std::collections::BTreeMap::new()) })
    }

    /// The imports of `module` for one store: `heap`, and the host calls of `kind` bound to the
    /// store.
    pub(crate) fn imports(
        &self,
        kind: LinkerKind,
        store: &mut Store<StoreCtx>,
        module: &wasmtime::Module,
        heap: wasmtime::Extern,
    ) -> wasmtime::Result<Vec<wasmtime::Extern>> {
        let linker = crate::lock(&self.linkers[kind as usize]);
        module
            .imports()
            .map(|import| {
                if import.module() == "env" && import.name() == "memory" {
                    return Ok(heap.clone());
                }
                linker
                    .get_by_import(&mut *store, &import)
                    .ok_or_else(|| wasmtime::format_err!("unknown import {}.{}", import.module(), import.name()))
            })
            .collect()
    }

    /// `module` pre-linked with the host calls of `kind` and `heap`: instantiating it in a store
    /// resolves no import by name.
    pub(crate) fn pre_link(
        &self,
        kind: LinkerKind,
        store: &Store<StoreCtx>,
        module: &wasmtime::Module,
        heap: wasmtime::Extern,
    ) -> wasmtime::Result<wasmtime::InstancePre<StoreCtx>> {
        let no_heap = self.no_heap.clone().ok_or_else(|| wasmtime::format_err!("no shared heaps on this engine"))?;
        let mut linker = crate::lock(&self.linkers[kind as usize]);
        linker.define(store, "env", "memory", heap)?;
        let pre = linker.instantiate_pre(module);
        linker.define(store, "env", "memory", no_heap)?;
        pre
    }

    /// The module of `component` translated for this backend, compiled on first use: once for
    /// all the components of the collocated build.
    ///
    /// # Errors
    /// When the component has no build for this translator, or translation fails.
    pub(crate) fn module(&self, component: &Component) -> Result<wasmtime::Module, String> {
        // The code's address names it: the registry holds every code as long as the kernel runs.
        let key = Arc::as_ptr(&component.code) as usize;
        if let Some(module) = crate::lock(&self.modules).get(&key) {
            return Ok(module.clone());
        }
        let module = wasmtime::Module::new(&self.engine, component.code_for(self.code.translator)?).map_err(|e| {
            format!("{} translation of {} failed: {e:#}", self.code.describe(), component.manifest.name)
        })?;
        Ok(crate::lock(&self.modules).entry(key).or_insert(module).clone())
    }
}

/// The kernel.
pub struct Kernel {
    /// Per [`CodeGen::index`], made when the first domain needs it.
    backends: [OnceLock<Backend>; CodeGen::COUNT],
    /// Makes the host calls' linkers of a new backend.
    link: LinkHostCalls,
    /// The default backend's engine, which makes the shared memories behind memory objects.
    memory_engine: Engine,
    /// The name service.
    pub names: NameService,
    /// The scheduler and its CPUs.
    pub scheduler: Arc<Scheduler>,
    /// Where domains' console lines go.
    pub console: Arc<Console>,
    components: ComponentRegistry,
    domains: Mutex<Vec<Arc<Domain>>>,
    next_domain: AtomicU32,
    next_thread: AtomicU32,
    slice_ticks: u64,
    epoch: Instant,
    running: AtomicBool,
    /// The timer ticks until the CPUs have stopped: running code reaches its epoch check only
    /// on a tick.
    ticking: AtomicBool,
    workers: Mutex<Vec<std::thread::JoinHandle<()>>>,
    devices: Mutex<BTreeMap<String, MemoryObject>>,
    /// Emulated disks by name, with their I/O threads.
    disks: Mutex<BTreeMap<String, Arc<Disk>>>,
    disk_threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
    /// Periodic timer interrupts, fired by the timer thread.
    pub(crate) timers: Timers,
    /// Emulated network cards by name.
    pub(crate) nics: crate::object::nic::Nics,
    /// Mounted FUSE connections by name.
    pub(crate) fuses: crate::object::fuse::Fuses,
}

/// Options of a kernel instance.
#[derive(Debug, Clone)]
pub struct KernelOptions {
    /// Worker OS threads; 0 for one per core.
    pub cpus: usize,
    /// Time slice.
    pub slice: Duration,
}

impl Default for KernelOptions {
    fn default() -> Self {
        KernelOptions { cpus: 0, slice: Duration::from_millis(10) }
    }
}

/// Terminated domains the kernel keeps listed for reports.
pub const MAX_ENDED_DOMAINS: usize = 256;

/// Keeps the most recent `MAX_ENDED_DOMAINS` terminated domains of `domains` for reports and
/// forgets older ones, so that a domain creating and terminating children without end does not
/// grow the kernel's list.
fn forget_ended(domains: &mut Vec<Arc<Domain>>) {
    let ended = domains.iter().filter(|d| d.is_terminated()).count();
    let mut forget = ended.saturating_sub(MAX_ENDED_DOMAINS);
    if forget > 0 {
        domains.retain(|d| {
            let forgotten = forget > 0 && d.is_terminated();
            forget -= usize::from(forgotten);
            !forgotten
        });
    }
}

/// Length of one epoch tick.
pub(crate) const TICK: Duration = Duration::from_millis(1);

impl Kernel {
    /// Starts a kernel whose stores link the host calls `link` makes: engines, CPUs and the
    /// preemption timer (`Kernel::start` gives it the host layer's).
    ///
    /// # Errors
    /// When wasmtime or the OS refuse.
    pub(crate) fn start_with(
        options: &KernelOptions,
        components: ComponentRegistry,
        console: Console,
        link: LinkHostCalls,
    ) -> wasmtime::Result<Arc<Kernel>> {
        let default = Backend::new(CodeGen::default(), link)?;
        let memory_engine = default.engine.clone();
        let backends: [OnceLock<Backend>; CodeGen::COUNT] = std::array::from_fn(|_| OnceLock::new());
        let _ = backends[CodeGen::default().index()].set(default);
        let cpus =
            if options.cpus == 0 { std::thread::available_parallelism().map_or(1, |n| n.get()) } else { options.cpus };
        let console = Arc::new(console);
        let slice_ticks = (options.slice.as_millis() as u64).max(1);
        let kernel = Arc::new(Kernel {
            backends,
            link,
            memory_engine,
            names: NameService::default(),
            scheduler: Scheduler::new(GlobalScheduler::default(), Duration::from_millis(slice_ticks), console.clone()),
            console,
            components,
            domains: Mutex::new(Vec::new()),
            next_domain: AtomicU32::new(1),
            next_thread: AtomicU32::new(1),
            slice_ticks,
            epoch: Instant::now(),
            running: AtomicBool::new(true),
            ticking: AtomicBool::new(true),
            workers: Mutex::new(Vec::new()),
            devices: Mutex::new(BTreeMap::new()),
            timers: Timers::default(),
            disks: Mutex::new(BTreeMap::new()),
            disk_threads: Mutex::new(Vec::new()),
            nics: crate::object::nic::Nics::default(),
            fuses: crate::object::fuse::Fuses::default(),
        });
        let mut workers = kernel.scheduler.start_cpus(cpus)?;
        let weak = Arc::downgrade(&kernel);
        workers.push(std::thread::Builder::new().name("domos-timer".into()).spawn(move || {
            while let Some(kernel) = weak.upgrade() {
                if !kernel.ticking.load(Ordering::Acquire) {
                    break;
                }
                kernel.backends.iter().filter_map(OnceLock::get).for_each(|b| b.engine.increment_epoch());
                let now = Instant::now();
                kernel.scheduler.wake_sleepers(now);
                kernel.timers.fire(now);
                drop(kernel);
                std::thread::sleep(TICK);
            }
        })?);
        *crate::lock(&kernel.workers) = workers;
        Ok(kernel)
    }

    /// Whether the kernel runs: false once `shutdown` began, when a trapping thread is not to
    /// blame for it.
    pub(crate) fn is_running(&self) -> bool {
        self.running.load(Ordering::Acquire)
    }

    /// Ticks (milliseconds) of the system's time slice.
    pub(crate) fn slice_ticks(&self) -> u64 {
        self.slice_ticks
    }

    /// A new thread id, unique in this kernel.
    pub(crate) fn new_thread_id(&self) -> u32 {
        self.next_thread.fetch_add(1, Ordering::Relaxed)
    }

    /// A new domain id, unique in this kernel.
    pub(crate) fn new_domain_id(&self) -> u32 {
        self.next_domain.fetch_add(1, Ordering::Relaxed)
    }

    /// Records a domain made whole among the kernel's domains.
    pub(crate) fn add_domain(&self, domain: Arc<Domain>) {
        let mut domains = crate::lock(&self.domains);
        domains.push(domain);
        forget_ended(&mut domains);
    }

    /// The live domain called `name`, or a new one `make` makes from a fresh id, recorded
    /// among the kernel's domains — in one step, so that two callers get the same domain.
    pub(crate) fn find_or_add_domain(&self, name: &str, make: impl FnOnce(u32) -> Arc<Domain>) -> Arc<Domain> {
        let mut domains = crate::lock(&self.domains);
        if let Some(found) = domains.iter().find(|d| d.name == name && !d.is_terminated()) {
            return found.clone();
        }
        let domain = make(self.next_domain.fetch_add(1, Ordering::Relaxed));
        domains.push(domain.clone());
        domain
    }

    /// Forgets the oldest terminated domains beyond `MAX_ENDED_DOMAINS` (after a termination).
    pub(crate) fn forget_ended_domains(&self) {
        forget_ended(&mut crate::lock(&self.domains));
    }

    /// Adds emulated disk `disk`, whose I/O thread is `thread`.
    pub(crate) fn add_disk(&self, name: String, disk: Arc<Disk>, thread: std::thread::JoinHandle<()>) {
        crate::lock(&self.disks).insert(name, disk);
        crate::lock(&self.disk_threads).push(thread);
    }

    /// Nanoseconds since the kernel started.
    pub fn clock_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// The engine whose shared memories back memory objects.
    pub(crate) fn memory_engine(&self) -> &Engine {
        &self.memory_engine
    }

    /// The backend of `code`, made on first use.
    pub(crate) fn backend(&self, code: CodeGen) -> Result<&Backend, String> {
        let slot = &self.backends[code.index()];
        if let Some(backend) = slot.get() {
            return Ok(backend);
        }
        let backend = Backend::new(code, self.link).map_err(|e| format!("cannot set up {}: {e}", code.describe()))?;
        Ok(slot.get_or_init(|| backend))
    }

    /// Adds the memory of an emulated device: `len` zeroed bytes that belong to the kernel, so
    /// no holder's dropping a handle frees them.
    ///
    /// # Errors
    /// A name in use, or a size of 0 or over 1 GiB.
    pub fn add_device(&self, name: &str, len: u64) -> Result<(), String> {
        let mut devices = crate::lock(&self.devices);
        if devices.contains_key(name) {
            return Err(format!("device {name} is defined twice"));
        }
        let block =
            Block::new(self.memory_engine(), len, None).map_err(|e| format!("device {name}: {}", e.describe()))?;
        devices.insert(name.to_string(), MemoryObject::whole(block, len, true));
        Ok(())
    }

    /// Fills device `name`'s memory from `bytes` (from offset 0): how a host tool hands a
    /// component data before the system runs.
    ///
    /// # Errors
    /// No such device, or more bytes than it holds.
    pub fn fill_device(&self, name: &str, bytes: &[u8]) -> Result<(), String> {
        let devices = crate::lock(&self.devices);
        let device = devices.get(name).ok_or_else(|| format!("no device {name}"))?;
        device.write_bytes(0, bytes).map_err(|e| format!("device {name}: {}", e.describe()))
    }

    /// The first `len` bytes of device `name`'s memory: how a host tool collects what a
    /// component left there.
    ///
    /// # Errors
    /// No such device, or more bytes than it holds.
    pub fn device_bytes(&self, name: &str, len: u64) -> Result<Vec<u8>, String> {
        let devices = crate::lock(&self.devices);
        let device = devices.get(name).ok_or_else(|| format!("no device {name}"))?;
        let mut bytes = vec![0u8; usize::try_from(len).map_err(|_| format!("device {name}: too large"))?];
        device.read_bytes(0, &mut bytes).map_err(|e| format!("device {name}: {}", e.describe()))?;
        Ok(bytes)
    }

    /// The emulated disk `name`.
    pub(crate) fn disk(&self, name: &str) -> Option<Arc<Disk>> {
        crate::lock(&self.disks).get(name).cloned()
    }

    /// A fresh view of device `name`'s memory, revocable by its holder without affecting others.
    pub(crate) fn device(&self, name: &str) -> Option<MemoryObject> {
        crate::lock(&self.devices).get(name).and_then(|device| device.handed_out().ok())
    }

    /// The components this kernel can load.
    pub fn components(&self) -> &ComponentRegistry {
        &self.components
    }

    /// Every domain created so far, terminated ones included.
    pub fn domains(&self) -> Vec<Arc<Domain>> {
        crate::lock(&self.domains).clone()
    }

    /// Takes `device`, a FUSE connection mounted outside the kernel (by `fusermount3`, for a
    /// process without root), as the `[[fuse]]` named `name` of the next boot; `unmount` is
    /// called where the kernel would unmount it.
    pub fn adopt_fuse(&self, name: &str, device: std::fs::File, unmount: crate::object::fuse::Unmount) {
        self.fuses.adopt(name, device, unmount);
    }

    /// Asks every FUSE connection to read no more requests (Ctrl-C of `domos mount`): each
    /// driver answers what it took, syncs and ends; [`Kernel::shutdown`] unmounts.
    pub fn stop_fuse_devices(&self) {
        self.fuses.request_stop();
    }

    /// Stops the CPUs and the timer and releases every domain.
    pub fn shutdown(&self) {
        // Code still running (a loop, a service call) stops at its next epoch check, on the
        // next tick: the timer, the last worker, stops only after the CPUs have.
        self.running.store(false, Ordering::Release);
        self.scheduler.stop();
        let mut workers = std::mem::take(&mut *crate::lock(&self.workers));
        let timer = workers.pop();
        for worker in workers {
            let _ = worker.join();
        }
        self.ticking.store(false, Ordering::Release);
        if let Some(timer) = timer {
            let _ = timer.join();
        }
        std::mem::take(&mut *crate::lock(&self.disks)).values().for_each(|disk| disk.stop());
        for thread in std::mem::take(&mut *crate::lock(&self.disk_threads)) {
            let _ = thread.join();
        }
        self.nics.stop();
        self.fuses.stop();
        self.scheduler.forget_threads();
        for domain in self.domains() {
            std::mem::take(&mut *domain.interrupts()).iter().for_each(|source| source.close());
            domain.scheduling.threads().iter().for_each(|thread| thread.discard());
            drop(domain.scheduling.take_component());
            for instance in domain.take_instances() {
                instance.shut_down();
            }
            drop(domain.handles().take_all());
            drop(domain.scheduling.take_threads());
        }
        drop(self.names.remove_all());
    }
}
