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
    /// Starts a thread of `domain` running `entry` of component `part` of `instance`.
    ///
    /// # Errors
    /// `QuotaExceeded` when the domain's thread limit or heap quota does not allow it;
    /// `ServiceDead` when the domain was terminated; `NotFound` for the `main` of a component
    /// that has none.
    pub(crate) fn spawn_thread(
        self: &Arc<Self>,
        domain: &Arc<Domain>,
        instance: &Arc<ComponentInstance>,
        part: u32,
        entry: Entry,
    ) -> Result<Arc<Thread>, HostError> {
        if domain.is_terminated() {
            return Err(HostError::ServiceDead);
        }
        if domain.live_threads() >= domain.limits.threads as usize {
            return Err(HostError::QuotaExceeded);
        }
        if instance.is_single() {
            return self.spawn_single(domain, instance, part, entry);
        }
        let component = &instance.part(part).component;
        let name = &component.manifest.name;
        let export = entry.export(&component.entries).ok_or(HostError::NotFound)?.to_string();
        let mut store = self.new_store(domain, instance, false, &|bytes| self.charge(domain, bytes))?;
        store.data_mut().part = part;
        let backend = self.backend(domain.code).map_err(|_| HostError::ServiceDead)?;
        let pre =
            Self::instance_pre(backend, instance, LinkerKind::Thread, &store).map_err(|_| HostError::ServiceDead)?;
        let id = self.new_thread_id();
        store.data_mut().thread = id;
        let label = match entry {
            Entry::Init | Entry::InitThenMain => format!("{name} init"),
            Entry::Main => format!("{name} main"),
            Entry::Spawned(_) => format!("{name} thread {id}"),
            Entry::Interrupt(source) => format!("{name} interrupt {source}"),
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
                    Entry::Init | Entry::InitThenMain | Entry::Main => {
                        wasm.get_typed_func::<(), i32>(&mut store, &export)?.call_async(&mut store, ()).await
                    }
                    Entry::Spawned(arg) => {
                        wasm.get_typed_func::<u32, i32>(&mut store, &export)?.call_async(&mut store, arg).await
                    }
                    Entry::Interrupt(n) => {
                        let handler = wasm.get_typed_func::<(u32, u32), ()>(&mut store, &export)?;
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
                    kernel.after_init(&thread_domain, &thread_instance, part, entry, code);
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
        part: u32,
        entry: Entry,
    ) -> Result<Arc<Thread>, HostError> {
        let component = &instance.part(part).component;
        let what = match entry {
            Entry::Init | Entry::InitThenMain => "init",
            Entry::Main => "main",
            Entry::Spawned(_) | Entry::Interrupt(_) => return Err(HostError::NotPermitted),
        };
        let export = entry.export(&component.entries).ok_or(HostError::NotFound)?.to_string();
        let id = self.new_thread_id();
        let label = format!("{} {what}", component.manifest.name);
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
            single.store.data_mut().part = part;
            let outcome = single
                .instance
                .get_typed_func::<(), i32>(&mut single.store, &export)
                .and_then(|f| f.call(&mut single.store, ()));
            match outcome {
                Ok(code) => {
                    crate::portal::release(&thread_instance, single);
                    kernel.after_init(&thread_domain, &thread_instance, part, entry, code);
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
    fn after_init(
        self: &Arc<Self>,
        domain: &Arc<Domain>,
        instance: &Arc<ComponentInstance>,
        part: u32,
        entry: Entry,
        code: i32,
    ) {
        if !matches!(entry, Entry::InitThenMain) {
            return;
        }
        let component = &instance.part(part).component;
        if code != 0 {
            self.terminate(domain, format!("{} init failed (exit code {code})", component.manifest.name));
        } else if component.has_main()
            && let Err(e) = self.spawn_thread(domain, instance, part, Entry::Main)
        {
            self.terminate(domain, format!("cannot start {} main: {}", component.manifest.name, e.describe()));
        }
    }

    /// Starts the `main` of every component of `domain` that has one.
    pub fn start_main(self: &Arc<Self>, domain: &Arc<Domain>) {
        for (instance, part) in domain.parts() {
            let component = &instance.part(part).component;
            if component.has_main()
                && let Err(e) = self.spawn_thread(domain, &instance, part, Entry::Main)
            {
                let line = format!("cannot start {} main: {}", component.manifest.name, e.describe());
                self.console.line(&domain.name, &line);
            }
        }
    }

    /// Runs the `init` of every component of `domain` and waits for each at most `limit`.
    ///
    /// # Errors
    /// When an `init` fails, traps or runs longer than `limit` (the domain is then terminated).
    pub fn run_init(self: &Arc<Self>, domain: &Arc<Domain>, limit: Duration) -> Result<(), String> {
        for (instance, part) in domain.parts() {
            let name = &instance.part(part).component.manifest.name;
            let reason = match self.spawn_thread(domain, &instance, part, Entry::Init) {
                Ok(thread) => match thread.wait_until(Instant::now() + limit) {
                    Some(0) => continue,
                    Some(code) => format!("{name} init failed (exit code {code})"),
                    None => format!("{name} init did not return within {} ms", limit.as_millis()),
                },
                Err(e) => format!("cannot start {name} init: {}", e.describe()),
            };
            self.terminate(domain, reason.clone());
            return Err(format!("domain {}: {reason}", domain.name));
        }
        Ok(())
    }
}
