//! Domos' NFS server for the bench: a configuration (by default `configs/nfs-server.toml`)
//! booted in this process with its disk pointed at the bench's image and its network card at a
//! TAP device of the bench's own, which the kernel creates and the bench then moves into a
//! network namespace of its own, giving the Linux end an address on the server's subnet — as
//! `domos/tests/network.rs` does. The load generator reaches it from inside that namespace.

use std::net::Ipv4Addr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use domos_kernel::trace::Event;
use domos_kernel::{Console, Kernel};
use domos_loader::SystemConfig;

use crate::host::Namespace;

/// A booted Domos NFS server and the namespace its card lives in; dropping it shuts the kernel
/// down (which closes the TAP card), then deletes the namespace.
pub struct DomosServer {
    kernel: Arc<Kernel>,
    namespace: Namespace,
    address: Ipv4Addr,
    /// How many trace events were recorded at boot (thread names), before any window.
    boot_events: std::sync::atomic::AtomicUsize,
}

impl DomosServer {
    /// Boots `config_text` with its first disk on `image` and its first network card on a new
    /// TAP device `tap`, moved into the new namespace `namespace`. With `trace`, the thread
    /// activity trace records the boot (the threads' names) until [`DomosServer::end_boot_trace`],
    /// then only in [`DomosServer::traced`].
    ///
    /// # Errors
    /// A configuration without a disk, a card or an IP stack with an `ip=` argument; a boot or
    /// namespace failure.
    pub fn start(
        config_text: &str,
        image: &Path,
        tap: &str,
        namespace: String,
        trace: bool,
    ) -> Result<DomosServer, String> {
        let mut config = SystemConfig::parse(config_text)?;
        let disk = config.disks.first_mut().ok_or("the NFS server's configuration has no [[disk]]")?;
        disk.image = Some(image.to_string_lossy().into_owned());
        disk.size = None;
        let nic = config.nics.first_mut().ok_or("the NFS server's configuration has no [[nic]]")?;
        nic.tap = Some(tap.to_string());
        nic.pair = None;
        let mtu = nic.mtu;
        let (address, prefix) = stack_address(&config)?;
        let components = crate::embedded_components()?;
        let kernel = crate::start_kernel(&config, components, Console::capture(), trace)?;
        if let Err(e) = kernel.boot(&config, Some(Duration::from_millis(1))) {
            kernel.shutdown();
            return Err(format!("the NFS server did not boot: {e}"));
        }
        let namespace = match Namespace::new(namespace) {
            Ok(namespace) => namespace,
            Err(e) => {
                kernel.shutdown();
                return Err(e);
            }
        };
        let server = DomosServer { kernel, namespace, address, boot_events: 0.into() };
        if let Some(dead) = server.failure() {
            return Err(dead);
        }
        let linux = linux_end(address);
        server.namespace.adopt(tap, &format!("{linux}/{prefix}"), mtu)?;
        Ok(server)
    }

    /// The namespace the server's card is in.
    pub fn namespace(&self) -> &Namespace {
        &self.namespace
    }

    /// The server's IP address.
    pub fn address(&self) -> Ipv4Addr {
        self.address
    }

    /// A domain that ended, or a `main` that failed, as an error message with the console.
    pub fn failure(&self) -> Option<String> {
        let lines = self.kernel.console.lines();
        let dead =
            self.kernel.domains().iter().find_map(|d| d.termination_reason().map(|r| format!("{}: {r}", d.name)));
        let failed = lines.iter().find(|l| l.contains("main failed")).cloned();
        dead.or(failed)
            .map(|why| format!("the Domos NFS server failed ({why}); its console:\n  {}", lines.join("\n  ")))
    }

    /// The console's lines so far.
    pub fn console(&self) -> Vec<String> {
        self.kernel.console.lines()
    }

