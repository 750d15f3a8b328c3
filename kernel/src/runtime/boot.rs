//! Booting a system from its configuration: disks and devices, then every domain in dependency
//! order, each component's `init` one at a time, then every `main`.

use std::sync::Arc;
use std::time::Duration;

use domos_loader::config::SystemConfig;

use crate::domain::Domain;
use crate::domain::system::Kernel;

/// The outcome of booting a system.
pub struct BootOutcome {
    /// The domains, in boot order.
    pub domains: Vec<Arc<Domain>>,
    /// Whether every thread ended before the time limit.
    pub finished: bool,
}

impl Kernel {
    /// Boots `config`: checks dependencies, creates every domain, runs the `init`s in dependency
    /// order (each for at most `[system] init_timeout_ms`), starts every `main`, and waits until
    /// all threads have ended or `timeout` passes.
    ///
    /// # Errors
    /// A configuration or component problem found before any thread ran.
    pub fn boot(self: &Arc<Self>, config: &SystemConfig, timeout: Option<Duration>) -> Result<BootOutcome, String> {
        let order = domos_loader::boot_order(config, self.components())?;
        self.set_global_scheduler(&config.system.scheduler)?;
        for disk in &config.disks {
            let (opened, thread) =
                crate::object::disk::Disk::open(&disk.name, disk.image.as_deref(), disk.size.map_or(0, |s| s.0))?;
            self.add_disk(disk.name.clone(), opened, thread);
        }
        self.nics.open(&config.nics, &self.console)?;
        self.fuses.open(&config.fuses)?;
        for device in &config.devices {
            self.add_device(&device.name, device.size.0)?;
        }
        let mut domains = Vec::new();
        for &d in &order {
            domains.push(self.create_domain(&config.domains[d])?);
        }
        // The names components find their requirements by belong to their one publisher.
        for (name, (d, c)) in domos_loader::published_names(config, self.components())? {
            if let Some(position) = order.iter().position(|&o| o == d) {
                self.names.reserve(name, domains[position].id, config.domains[d].components[c].name.clone());
            }
        }
        let init_limit = Duration::from_millis(config.system.init_timeout_ms);
        for domain in &domains {
            if let Err(e) = self.run_init(domain, init_limit) {
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
