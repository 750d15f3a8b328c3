//! Creating domains from their configuration: component instances over their heaps, charged to
//! the domain, and for an interpreted domain each instance's single store. A collocated domain
//! has one instance, of the collocated build, whose parts are all its components.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use domos_loader::codegen::Translator;
use domos_loader::config::DomainConfig;
use domos_loader::verifier::Kind;
use wasmtime::{SharedMemory, Store};

use super::schedulers::refusing_policy;
use crate::domain::Domain;
use crate::domain::instance::{ComponentInstance, Part, Region, ServiceThread};
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
        let registry = self.components();
        let alone = config
            .components
            .iter()
            .map(|c| {
                registry.get(&c.name).cloned().ok_or_else(|| {
                    let known: Vec<_> = registry.names().collect();
                    format!("domain {}: unknown component {} (known: {})", config.name, c.name, known.join(", "))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let local = self.local_choice(&config.scheduler)?;
        if let Some(scheduler) = alone.iter().find(|c| c.kind != Kind::Ordinary) {
            return Err(format!(
                "domain {}: component {} is a scheduler; name it in the domain's `scheduler` (or the system's)",
                config.name, scheduler.manifest.name
            ));
        }
        if let Some((component, required)) = refusing_policy(alone.iter().map(|c| &**c), &local.policy) {
            return Err(format!(
                "domain {}: component {component} requires the {required} local scheduler, but the domain uses {}",
                config.name, local.policy,
            ));
        }
        // The grants cover what each component imports on its own; in the collocated build, which
        // imports what all its components do, the host calls refuse the rest (`host::link`).
        for component in &alone {
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
        let fail = |e: String| domain.fail_creation(e);
        let components = if config.collocate {
            let collocated = alone.iter().map(|c| {
                let component = registry.collocated_for(&c.manifest.name).cloned();
                component.map_err(|e| format!("domain {}: {e}", config.name))
            });
            collocated.collect::<Result<Vec<_>, _>>().map_err(fail)?
        } else {
            alone
        };
        let parts = components.into_iter().zip(&config.components).map(|(component, spec)| Part {
            component,
            args: spec.encoded_args(),
            register: spec.register.clone(),
            bind: spec.bind.clone(),
        });
        // One instance per component, or one for all of a collocated domain's.
        let grouped: Vec<Vec<Part>> =
            if config.collocate { vec![parts.collect()] } else { parts.map(|part| vec![part]).collect() };
        let share = domain.limits.heap / grouped.len() as u64;
        let backend = self.backend(domain.code).map_err(fail)?;
        let mut instances = Vec::new();
        for parts in grouped {
            let module = backend.module(&parts[0].component).map_err(fail)?;
            let initial = module
                .imports()
                .find_map(|i| i.ty().memory().map(|m| m.minimum()))
                .ok_or_else(|| fail(format!("component {} imports no memory", parts[0].component.manifest.name)))?;
            let instance = if config.translator == Translator::Pulley {
                self.single_instance(&domain, parts, &module, initial, share)
            } else {
                self.shared_instance(&domain, parts, &module, initial)
            };
            instances.push(instance.map_err(fail)?);
        }
        domain.set_instances(instances);
        if let Some((component, slice_ms)) = &local.component {
            self.install_local_scheduler(&domain, component, *slice_ms, local.built_in).map_err(fail)?;
        }
        self.add_domain(domain.clone());
        Ok(domain)
    }

    /// An instance of `module`, running `parts`, in `domain` over a shared heap of `initial`
    /// pages, charged to the domain.
    pub(crate) fn shared_instance(
        &self,
        domain: &Domain,
        parts: Vec<Part>,
        module: &wasmtime::Module,
        initial: u64,
    ) -> Result<Arc<ComponentInstance>, String> {
        let names = crate::domain::instance::names(&parts);
        domain.quota().charge(initial * PAGE).map_err(|_| {
            format!(
                "domain {}: heap limit {} B cannot hold component {names} ({} B of static data and stack)",
                domain.name,
                domain.limits.heap,
                initial * PAGE
            )
        })?;
        // On the engine the module was translated for: a scheduler's is not the domain's.
        let memory = SharedMemory::new(
            module.engine(),
            wasmtime::MemoryType::shared(initial as u32, domain.code.max_heap_pages()),
        )
        .map_err(|e| format!("cannot create the heap of {names}: {e}"))?;
        let heap = Heap::Shared(memory).with_huge_pages();
        Ok(Arc::new(ComponentInstance::new(parts, module.clone(), heap, domain.scheduling.clone())))
    }

    /// An instance of an interpreted domain: one store, used by every entry point and service
    /// call in turn, over a heap of `share` bytes created (and charged) at once.
    fn single_instance(
        self: &Arc<Self>,
        domain: &Arc<Domain>,
        parts: Vec<Part>,
        module: &wasmtime::Module,
        initial_pages: u64,
        share: u64,
    ) -> Result<Arc<ComponentInstance>, String> {
        let pages = share / PAGE;
        let instance = Arc::new(ComponentInstance::new(
            parts,
            module.clone(),
            Heap::Single(SingleHeap::default()),
            domain.scheduling.clone(),
        ));
        let name = instance.name().to_string();
        if pages < initial_pages + 2 || domain.quota().charge(pages * PAGE).is_err() {
            return Err(format!(
                "domain {}: heap limit {} B cannot hold component {name} (an interpreted domain's heap is divided among its components)",
                domain.name, domain.limits.heap
            ));
        }
        let ctx = StoreCtx::new(self.clone(), domain.clone(), instance.clone(), Region::NONE, true);
        let backend = self.backend(domain.code)?;
        let mut store = Store::new(&backend.engine, ctx);
        self.set_deadline(&mut store);
        let failed = |e: wasmtime::Error| format!("cannot instantiate {name}: {}", describe_trap(&e));
        let memory = wasmtime::Memory::new(&mut store, wasmtime::MemoryType::new(pages as u32, Some(pages as u32)))
            .map_err(failed)?;
        if let Heap::Single(heap) = &instance.memory {
            heap.place(memory.data_ptr(&store) as usize, memory.data_size(&store), initial_pages);
        }
        store.data_mut().region = instance
            .take_region(domain, &|bytes| self.charge(domain, bytes))
            .map_err(|e| format!("{name}: {}", e.describe()))?;
        let imports = backend.imports(LinkerKind::Service, &mut store, module, memory.into()).map_err(failed)?;
        let wasm = wasmtime::Instance::new(&mut store, module, &imports).map_err(failed)?;
        Self::set_stack(&mut store, &wasm).map_err(failed)?;
        let entries = instance.shared_entries();
        let dispatch = wasm.get_typed_func(&mut store, &entries.dispatch).map_err(failed)?;
        let release = wasm.get_typed_func(&mut store, &entries.release).map_err(failed)?;
        instance.service_threads.store(1, Ordering::Release);
        instance.idle.put(Box::new(ServiceThread { store, instance: wasm, dispatch, release }));
        Ok(instance)
    }
}

#[cfg(test)]
mod tests {
    use domos_abi::{HostError, fnv1a};

    use crate::test_system::{System, component};

    /// The collocated build of components `a` and `b`: `a`'s `init` publishes object 7 as `svc`;
    /// each `main` stores what the `args` host call gives it (a at 0, b at 8); `b`'s main also
    /// calls `disk_open`, which neither component imports on its own, and looks `svc` up.
    fn collocated(interface: u32) -> Vec<u8> {
        let manifest = |name: &str| format!(r#"name = \"{name}\"\nversion = \"1\"\nprovides = [\"Svc@1.0\"]"#);
        wat::parse_str(format!(
            r#"(module
              (import "env" "memory" (memory 1 65536 shared))
              (import "domos" "args" (func $args (param i32 i32) (result i64)))
              (import "domos" "disk_open" (func $disk_open (param i32 i32) (result i64)))
              (import "domos" "service_create" (func $service_create (param i32 i32) (result i64)))
              (import "domos" "name_register" (func $name_register (param i32 i32 i32) (result i64)))
              (import "domos" "name_lookup" (func $name_lookup (param i32 i32 i32) (result i64)))
              (import "domos" "portal_local" (func $portal_local (param i32) (result i64)))
              (data (i32.const 1024) "disk0") (data (i32.const 1040) "svc")
              (func (export "domos_init:a") (result i32)
                (i64.store (i32.const 32) (call $name_register (i32.const 1040) (i32.const 3)
                  (i32.wrap_i64 (call $service_create (i32.const 7) (i32.const {interface})))))
                i32.const 0)
              (func (export "domos_main:a") (result i32)
                (i64.store (i32.const 0) (call $args (i32.const 2048) (i32.const 64))) i32.const 0)
              (func (export "domos_init:b") (result i32) i32.const 0)
              (func (export "domos_main:b") (result i32)
                (i64.store (i32.const 8) (call $args (i32.const 2112) (i32.const 64)))
                (i64.store (i32.const 16) (call $disk_open (i32.const 1024) (i32.const 5)))
                (i64.store (i32.const 24) (call $portal_local
                  (i32.wrap_i64 (call $name_lookup (i32.const 1040) (i32.const 3) (i32.const {interface})))))
                i32.const 0)
              (func $thread_entry (param i32) (result i32) i32.const 0)
              (func $dispatch (param i32 i32 i32 i32 i32) (result i32) i32.const 0)
              (func $release (param i32))
              (export "domos_thread_entry:a" (func $thread_entry)) (export "domos_thread_entry:b" (func $thread_entry))
              (export "domos_dispatch:a" (func $dispatch)) (export "domos_dispatch:b" (func $dispatch))
              (export "domos_release:a" (func $release)) (export "domos_release:b" (func $release))
              (global (export "__stack_pointer") (mut i32) (i32.const 65536))
              (@custom "domos:manifest:a" "{}")
              (@custom "domos:manifest:b" "{}"))"#,
            manifest("a"),
            manifest("b")
        ))
        .unwrap()
    }

    #[test]
    fn a_collocated_domain_runs_its_components_in_one_instance_each_with_its_own_configuration() {
        let interface = fnv1a(b"Svc@1");
        let alone = ["a", "b", "c"].map(|name| component(name, "provides = [\"Svc@1.0\"]", ""));
        let config = "[[domain]]\nname = \"D\"\ncollocate = true\n\
                      [[domain.component]]\nname = \"a\"\nargs = [\"x\"]\n\
                      [[domain.component]]\nname = \"b\"\nargs = [\"yy\", \"zz\"]\n";
        let system = System::boot_collocated(&alone, &collocated(interface), config);
        let domain = system.domain("D");
        assert_eq!(domain.instances().len(), 1, "one module, one heap");
        assert_eq!(domain.component_names(), ["a", "b"]);
        assert_eq!(domain.instances()[0].name(), "a+b");
        let results = system.results("D", 5);
        // Each component's own arguments: 4 bytes of length and the bytes, per argument.
        assert_eq!(results[..2], [5, 12]);
        assert_eq!(results[2], HostError::NotPermitted as i64, "the domain was not granted devices");
        assert_eq!(results[3], 7, "b finds a's object in its own instance: a local portal");
        assert_eq!(results[4], 0, "a may publish what its manifest provides");

        // A component the collocated build does not link cannot be collocated.
        let config = "[[domain]]\nname = \"D\"\ncollocate = true\n\
                      [[domain.component]]\nname = \"a\"\n[[domain.component]]\nname = \"c\"\n";
        let mut registry = domos_loader::ComponentRegistry::default();
        for (n, bytes) in alone.iter().enumerate() {
            registry.add(&format!("{n}"), bytes).unwrap();
        }
        registry.add_collocated("collocated", &collocated(interface));
        let options = crate::KernelOptions { cpus: 1, slice: std::time::Duration::from_millis(10) };
        let kernel = crate::Kernel::start(&options, registry, crate::Console::capture()).unwrap();
        let config = domos_loader::SystemConfig::parse(config).unwrap();
        let err = kernel.create_domain(&config.domains[0]).err().unwrap();
        kernel.shutdown();
        assert!(err.contains("component c is not in the collocated build"), "{err}");
    }
}
