//! Installing and replacing schedulers: the built-in policies, and scheduler components in a
//! store of their own (decision 0006).

use std::sync::Arc;

use domos_loader::codegen::{CodeGen, Translator};
use domos_loader::component::Component;
use domos_loader::config::SchedulerChoice;
use domos_loader::verifier::Kind;

use super::scheduler_component::{CALL_FUEL, GlobalComponent, LocalComponent, SchedulerStore};
use crate::domain::instance::Part;
use crate::domain::store::describe_trap;
use crate::domain::system::{Kernel, LinkerKind};
use crate::domain::{Domain, DomainLimits};
use crate::sched::{GlobalScheduler, LocalScheduler};

/// The name of the domain the kernel makes for a global scheduler component.
pub const GLOBAL_SCHEDULER_DOMAIN: &str = "global-scheduler";

/// A domain's local scheduler as its `scheduler` setting chooses it.
pub(crate) struct LocalChoice {
    /// The scheduler component and its own slice, if one is chosen.
    pub(crate) component: Option<(Arc<Component>, Option<u64>)>,
    /// The built-in policy: the chosen one, or the one that replaces a failing component.
    pub(crate) built_in: LocalScheduler,
    /// The policy's name, which components' manifests may require.
    pub(crate) policy: String,
}

/// The first of `components` whose manifest requires a local scheduler other than `policy`:
/// its name and the policy it requires.
pub(crate) fn refusing_policy<'a>(
    components: impl IntoIterator<Item = &'a Component>,
    policy: &str,
) -> Option<(&'a str, &'a str)> {
    components.into_iter().find_map(|c| {
        let required = c.manifest.scheduler.as_str();
        (required != "any" && required != policy).then_some((c.manifest.name.as_str(), required))
    })
}

impl Kernel {
    /// What a domain's `scheduler` setting chooses, with the scheduler component looked up.
    pub(crate) fn local_choice(&self, choice: &SchedulerChoice<LocalScheduler>) -> Result<LocalChoice, String> {
        Ok(match choice {
            SchedulerChoice::BuiltIn(policy) => {
                LocalChoice { component: None, built_in: *policy, policy: policy.name().to_string() }
            }
            SchedulerChoice::Component(chosen) => {
                let component =
                    domos_loader::scheduler::find(self.components(), &chosen.component, Kind::LocalScheduler)?;
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
        let name = &component.manifest.name;
        let part = Part {
            component: component.clone(),
            args: Vec::new(),
            register: Default::default(),
            bind: Default::default(),
        };
        if domain.code.translator == Translator::Pulley {
            return Err(format!("domain {}: scheduler components need a compiled domain", domain.name));
        }
        // Metered: each call is bounded by its own instructions, not by the host's clock.
        let backend = self.backend(CodeGen { metered: true, ..domain.code })?;
        let module = backend.module(component)?;
        let initial = module.imports().find_map(|i| i.ty().memory().map(|m| m.minimum())).unwrap_or(1);
        let instance = self.shared_instance(domain, vec![part], &module, initial)?;
        let failed = |e: wasmtime::Error| format!("cannot instantiate scheduler {name}: {}", describe_trap(&e));
        let mut store = self
            .new_store(domain, &instance, true, &|bytes| self.charge(domain, bytes))
            .map_err(|e| format!("{name}: {}", e.describe()))?;
        // Its start function runs under the same bound as each of its calls.
        store.set_fuel(CALL_FUEL).map_err(failed)?;
        let memory = instance.heap_extern().map_err(failed)?;
        let imports = backend.imports(LinkerKind::Service, &mut store, &module, memory).map_err(failed)?;
        let wasm = wasmtime::Instance::new(&mut store, &module, &imports).map_err(failed)?;
        Self::set_stack(&mut store, &wasm).map_err(failed)?;
        Ok(SchedulerStore::new(store, wasm, component))
    }

    /// Makes scheduler component `component` the local scheduler of `domain`, interrupted every
    /// `slice_ms` when given.
    pub(crate) fn install_local_scheduler(
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
        let ticks = slice_ms.map_or(0, |ms| ms.min(self.slice_ticks()));
        drop(self.scheduler.replace_local(&domain.scheduling, Some((Box::new(local), ticks)), fallback));
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
        if let Some((component, required)) =
            refusing_policy(instances.iter().flat_map(|i| &i.parts).map(|p| &*p.component), &local.policy)
        {
            return Err(format!(
                "domain {}: component {component} requires the {required} local scheduler, not {}",
                domain.name, local.policy
            ));
        }
        match &local.component {
            Some((component, slice_ms)) => self.install_local_scheduler(domain, component, *slice_ms, local.built_in),
            None => {
                drop(self.scheduler.replace_local(&domain.scheduling, None, local.built_in));
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
        let component = domos_loader::scheduler::find(self.components(), &chosen.component, Kind::GlobalScheduler)?;
        let home = self.global_scheduler_domain();
        let global = GlobalComponent::new(self.scheduler_store(&home, &component)?)?;
        let policy = component.manifest.policy.as_deref().and_then(GlobalScheduler::named).unwrap_or_default();
        drop(self.scheduler.replace_global(Some(Box::new(global)), policy));
        Ok(())
    }

    /// The domain that holds global scheduler components, made on first use.
    fn global_scheduler_domain(&self) -> Arc<Domain> {
        self.find_or_add_domain(GLOBAL_SCHEDULER_DOMAIN, |id| {
            let home = Arc::new(Domain::new(
                id,
                GLOBAL_SCHEDULER_DOMAIN.into(),
                DomainLimits::default(),
                CodeGen::default(),
                LocalScheduler::default(),
                Vec::new(),
                std::sync::Weak::new(),
            ));
            home.set_instances(Vec::new());
            home
        })
    }
}
