//! DomainZero: creating, running and terminating domains, and booting a system from its
//! configuration.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use domos_abi::HostError;
use wasmtime::{Engine, Linker, SharedMemory, Store, UpdateDeadline, Val};

use crate::console::Console;
use crate::domain::{ComponentInstance, Domain, Heap, Region, ServiceThread, SingleHeap};
use crate::host::{self, StoreCtx};
use crate::names::NameService;
use crate::sched::{GlobalScheduler, LocalScheduler, Scheduler, Thread};
use crate::scheduler_component::{GlobalComponent, LocalComponent, SchedulerStore};
use crate::translator;
use domos_loader::codegen::{CodeGen, Translator};
use domos_loader::component::{Component, ComponentRegistry};
use domos_loader::config::{ComponentConfig, DomainConfig, SchedulerChoice, SystemConfig};
use domos_loader::verifier::Kind;

/// A domain's local scheduler as its `scheduler` setting chooses it.
struct LocalChoice {
    /// The scheduler component and its own slice, if one is chosen.
    component: Option<(Arc<Component>, Option<u64>)>,
    /// The built-in policy: the chosen one, or the one that replaces a failing component.
    built_in: LocalScheduler,
    /// The policy's name, which components' manifests may require.
    policy: String,
}

/// The first of `components` whose manifest requires a local scheduler other than `policy`:
/// its name and the policy it requires.
fn refusing_policy<'a>(
    components: impl IntoIterator<Item = &'a Component>,
    policy: &str,
) -> Option<(&'a str, &'a str)> {
    components.into_iter().find_map(|c| {
        let required = c.manifest.scheduler.as_str();
        (required != "any" && required != policy).then_some((c.manifest.name.as_str(), required))
    })
}

/// The name of the domain the kernel makes for a global scheduler component.
pub const GLOBAL_SCHEDULER_DOMAIN: &str = "global-scheduler";

/// Which entry point a thread runs.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Entry {
    Init,
    /// `init`, then `main` when `init` succeeds (domains created by a running domain).
    InitThenMain,
    Main,
    Spawned(u32),
    /// The handler thread of interrupt source `n` of the domain: runs `domos_interrupt` once per
    /// batch of events until the source is closed.
    Interrupt(u32),
}

/// Which of a backend's linkers a store uses (an index into `ComponentInstance::pre_linked`).
#[derive(Debug, Clone, Copy)]
pub(crate) enum LinkerKind {
    /// Thread stores, and service stores of services that wait.
    Thread = 0,
    /// Service stores, where nothing blocks.
    Service = 1,
}

/// One code generation's engine, the host calls linked for its stores, and the components
/// translated for it.
struct Backend {
    code: CodeGen,
    engine: Engine,
    /// Translated components by name, made on first use.
    modules: Mutex<std::collections::BTreeMap<String, wasmtime::Module>>,
    /// For thread stores, where the calls that wait are async.
    thread_linker: Linker<StoreCtx>,
    /// For service-thread stores, which run calls synchronously.
    service_linker: Linker<StoreCtx>,
}

impl Backend {
    fn new(code: CodeGen) -> wasmtime::Result<Backend> {
        let engine = translator::engine(code)?;
        Ok(Backend {
            thread_linker: host::thread_linker(&engine)?,
            service_linker: host::service_linker(&engine)?,
            engine,
            code,
            modules: Mutex::new(std::collections::BTreeMap::new()),
        })
    }

    /// `component` translated for this backend, compiled on first use.
    ///
    /// # Errors
    /// When the component has no build for this translator, or translation fails.
    fn module(&self, component: &Component) -> Result<wasmtime::Module, String> {
        let name = &component.manifest.name;
        if let Some(module) = crate::lock(&self.modules).get(name) {
            return Ok(module.clone());
        }
        let module = wasmtime::Module::new(&self.engine, component.code(self.code.translator)?)
            .map_err(|e| format!("{} translation of {name} failed: {e:#}", self.code.describe()))?;
        Ok(crate::lock(&self.modules).entry(name.clone()).or_insert(module).clone())
    }
}

