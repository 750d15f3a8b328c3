//! Creating domains from their configuration: component instances over their heaps, charged to
//! the domain, and for an interpreted domain each instance's single store.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use domos_loader::codegen::Translator;
use domos_loader::component::Component;
use domos_loader::config::{ComponentConfig, DomainConfig};
use domos_loader::verifier::Kind;
use wasmtime::{SharedMemory, Store};

use super::schedulers::refusing_policy;
use crate::domain::Domain;
use crate::domain::instance::{ComponentInstance, Region, ServiceThread};
use crate::domain::store::{StoreCtx, describe_trap};
use crate::domain::system::{Kernel, LinkerKind};
use crate::object::guest_memory::{Heap, PAGE, SingleHeap};

impl Kernel {
    /// Creates a domain: its heaps and component instances (and, for an interpreted domain, each
    /// instance's single store). No thread runs yet.
    ///
    /// # Errors
    /// Unknown components, ungranted host calls, a heap limit too small for the components.
    pub fn create_domain(self: &Arc<Self>, config: &DomainConfig) -> Result<Arc<Domain>, String> {
        self.create_domain_under(None, config)
    }

    pub(crate) fn create_domain_under(
        self: &Arc<Self>,
        parent: Option<&Arc<Domain>>,
        config: &DomainConfig,
    ) -> Result<Arc<Domain>, String> {
        config.validate()?;
        let components = config
            .components
            .iter()
            .map(|c| {
                self.components().get(&c.name).cloned().ok_or_else(|| {
                    let known: Vec<_> = self.components().names().collect();
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
        let id = self.new_domain_id();
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
        let fail = |e: String| domain.fail_creation(e);
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
        self.add_domain(domain.clone());
        Ok(domain)
    }

    /// An instance of `component` in `domain` over a shared heap of `initial` pages, charged to
    /// the domain.
    pub(crate) fn shared_instance(
        &self,
        domain: &Domain,
        component: Arc<Component>,
        spec: &ComponentConfig,
        module: &wasmtime::Module,
        initial: u64,
    ) -> Result<Arc<ComponentInstance>, String> {
        domain.quota().charge(initial * PAGE).map_err(|_| {
            format!(
                "domain {}: heap limit {} B cannot hold component {} ({} B of static data and stack)",
                domain.name,
                domain.limits.heap,
                spec.name,
                initial * PAGE
            )
        })?;
        // On the engine the module was translated for: a scheduler's is not the domain's.
        let memory = SharedMemory::new(
            module.engine(),
            wasmtime::MemoryType::shared(initial as u32, domain.code.max_heap_pages()),
        )
        .map_err(|e| format!("cannot create the heap of {}: {e}", spec.name))?;
        Ok(Arc::new(ComponentInstance::new(
            component,
            spec.encoded_args(),
            spec.register.clone(),
            spec.bind.clone(),
            module.clone(),
            Heap::Shared(memory),
            domain.scheduling.clone(),
        )))
    }

    /// An instance of an interpreted domain: one store, used by every entry point and service
    /// call in turn, over a heap of `share` bytes created (and charged) at once.
    fn single_instance(
        self: &Arc<Self>,
        domain: &Arc<Domain>,
        component: Arc<Component>,
        spec: &ComponentConfig,
        module: &wasmtime::Module,
        initial_pages: u64,
        share: u64,
    ) -> Result<Arc<ComponentInstance>, String> {
        let pages = share / PAGE;
        if pages < initial_pages + 2 || domain.quota().charge(pages * PAGE).is_err() {
            return Err(format!(
                "domain {}: heap limit {} B cannot hold component {} (an interpreted domain's heap is divided among its components)",
                domain.name, domain.limits.heap, spec.name
            ));
        }
        let instance = Arc::new(ComponentInstance::new(
            component,
            spec.encoded_args(),
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
        let imports = backend.imports(LinkerKind::Service, &mut store, module, memory.into()).map_err(failed)?;
        let wasm = wasmtime::Instance::new(&mut store, module, &imports).map_err(failed)?;
        Self::set_stack(&mut store, &wasm).map_err(failed)?;
        let dispatch = wasm.get_typed_func(&mut store, "domos_dispatch").map_err(failed)?;
        let release = wasm.get_typed_func(&mut store, "domos_release").map_err(failed)?;
        instance.service_threads.store(1, Ordering::Release);
        crate::lock(&instance.idle).push(Box::new(ServiceThread { store, instance: wasm, dispatch, release }));
        Ok(instance)
    }
}
