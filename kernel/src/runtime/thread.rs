//! Threads of a domain: each runs one entry point of a component instance in a store of its
//! own, as a future the scheduler polls.

use std::sync::Arc;
use std::time::{Duration, Instant};

use domos_abi::HostError;

use super::Entry;
use crate::domain::Domain;
use crate::domain::instance::ComponentInstance;
use crate::domain::store::describe_trap;
use crate::domain::system::{Kernel, LinkerKind};
use crate::sched::Thread;

impl Kernel {
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
        let mut store = self.new_store(domain, instance, false, &|bytes| self.charge(domain, bytes))?;
        let backend = self.backend(domain.code).map_err(|_| HostError::ServiceDead)?;
        let pre =
            Self::instance_pre(backend, instance, LinkerKind::Thread, &store).map_err(|_| HostError::ServiceDead)?;
        let id = self.new_thread_id();
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
                        let source =
                            (n as usize).checked_sub(1).and_then(|i| thread_domain.interrupts().get(i).cloned());
                        while let Some(source) = &source {
                            let events =
                                crate::domain::unless_terminated(&thread_domain, false, |cx| source.poll_events(cx))
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
                    if !thread_domain.is_terminated() && kernel.is_running() {
                        kernel.terminate(&thread_domain, format!("{thread_label} trapped: {}", describe_trap(&e)));
                    }
                    -1
                }
            }
        });
        Ok(self.scheduler.spawn(id, domain.scheduling.clone(), label, body, matches!(entry, Entry::Interrupt(_))))
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
        let id = self.new_thread_id();
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
            // The single store served calls at other depths; its entry point runs at the top.
            single.store.data_mut().depth = 0;
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
                    if !thread_domain.is_terminated() && kernel.is_running() {
                        kernel.terminate(&thread_domain, format!("{thread_label} trapped: {}", describe_trap(&e)));
                    }
                    -1
                }
            }
        });
        Ok(self.scheduler.spawn(id, domain.scheduling.clone(), label, body, false))
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

    /// Runs the `init` of every component of `domain` and waits for each at most `limit`.
    ///
    /// # Errors
    /// When an `init` fails, traps or runs longer than `limit` (the domain is then terminated).
    pub fn run_init(self: &Arc<Self>, domain: &Arc<Domain>, limit: Duration) -> Result<(), String> {
        for instance in domain.instances() {
            let reason = match self.spawn_thread(domain, &instance, Entry::Init) {
                Ok(thread) => match thread.wait_until(Instant::now() + limit) {
                    Some(0) => continue,
                    Some(code) => format!("{} init failed (exit code {code})", instance.name()),
                    None => format!("{} init did not return within {} ms", instance.name(), limit.as_millis()),
                },
                Err(e) => format!("cannot start {} init: {}", instance.name(), e.describe()),
            };
            self.terminate(domain, reason.clone());
            return Err(format!("domain {}: {reason}", domain.name));
        }
        Ok(())
    }
}