/// The kernel.
pub struct Kernel {
    /// Per [`CodeGen::index`], made when the first domain needs it.
    backends: [OnceLock<Backend>; CodeGen::COUNT],
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
    devices: Mutex<std::collections::BTreeMap<String, crate::memory::MemoryObject>>,
    /// Emulated disks by name, with their I/O threads.
    disks: Mutex<std::collections::BTreeMap<String, Arc<crate::disk::Disk>>>,
    disk_threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
    /// Periodic timer interrupts, fired by the timer thread.
    pub(crate) timers: crate::interrupt::Timers,
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

/// Length of one epoch tick.
const TICK: Duration = Duration::from_millis(1);

impl Kernel {
    /// Starts a kernel: engines, CPUs and the preemption timer.
    ///
    /// # Errors
    /// When wasmtime or the OS refuse.
    pub fn start(
        options: &KernelOptions,
        components: ComponentRegistry,
        console: Console,
    ) -> wasmtime::Result<Arc<Kernel>> {
        let default = Backend::new(CodeGen::default())?;
        let memory_engine = default.engine.clone();
        let backends: [OnceLock<Backend>; CodeGen::COUNT] = std::array::from_fn(|_| OnceLock::new());
        let _ = backends[CodeGen::default().index()].set(default);
        let cpus =
            if options.cpus == 0 { std::thread::available_parallelism().map_or(1, |n| n.get()) } else { options.cpus };
        let console = Arc::new(console);
        let slice_ticks = (options.slice.as_millis() as u64).max(1);
        let kernel = Arc::new(Kernel {
            backends,
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
            devices: Mutex::new(std::collections::BTreeMap::new()),
            timers: crate::interrupt::Timers::default(),
            disks: Mutex::new(std::collections::BTreeMap::new()),
            disk_threads: Mutex::new(Vec::new()),
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

    /// Nanoseconds since the kernel started.
    pub fn clock_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// The engine whose shared memories back memory objects.
    pub(crate) fn memory_engine(&self) -> &Engine {
        &self.memory_engine
    }

    /// The backend of `code`, made on first use.
    fn backend(&self, code: CodeGen) -> Result<&Backend, String> {
        let slot = &self.backends[code.index()];
        if let Some(backend) = slot.get() {
            return Ok(backend);
        }
        let backend = Backend::new(code).map_err(|e| format!("cannot set up {}: {e}", code.describe()))?;
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
        let block = crate::memory::Block::new(self.memory_engine(), len, None)
            .map_err(|e| format!("device {name}: {}", e.describe()))?;
        devices.insert(name.to_string(), crate::memory::MemoryObject::whole(block, len, true));
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
    pub(crate) fn disk(&self, name: &str) -> Option<Arc<crate::disk::Disk>> {
        crate::lock(&self.disks).get(name).cloned()
    }

    /// A fresh view of device `name`'s memory, revocable by its holder without affecting others.
    pub(crate) fn device(&self, name: &str) -> Option<crate::memory::MemoryObject> {
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

    /// Creates a domain: its heaps and component instances (and, for an interpreted domain, each
    /// instance's single store). No thread runs yet.
    ///
    /// # Errors
    /// Unknown components, ungranted host calls, a heap limit too small for the components.
    pub fn create_domain(self: &Arc<Self>, config: &DomainConfig) -> Result<Arc<Domain>, String> {
        self.create_domain_under(None, config)
    }

    fn create_domain_under(
        self: &Arc<Self>,
        parent: Option<&Arc<Domain>>,
        config: &DomainConfig,
    ) -> Result<Arc<Domain>, String> {
        config.validate()?;
        let components = config
            .components
            .iter()
            .map(|c| {
                self.components.get(&c.name).cloned().ok_or_else(|| {
                    let known: Vec<_> = self.components.names().collect();
                    format!("domain {}: unknown component {} (known: {})", config.name, c.name, known.join(", "))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let local = self.local_choice(&config.scheduler)?;
        if let Some(scheduler) = components.iter().find(|c| c.kind != Kind::Ordinary) {
            return Err(format!(
                "domain {}: component {} is a scheduler; name it in the domain's `scheduler` (or the system's)",
                config.name, scheduler.manifest.name
            ));
        }
        if let Some((component, required)) = refusing_policy(components.iter().map(|c| &**c), &local.policy) {
            return Err(format!(
                "domain {}: component {component} requires the {required} local scheduler, but the domain uses {}",
                config.name, local.policy,
            ));
        }
        for component in &components {
            let missing = component.ungranted_calls(&config.grants);
            if !missing.is_empty() {
                return Err(format!(
                    "domain {}: component {} imports {}, which the domain was not granted",
                    config.name,
                    component.manifest.name,
                    missing.join(", ")
                ));
            }
        }
        let id = self.next_domain.fetch_add(1, Ordering::Relaxed);
        let domain = Arc::new(Domain::new(
            id,
            config.name.clone(),
            config.limits(),
            config.code(),
            local.built_in,
            config.grants.clone(),
            parent.map_or_else(std::sync::Weak::new, Arc::downgrade),
        ));
        let mut instances = Vec::new();
        let fail = |e: String| {
            domain.mark_terminated(e.clone());
            e
        };
        let backend = self.backend(domain.code).map_err(fail)?;
        for (component, spec) in components.into_iter().zip(&config.components) {
            let module = backend.module(&component).map_err(fail)?;
            let initial = module
                .imports()
                .find_map(|i| i.ty().memory().map(|m| m.minimum()))
                .ok_or_else(|| fail(format!("component {} imports no memory", spec.name)))?;
            if config.translator == Translator::Pulley {
                let share = domain.limits.heap / config.components.len() as u64;
                instances.push(self.single_instance(&domain, component, spec, &module, initial, share).map_err(fail)?);
                continue;
            }
            let instance = self.shared_instance(&domain, component, spec, &module, initial).map_err(fail)?;
            instances.push(instance);
        }
        domain.set_instances(instances);
        if let Some((component, slice_ms)) = &local.component {
            self.install_local_scheduler(&domain, component, *slice_ms, local.built_in).map_err(fail)?;
        }
        crate::lock(&self.domains).push(domain.clone());
        Ok(domain)
    }

    /// An instance of `component` in `domain` over a shared heap of `initial` pages, charged to
    /// the domain.
    fn shared_instance(
        &self,
        domain: &Domain,
        component: Arc<Component>,
        spec: &ComponentConfig,
        module: &wasmtime::Module,
        initial: u64,
    ) -> Result<Arc<ComponentInstance>, String> {
        domain.charge(initial * crate::domain::PAGE).map_err(|_| {
            format!(
                "domain {}: heap limit {} B cannot hold component {} ({} B of static data and stack)",
                domain.name,
                domain.limits.heap,
                spec.name,
                initial * crate::domain::PAGE
            )
        })?;
        let engine = &self.backend(domain.code)?.engine;
        let memory =
            SharedMemory::new(engine, wasmtime::MemoryType::shared(initial as u32, domain.code.max_heap_pages()))
                .map_err(|e| format!("cannot create the heap of {}: {e}", spec.name))?;
        Ok(Arc::new(ComponentInstance::new(
            component,
            spec.args.clone(),
            spec.register.clone(),
            spec.bind.clone(),
            module.clone(),
            Heap::Shared(memory),
            domain.scheduling.clone(),
        )))
    }

    /// What a domain's `scheduler` setting chooses, with the scheduler component looked up.
    fn local_choice(&self, choice: &SchedulerChoice<LocalScheduler>) -> Result<LocalChoice, String> {
        Ok(match choice {
            SchedulerChoice::BuiltIn(policy) => {
                LocalChoice { component: None, built_in: *policy, policy: policy.name().to_string() }
            }
            SchedulerChoice::Component(chosen) => {
                let component =
                    domos_loader::scheduler::find(&self.components, &chosen.component, Kind::LocalScheduler)?;
                let policy = component.manifest.policy.clone().unwrap_or_default();
                LocalChoice {
                    built_in: LocalScheduler::named(&policy).unwrap_or_default(),
                    component: Some((component, chosen.slice_ms)),
                    policy,
                }
            }
        })
    }

    /// Instantiates scheduler `component` in `domain`: a heap and a store of its own.
    fn scheduler_store(
        self: &Arc<Self>,
        domain: &Arc<Domain>,
        component: &Arc<Component>,
    ) -> Result<SchedulerStore, String> {
        let spec = ComponentConfig {
            name: component.manifest.name.clone(),
            args: String::new(),
            register: Default::default(),
            bind: Default::default(),
        };
        let backend = self.backend(domain.code)?;
        if domain.code.translator == Translator::Pulley {
            return Err(format!("domain {}: scheduler components need a compiled domain", domain.name));
        }
        let module = backend.module(component)?;
        let initial = module.imports().find_map(|i| i.ty().memory().map(|m| m.minimum())).unwrap_or(1);
        let instance = self.shared_instance(domain, component.clone(), &spec, &module, initial)?;
        let failed = |e: wasmtime::Error| format!("cannot instantiate scheduler {}: {}", spec.name, describe_trap(&e));
        let mut store =
            self.new_store(domain, &instance, true).map_err(|e| format!("{}: {}", spec.name, e.describe()))?;
        let memory = instance.heap_extern().map_err(failed)?;
        let imports = Self::imports(&backend.service_linker, &mut store, &module, memory).map_err(failed)?;
        let wasm = wasmtime::Instance::new(&mut store, &module, &imports).map_err(failed)?;
        Self::set_stack(&mut store, &wasm).map_err(failed)?;
        Ok(SchedulerStore::new(store, wasm, component))
    }

    /// Makes scheduler component `component` the local scheduler of `domain`, interrupted every
    /// `slice_ms` when given.
    fn install_local_scheduler(
        self: &Arc<Self>,
        domain: &Arc<Domain>,
        component: &Arc<Component>,
        slice_ms: Option<u64>,
        fallback: LocalScheduler,
    ) -> Result<(), String> {
        let local = LocalComponent::new(self.scheduler_store(domain, component)?)?;
        if slice_ms.is_some() && !local.has_interrupted() {
            return Err(format!(
                "domain {}: scheduler {} has no domos_sched_interrupted, so it cannot have a slice_ms",
                domain.name, component.manifest.name
            ));
        }
        let ticks = slice_ms.map_or(0, |ms| ms.min(self.slice_ticks));
        drop(self.scheduler.replace_local(domain, Some((local, ticks)), fallback));
        Ok(())
    }

    /// Replaces `domain`'s local scheduler at run time by `choice`, checking that the domain's
    /// components accept its policy.
    ///
    /// # Errors
    /// An unknown or unfit scheduler, or a policy a component of the domain does not accept.
    pub fn set_local_scheduler(
        self: &Arc<Self>,
        domain: &Arc<Domain>,
        choice: &SchedulerChoice<LocalScheduler>,
    ) -> Result<(), String> {
        let local = self.local_choice(choice)?;
        let instances = domain.instances();
        if let Some((component, required)) = refusing_policy(instances.iter().map(|i| &*i.component), &local.policy) {
            return Err(format!(
                "domain {}: component {component} requires the {required} local scheduler, not {}",
                domain.name, local.policy
            ));
        }
        match &local.component {
            Some((component, slice_ms)) => self.install_local_scheduler(domain, component, *slice_ms, local.built_in),
            None => {
                drop(self.scheduler.replace_local(domain, None, local.built_in));
                Ok(())
            }
        }
    }

    /// Replaces the global scheduler by `choice`: a built-in one, or a scheduler component,
    /// which runs in a domain of its own named `global-scheduler`.
    ///
    /// # Errors
    /// An unknown or unfit scheduler component.
    pub fn set_global_scheduler(self: &Arc<Self>, choice: &SchedulerChoice<GlobalScheduler>) -> Result<(), String> {
        let chosen = match choice {
            SchedulerChoice::BuiltIn(policy) => {
                drop(self.scheduler.replace_global(None, *policy));
                return Ok(());
            }
            SchedulerChoice::Component(chosen) => chosen,
        };
        if chosen.slice_ms.is_some() {
            return Err("the global scheduler has no slice_ms of its own: set [system] slice_ms".into());
        }
        let component = domos_loader::scheduler::find(&self.components, &chosen.component, Kind::GlobalScheduler)?;
        let home = self.global_scheduler_domain()?;
        let global = GlobalComponent::new(self.scheduler_store(&home, &component)?)?;
        let policy = component.manifest.policy.as_deref().and_then(GlobalScheduler::named).unwrap_or_default();
        drop(self.scheduler.replace_global(Some(global), policy));
        Ok(())
    }

    /// The domain that holds global scheduler components, made on first use.
    fn global_scheduler_domain(self: &Arc<Self>) -> Result<Arc<Domain>, String> {
        let mut domains = crate::lock(&self.domains);
        if let Some(home) = domains.iter().find(|d| d.name == GLOBAL_SCHEDULER_DOMAIN && !d.is_terminated()) {
            return Ok(home.clone());
        }
        let id = self.next_domain.fetch_add(1, Ordering::Relaxed);
        let home = Arc::new(Domain::new(
            id,
            GLOBAL_SCHEDULER_DOMAIN.into(),
            crate::domain::DomainLimits::default(),
            CodeGen::default(),
            LocalScheduler::default(),
            Vec::new(),
            std::sync::Weak::new(),
        ));
        home.set_instances(Vec::new());
        domains.push(home.clone());
        Ok(home)
    }

    /// Creates a child of `parent`, paused, from one `[[domain]]` table given as TOML (the
    /// `domain_create` host call); `start_child` runs it. The child's heap limit and CPU tickets
    /// are carved out of the parent's and given back when the child ends; the child ends with
    /// its parent.
    ///
    /// # Errors
    /// A bad description, a parent whose quota cannot hold the child's limit, or anything
    /// `create_domain` refuses.
    pub fn create_child(
        self: &Arc<Self>,
        parent: &Arc<Domain>,
        text: &str,
        fault_handler: Option<Arc<crate::portal::Service>>,
    ) -> Result<Arc<Domain>, String> {
        let mut config = DomainConfig::parse(text)?;
        // A child that names no share gets half of its parent's.
        config.cpu_share.get_or_insert((parent.cpu_tickets() / 2).max(1));
        if let Some(grant) = config.grants.iter().find(|g| !parent.grants.contains(g)) {
            return Err(format!("domain {}: a child cannot be granted {grant:?}, which its parent lacks", parent.name));
        }
        let limit = config.limits().heap;
        let tickets = config.limits().cpu_share;
        if !parent.take_tickets(tickets) {
            return Err(format!("domain {}: its CPU share cannot give a child {tickets} tickets", parent.name));
        }
        if parent.charge(limit).is_err() {
            parent.return_tickets(tickets);
            return Err(format!("domain {}: its quota cannot hold a child of {limit} B", parent.name));
        }
        let domain = match self.create_domain_under(Some(parent), &config) {
            Ok(domain) => domain,
            Err(e) => {
                parent.uncharge(limit);
                parent.return_tickets(tickets);
                return Err(e);
            }
        };
        domain.carved.store(limit, Ordering::Release);
        *crate::lock(&domain.fault_handler) = fault_handler;
        crate::lock(&parent.children).push(domain.clone());
        if parent.is_terminated() {
            self.terminate(&domain, format!("its parent {} ended", parent.name));
            return Err(format!("domain {} ended", parent.name));
        }
        Ok(domain)
    }

    /// Starts a child made by `create_child`: each component runs `init`, then `main`.
    ///
    /// # Errors
    /// `InvalidArgument` when it was started already; the reason when a thread cannot start
    /// (the child is then terminated).
    pub fn start_child(self: &Arc<Self>, domain: &Arc<Domain>) -> Result<(), HostError> {
        if domain.is_terminated() {
            return Err(HostError::ServiceDead);
        }
        if domain.started.swap(true, Ordering::AcqRel) {
            return Err(HostError::InvalidArgument);
        }
        for instance in domain.instances() {
            if let Err(e) = self.spawn_thread(domain, &instance, Entry::InitThenMain) {
                self.terminate(domain, format!("cannot start {} init: {}", instance.name(), e.describe()));
                return Err(e);
            }
        }
        Ok(())
    }

    /// Resolves a name for `domain`: a child sees only the names its parent handed down (and
    /// its own); a domain of the boot configuration sees the system's names.
    ///
    /// # Errors
    /// `NotFound`, or `ServiceDead` when the service's domain has ended.
    pub(crate) fn lookup(&self, domain: &Domain, name: &str) -> Result<Arc<crate::portal::Service>, HostError> {
        if !domain.is_child() {
            return self.names.lookup(name);
        }
        let service = crate::lock(&domain.private_names).get(name).cloned().ok_or(HostError::NotFound)?;
        if !service.is_alive() {
            return Err(HostError::ServiceDead);
        }
        Ok(service)
    }

    /// Publishes `service` under `name` for `domain`: in the system's names, or a child's own.
    ///
    /// # Errors
    /// `NameTaken`.
    pub(crate) fn register(
        &self,
        domain: &Domain,
        name: String,
        service: Arc<crate::portal::Service>,
    ) -> Result<(), HostError> {
        if !domain.is_child() {
            return self.names.register(name, service);
        }
        let mut names = crate::lock(&domain.private_names);
        if names.get(&name).is_some_and(|s| s.is_alive()) {
            return Err(HostError::NameTaken);
        }
        names.insert(name, service);
        Ok(())
    }

    /// Charges `bytes` to `domain`'s quota; a child over its limit takes a memory fault to its
    /// parent first. Every charge a guest causes (heap, thread regions, memory objects) comes here.
    ///
    /// # Errors
    /// `QuotaExceeded` when the quota does not allow it and no parent granted more.
    pub(crate) fn charge(self: &Arc<Self>, domain: &Arc<Domain>, bytes: u64) -> Result<(), HostError> {
        if domain.charge(bytes).is_ok() {
            return Ok(());
        }
        let short_by = (domain.heap_used() + bytes).saturating_sub(domain.heap_limit());
        if short_by > 0 && self.memory_fault(domain, short_by) {
            domain.charge(bytes)
        } else {
            Err(HostError::QuotaExceeded)
        }
    }

    /// A memory fault of `domain`, short of `short_by` bytes of quota: asks the fault handler
    /// its parent registered. The parent grants bytes from its own quota (the child's limit
    /// rises) or refuses, which ends the child. Returns whether the child may retry.
    pub(crate) fn memory_fault(self: &Arc<Self>, domain: &Arc<Domain>, short_by: u64) -> bool {
        let handler = crate::lock(&domain.fault_handler).clone();
        let (Some(handler), Some(parent)) = (handler, domain.parent.upgrade()) else { return false };
        let mut request = domain.id.to_le_bytes().to_vec();
        request.extend_from_slice(&short_by.to_le_bytes());
        let reply = crate::portal::kernel_call(self, &handler, domos_abi::fnv1a(b"out_of_memory"), &request);
        // The reply is the `Result<u64, CallError>` of `MemoryFaultHandler::out_of_memory`.
        let granted = match reply.as_deref() {
            Ok([0, rest @ ..]) if rest.len() == 8 => rest.iter().rev().fold(0u64, |acc, b| acc << 8 | u64::from(*b)),
            _ => 0,
        };
        if granted >= short_by && parent.charge(granted).is_ok() {
            domain.carved.fetch_add(granted, Ordering::AcqRel);
            domain.raise_limit(granted);
            return true;
        }
        self.terminate(
            domain,
            format!("memory fault: {short_by} B over its limit, and its parent {} did not grant them", parent.name),
        );
        false
    }

    /// An instance of an interpreted domain: one store, used by every entry point and service
    /// call in turn, over a heap of `share` bytes created (and charged) at once.
    fn single_instance(
        self: &Arc<Self>,
        domain: &Arc<Domain>,
        component: Arc<Component>,
        spec: &domos_loader::config::ComponentConfig,
        module: &wasmtime::Module,
        initial_pages: u64,
        share: u64,
    ) -> Result<Arc<ComponentInstance>, String> {
        let pages = share / crate::domain::PAGE;
        if pages < initial_pages + 2 || domain.charge(pages * crate::domain::PAGE).is_err() {
            return Err(format!(
                "domain {}: heap limit {} B cannot hold component {} (an interpreted domain's heap is divided among its components)",
                domain.name, domain.limits.heap, spec.name
            ));
        }
        let instance = Arc::new(ComponentInstance::new(
            component,
            spec.args.clone(),
            spec.register.clone(),
            spec.bind.clone(),
            module.clone(),
            Heap::Single(SingleHeap::default()),
            domain.scheduling.clone(),
        ));
        let ctx = StoreCtx::new(self.clone(), domain.clone(), instance.clone(), Region::NONE, true);
        let backend = self.backend(domain.code)?;
        let mut store = Store::new(&backend.engine, ctx);
        self.set_deadline(&mut store);
        let failed = |e: wasmtime::Error| format!("cannot instantiate {}: {}", spec.name, describe_trap(&e));
        let memory = wasmtime::Memory::new(&mut store, wasmtime::MemoryType::new(pages as u32, Some(pages as u32)))
            .map_err(failed)?;
        if let Heap::Single(heap) = &instance.memory {
            heap.place(memory.data_ptr(&store) as usize, memory.data_size(&store), initial_pages);
        }
        store.data_mut().region = instance
            .take_region(domain, &|bytes| self.charge(domain, bytes))
            .map_err(|e| format!("{}: {}", spec.name, e.describe()))?;
        let imports = Self::imports(&backend.service_linker, &mut store, module, memory.into()).map_err(failed)?;
        let wasm = wasmtime::Instance::new(&mut store, module, &imports).map_err(failed)?;
        Self::set_stack(&mut store, &wasm).map_err(failed)?;
        let dispatch = wasm.get_typed_func(&mut store, "domos_dispatch").map_err(failed)?;
        let release = wasm.get_typed_func(&mut store, "domos_release").map_err(failed)?;
        instance.service_threads.store(1, Ordering::Release);
        crate::lock(&instance.idle).push(ServiceThread { store, instance: wasm, dispatch, release });
        Ok(instance)
    }

    /// Arms preemption and termination checks for a store.
    fn set_deadline(&self, store: &mut Store<StoreCtx>) {
        let slice = self.slice_ticks;
        let local = store.data().domain.scheduling.slice_ticks();
        store.set_epoch_deadline(if local != 0 && !store.data().service { local } else { slice });
        store.epoch_deadline_callback(move |ctx| {
            if ctx.data().domain.is_terminated() {
                wasmtime::bail!("domain terminated");
            }
            if !ctx.data().kernel.running.load(Ordering::Acquire) {
                wasmtime::bail!("the system is shutting down");
            }
            if ctx.data().service {
                Ok(UpdateDeadline::Continue(slice))
            } else {
                Ok(UpdateDeadline::Yield(crate::sched::note_deadline(&ctx.data().domain, slice)))
            }
        });
    }

    /// A store for a thread or service thread of `instance`, with its own stack and buffer.
    fn new_store(
        self: &Arc<Self>,
        domain: &Arc<Domain>,
        instance: &Arc<ComponentInstance>,
        service: bool,
    ) -> Result<Store<StoreCtx>, HostError> {
        let region: Region = instance.take_region(domain, &|bytes| self.charge(domain, bytes))?;
        let ctx = StoreCtx::new(self.clone(), domain.clone(), instance.clone(), region, service);
        let backend = self.backend(domain.code).map_err(|_| HostError::ServiceDead)?;
        let mut store = Store::new(&backend.engine, ctx);
        self.set_deadline(&mut store);
        Ok(store)
    }

    /// The imports of `module` for one store: the heap, and the host calls of `linker` bound to
    /// the store. One linker serves every domain, so creating a domain copies no linker.
    fn imports(
        linker: &Linker<StoreCtx>,
        store: &mut Store<StoreCtx>,
        module: &wasmtime::Module,
        heap: wasmtime::Extern,
    ) -> wasmtime::Result<Vec<wasmtime::Extern>> {
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

    /// `instance`'s module pre-linked with `linker`'s host calls and the instance's heap, made on
    /// first use: instantiating a thread then resolves no import by name.
    fn instance_pre(
        backend: &Backend,
        instance: &ComponentInstance,
        linker: LinkerKind,
        store: &Store<StoreCtx>,
    ) -> wasmtime::Result<wasmtime::InstancePre<StoreCtx>> {
        let slot = &instance.pre_linked[linker as usize];
        if let Some(pre) = slot.get() {
            return Ok(pre.clone());
        }
        let mut linker = match linker {
            LinkerKind::Thread => backend.thread_linker.clone(),
            LinkerKind::Service => backend.service_linker.clone(),
        };
        linker.define(store, "env", "memory", instance.heap_extern()?)?;
        let pre = linker.instantiate_pre(&instance.module)?;
        Ok(slot.get_or_init(|| pre).clone())
    }

    /// Sets the shadow stack of a fresh instance to its thread's region: the pointer to its top,
    /// the limit that `stack_guard` checks to its bottom.
    fn set_stack(store: &mut Store<StoreCtx>, instance: &wasmtime::Instance) -> wasmtime::Result<()> {
        let region = store.data().region;
        let global = instance
            .get_global(&mut *store, "__stack_pointer")
            .ok_or_else(|| wasmtime::format_err!("no __stack_pointer export"))?;
        global.set(&mut *store, Val::I32(region.stack_top as i32))?;
        let limit = instance
            .get_global(&mut *store, domos_loader::stack_guard::LIMIT_GLOBAL)
            .ok_or_else(|| wasmtime::format_err!("the stack guard is missing"))?;
        limit.set(&mut *store, Val::I32(region.base as i32))
    }

    /// A new service thread for `instance` (the caller has counted it against the limit).
    ///
    /// # Errors
    /// When the quota cannot hold its stack, or instantiation fails.
    pub(crate) fn new_service_thread(
        self: &Arc<Self>,
        instance: &Arc<ComponentInstance>,
        domain: &Arc<Domain>,
    ) -> Result<ServiceThread, HostError> {
        if instance.is_single() {
            return Err(HostError::ServiceBusy);
        }
        let mut store = self.new_store(domain, instance, true)?;
        let backend = self.backend(domain.code).map_err(|_| HostError::ServiceDead)?;
        // A service that may wait runs in an async store whose host calls can suspend the
        // caller's fiber (decision 0005); the others stay synchronous, the fast path.
        let built = (|| {
            let wasm = if instance.component.manifest.services_wait {
                // Its linker's waiting calls are async, which an `InstancePre` would only
                // instantiate asynchronously; this runs inside a synchronous portal call.
                let imports =
                    Self::imports(&backend.thread_linker, &mut store, &instance.module, instance.heap_extern()?)?;
                wasmtime::Instance::new(&mut store, &instance.module, &imports)?
            } else {
                Self::instance_pre(backend, instance, LinkerKind::Service, &store)?.instantiate(&mut store)?
            };
            Self::set_stack(&mut store, &wasm)?;
            let dispatch = wasm.get_typed_func(&mut store, "domos_dispatch")?;
            let release = wasm.get_typed_func(&mut store, "domos_release")?;
            Ok::<_, wasmtime::Error>((wasm, dispatch, release))
        })();
        match built {
            Ok((wasm, dispatch, release)) => Ok(ServiceThread { store, instance: wasm, dispatch, release }),
            Err(e) => {
                self.terminate(
                    domain,
                    format!("cannot start a service thread of {}: {}", instance.name(), describe_trap(&e)),
                );
                Err(HostError::ServiceFault)
            }
        }
    }

    /// Starts a thread of `domain` running `entry` of `instance`.
    ///
    /// # Errors
    /// `QuotaExceeded` when the domain's thread limit or heap quota does not allow it;
    /// `ServiceDead` when the domain was terminated.
    pub(crate) fn spawn_thread(
        self: &Arc<Self>,
        domain: &Arc<Domain>,
        instance: &Arc<ComponentInstance>,
        entry: Entry,
    ) -> Result<Arc<Thread>, HostError> {
        if domain.is_terminated() {
            return Err(HostError::ServiceDead);
        }
        if domain.live_threads() >= domain.limits.threads as usize {
            return Err(HostError::QuotaExceeded);
        }
        if instance.is_single() {
            return self.spawn_single(domain, instance, entry);
        }
        let mut store = self.new_store(domain, instance, false)?;
        let backend = self.backend(domain.code).map_err(|_| HostError::ServiceDead)?;
        let pre =
            Self::instance_pre(backend, instance, LinkerKind::Thread, &store).map_err(|_| HostError::ServiceDead)?;
        let id = self.next_thread.fetch_add(1, Ordering::Relaxed);
        store.data_mut().thread = id;
        let label = match entry {
            Entry::Init | Entry::InitThenMain => format!("{} init", instance.name()),
            Entry::Main => format!("{} main", instance.name()),
            Entry::Spawned(_) => format!("{} thread {id}", instance.name()),
            Entry::Interrupt(source) => format!("{} interrupt {source}", instance.name()),
        };
        let kernel = self.clone();
        let thread_domain = domain.clone();
        let thread_instance = instance.clone();
        let thread_label = label.clone();
        let body = Box::pin(async move {
            let result = async {
                let wasm = pre.instantiate_async(&mut store).await?;
                Self::set_stack(&mut store, &wasm)?;
                match entry {
                    Entry::Init | Entry::InitThenMain => {
                        wasm.get_typed_func::<(), i32>(&mut store, "domos_init")?.call_async(&mut store, ()).await
                    }
                    Entry::Main => {
                        wasm.get_typed_func::<(), i32>(&mut store, "domos_main")?.call_async(&mut store, ()).await
                    }
                    Entry::Spawned(arg) => {
                        wasm.get_typed_func::<u32, i32>(&mut store, "domos_thread_entry")?
                            .call_async(&mut store, arg)
                            .await
                    }
                    Entry::Interrupt(n) => {
                        let handler = wasm.get_typed_func::<(u32, u32), ()>(&mut store, "domos_interrupt")?;
                        let source = (n as usize)
                            .checked_sub(1)
                            .and_then(|i| crate::lock(&thread_domain.interrupts).get(i).cloned());
                        while let Some(source) = &source {
                            let events =
                                crate::host::unless_terminated(&thread_domain, false, |cx| source.poll_events(cx))
                                    .await?;
                            // A closed source ends the handler thread.
                            let Some(events) = events else { break };
                            handler.call_async(&mut store, (n, u32::try_from(events).unwrap_or(u32::MAX))).await?;
                        }
                        Ok(0)
                    }
                }
            }
            .await;
            match result {
                Ok(code) => {
                    kernel.after_init(&thread_domain, &thread_instance, entry, code);
                    code
                }
                Err(e) => {
                    // A thread stopped by the shutdown did nothing wrong: its domain is not ended.
                    if !thread_domain.is_terminated() && kernel.running.load(Ordering::Acquire) {
                        kernel.terminate(&thread_domain, format!("{thread_label} trapped: {}", describe_trap(&e)));
                    }
                    -1
                }
            }
        });
        Ok(self.scheduler.spawn(id, domain.clone(), label, body, matches!(entry, Entry::Interrupt(_))))
    }

    /// Starts a thread of an interpreted domain: it waits for the instance's single store and
    /// runs `init` or `main` in it. Such a domain has no other threads.
    fn spawn_single(
        self: &Arc<Self>,
        domain: &Arc<Domain>,
        instance: &Arc<ComponentInstance>,
        entry: Entry,
    ) -> Result<Arc<Thread>, HostError> {
        let export = match entry {
            Entry::Init | Entry::InitThenMain => "domos_init",
            Entry::Main => "domos_main",
            Entry::Spawned(_) | Entry::Interrupt(_) => return Err(HostError::NotPermitted),
        };
        let id = self.next_thread.fetch_add(1, Ordering::Relaxed);
        let label = format!("{} {}", instance.name(), &export[6..]);
        let (kernel, thread_domain, thread_instance, thread_label) =
            (self.clone(), domain.clone(), instance.clone(), label.clone());
        let body = Box::pin(async move {
            let Ok(mut single) =
                std::future::poll_fn(|cx| crate::portal::take_or_wait(&thread_instance, &thread_domain, cx.waker()))
                    .await
            else {
                return -1;
            };
            let outcome = single
                .instance
                .get_typed_func::<(), i32>(&mut single.store, export)
                .and_then(|f| f.call(&mut single.store, ()));
            match outcome {
                Ok(code) => {
                    crate::portal::release(&thread_instance, single);
                    kernel.after_init(&thread_domain, &thread_instance, entry, code);
                    code
                }
                Err(e) => {
                    drop(single);
                    // A thread stopped by the shutdown did nothing wrong: its domain is not ended.
                    if !thread_domain.is_terminated() && kernel.running.load(Ordering::Acquire) {
                        kernel.terminate(&thread_domain, format!("{thread_label} trapped: {}", describe_trap(&e)));
                    }
                    -1
                }
            }
        });
        Ok(self.scheduler.spawn(id, domain.clone(), label, body, false))
    }

    /// For `Entry::InitThenMain`: starts `main` after a successful `init`, or ends the domain.
    fn after_init(self: &Arc<Self>, domain: &Arc<Domain>, instance: &Arc<ComponentInstance>, entry: Entry, code: i32) {
        if !matches!(entry, Entry::InitThenMain) {
            return;
        }
        if code != 0 {
            self.terminate(domain, format!("{} init failed (exit code {code})", instance.name()));
        } else if instance.component.has_main
            && let Err(e) = self.spawn_thread(domain, instance, Entry::Main)
        {
            self.terminate(domain, format!("cannot start {} main: {}", instance.name(), e.describe()));
        }
    }

    /// Starts the `main` of every component of `domain` that has one.
    pub fn start_main(self: &Arc<Self>, domain: &Arc<Domain>) {
        for instance in domain.instances() {
            if instance.component.has_main
                && let Err(e) = self.spawn_thread(domain, &instance, Entry::Main)
            {
                self.console.line(&domain.name, &format!("cannot start {} main: {}", instance.name(), e.describe()));
            }
        }
    }

    /// Ends `domain`: its names, services, handles, threads and memory are released at once;
    /// callers blocked on it get errors. Safe to call more than once.
    pub fn terminate(&self, domain: &Arc<Domain>, reason: String) {
        if !domain.mark_terminated(reason.clone()) {
            return;
        }
        self.console.line("kernel", &format!("domain {} terminated: {reason}", domain.name));
        let children = std::mem::take(&mut *crate::lock(&domain.children));
        for child in &children {
            self.terminate(child, format!("its parent {} ended", domain.name));
        }
        if let Some(parent) = domain.parent.upgrade() {
            parent.uncharge(domain.carved.swap(0, Ordering::AcqRel));
            parent.return_tickets(domain.limits.cpu_share);
            crate::lock(&parent.children).retain(|c| c.id != domain.id);
        }
        drop(crate::lock(&domain.fault_handler).take());
        drop(self.scheduler.replace_local(domain, None, LocalScheduler::default()));
        drop(std::mem::take(&mut *crate::lock(&domain.private_names)));
        drop(self.names.remove_domain(domain.id));
        let handles = crate::lock(&domain.handles).take_all();
        drop(handles);
        for instance in domain.take_instances() {
            instance.shut_down();
        }
        let threads = crate::lock(&domain.threads).clone();
        threads.iter().for_each(Thread::wake_up);
        domain.wake_waiting_callers();
        std::mem::take(&mut *crate::lock(&domain.interrupts)).iter().for_each(|source| source.close());
        domain.wake_ended_waiters();
    }

    /// `Ok(())` while `domain` runs; a trap once it has been terminated.
    pub(crate) fn check_alive(&self, domain: &Domain) -> wasmtime::Result<()> {
        if domain.is_terminated() { Err(wasmtime::format_err!("domain terminated")) } else { Ok(()) }
    }

    /// The exit code of an ended thread of `domain`.
    pub(crate) fn exit_code(&self, domain: &Domain, thread: u32) -> Option<i32> {
        crate::lock(&domain.exit_codes).get(&thread).copied()
    }

    /// Runs the `init` of every component of `domain` and waits for them.
    ///
    /// # Errors
    /// When an `init` fails or traps (the domain is then terminated).
    pub fn run_init(self: &Arc<Self>, domain: &Arc<Domain>) -> Result<(), String> {
        for instance in domain.instances() {
            let reason = match self.spawn_thread(domain, &instance, Entry::Init) {
                Ok(thread) => match thread.wait() {
                    0 => continue,
                    code => format!("{} init failed (exit code {code})", instance.name()),
                },
                Err(e) => format!("cannot start {} init: {}", instance.name(), e.describe()),
            };
            self.terminate(domain, reason.clone());
            return Err(format!("domain {}: {reason}", domain.name));
        }
        Ok(())
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
        self.scheduler.forget_threads();
        for domain in self.domains() {
            std::mem::take(&mut *crate::lock(&domain.interrupts)).iter().for_each(|source| source.close());
            crate::lock(&domain.threads).iter().for_each(|thread| thread.discard());
            drop(domain.scheduling.take_component());
            for instance in domain.take_instances() {
                instance.shut_down();
            }
            drop(crate::lock(&domain.handles).take_all());
            drop(std::mem::take(&mut *crate::lock(&domain.threads)));
        }
        drop(self.names.remove_all());
    }
}

/// The first line of a trap or error and its wasm backtrace, for reports.
pub(crate) fn describe_trap(error: &wasmtime::Error) -> String {
    let mut text = error.root_cause().to_string();
    if let Some(trap) = error.downcast_ref::<wasmtime::Trap>() {
        text = trap.to_string();
    }
    if let Some(bt) = error.downcast_ref::<wasmtime::WasmBacktrace>() {
        let mut frames: Vec<String> =
            bt.frames().iter().take(5).filter_map(|f| f.func_name().map(|n| n.to_string())).collect();
        if frames.first().is_some_and(|f| f == domos_loader::stack_guard::OVERFLOW_FUNCTION) {
            text = "shadow stack overflow: the thread needed more than the domain's `stack` bytes".into();
            frames.remove(0);
        }
        if !frames.is_empty() {
            text.push_str(&format!(" (in {})", frames.join(" <- ")));
        }
    }
    text
}

/// One domain's line of the boot summary.
pub struct DomainReport<'a>(&'a Domain);

impl<'a> DomainReport<'a> {
    /// The report of `domain`.
    pub fn of(domain: &'a Domain) -> Self {
        DomainReport(domain)
    }
}

impl fmt::Display for DomainReport<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        let components = d.component_names();
        let ms = |ns: u64| ns as f64 / 1e6;
        write!(
            f,
            "{:<10} {:<28} heap {:>6} KiB of {:>6} KiB  cpu {:>8.3} ms  calls served {:>7}  made {:>7}  threads {}  scheduler {}  {}",
            d.name,
            components.join(","),
            d.heap_used() / 1024,
            d.heap_limit() / 1024,
            ms(d.stats.cpu_ns.load(Ordering::Relaxed)),
            d.calls_served(),
            d.calls_made(),
            d.stats.threads_started.load(Ordering::Relaxed),
            d.scheduling.describe(),
            d.termination_reason().map_or_else(|| "running".to_string(), |r| format!("terminated: {r}")),
        )
    }
}

/// The outcome of booting a system.
pub struct BootOutcome {
    /// The domains, in boot order.
    pub domains: Vec<Arc<Domain>>,
    /// Whether every thread ended before the time limit.
    pub finished: bool,
}

impl Kernel {
    /// Boots `config`: checks dependencies, creates every domain, runs the `init`s in dependency
    /// order, starts every `main`, and waits until all threads have ended or `timeout` passes.
    ///
    /// # Errors
    /// A configuration or component problem found before any thread ran.
    pub fn boot(self: &Arc<Self>, config: &SystemConfig, timeout: Option<Duration>) -> Result<BootOutcome, String> {
        let order = domos_loader::boot_order(config, &self.components)?;
        self.set_global_scheduler(&config.system.scheduler)?;
        for disk in &config.disks {
            let (opened, thread) =
                crate::disk::Disk::open(&disk.name, disk.image.as_deref(), disk.size.map_or(0, |s| s.0))?;
            crate::lock(&self.disks).insert(disk.name.clone(), opened);
            crate::lock(&self.disk_threads).push(thread);
        }
        for device in &config.devices {
            self.add_device(&device.name, device.size.0)?;
        }
        let mut domains = Vec::new();
        for &d in &order {
            domains.push(self.create_domain(&config.domains[d])?);
        }
        for domain in &domains {
            if let Err(e) = self.run_init(domain) {
                self.console.line("kernel", &e);
            }
        }
        for domain in &domains {
            if !domain.is_terminated() {
                self.start_main(domain);
            }
        }
        let finished = self.scheduler.wait_idle(timeout);
        Ok(BootOutcome { domains, finished })
    }
}