    /// Switches off the trace that has recorded the boot and the first calls (the names of the
    /// threads the services started meanwhile); [`DomosServer::traced`] records windows later.
    pub fn end_boot_trace(&self) {
        let trace = &self.kernel.scheduler.trace;
        if trace.is_on() {
            trace.switch_off();
            self.boot_events.store(trace.events().0.len(), std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Records the thread activity trace while `work` runs and returns it as a Chrome trace
    /// document (`domos boot --trace`'s format) and as a picture of `picture_ns` in its middle,
    /// titled `title`, with `work`'s result.
    ///
    /// # Errors
    /// `work`'s error.
    pub fn traced<T>(
        &self,
        picture_ns: u64,
        title: &str,
        work: impl FnOnce() -> Result<T, String>,
    ) -> Result<(T, String, String), String> {
        let trace = &self.kernel.scheduler.trace;
        let boot_events = self.boot_events.load(std::sync::atomic::Ordering::Relaxed);
        let (before, dropped_before) = trace.events();
        let from = before.len();
        drop(before);
        trace.switch_on();
        let result = work();
        trace.switch_off();
        let result = result?;
        let (events, dropped) = trace.events();
        let window: Vec<Event> = events
            .into_iter()
            .enumerate()
            .filter(|(i, event)| *i >= from || (*i < boot_events && matches!(event, Event::ThreadName { .. })))
            .map(|(_, event)| event)
            .collect();
        let domains: Vec<(u32, String)> = self.kernel.domains().iter().map(|d| (d.id, d.name.clone())).collect();
        let (start, end) = super::activity::middle(&window, picture_ns);
        let picture = super::activity::picture(&window, &domains, start, end, title);
        Ok((result, crate::trace::chrome_json_of(&window, dropped - dropped_before, &domains), picture))
    }
}

impl Drop for DomosServer {
    fn drop(&mut self) {
        self.kernel.shutdown();
    }
}

/// The address and prefix length the configuration's IP stack (`net-ip`, argument
/// `ip=A.B.C.D/N`) serves at.
fn stack_address(config: &SystemConfig) -> Result<(Ipv4Addr, u8), String> {
    let arg = config
        .domains
        .iter()
        .flat_map(|d| &d.components)
        .filter(|c| c.name == "net-ip")
        .flat_map(|c| &c.args)
        .find_map(|word| std::str::from_utf8(word).ok()?.strip_prefix("ip="))
        .ok_or("the NFS server's configuration has no net-ip component with an ip= argument")?;
    let (address, prefix) = arg.split_once('/').unwrap_or((arg, "24"));
    let address: Ipv4Addr = address.parse().map_err(|_| format!("net-ip: ip={arg} is no IPv4 address"))?;
    let prefix: u8 = prefix.parse().ok().filter(|p| *p <= 30).ok_or(format!("net-ip: ip={arg} has a bad prefix"))?;
    Ok((address, prefix))
}

/// The address the Linux end of the card takes: the server's with the last byte 1 (2 if the
/// server is .1).
fn linux_end(server: Ipv4Addr) -> Ipv4Addr {
    let [a, b, c, d] = server.octets();
    Ipv4Addr::new(a, b, c, if d == 1 { 2 } else { 1 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_linux_end_shares_the_servers_subnet() {
        let config = SystemConfig::parse(
            "[[domain]]\nname = \"Net\"\n[[domain.component]]\nname = \"net-ip\"\nargs = \"mtu=1500 ip=10.98.0.2/24\"\n",
        )
        .unwrap();
        assert_eq!(stack_address(&config).unwrap(), (Ipv4Addr::new(10, 98, 0, 2), 24));
        assert_eq!(linux_end(Ipv4Addr::new(10, 98, 0, 2)), Ipv4Addr::new(10, 98, 0, 1));
        assert_eq!(linux_end(Ipv4Addr::new(10, 98, 0, 1)), Ipv4Addr::new(10, 98, 0, 2));
    }
}
