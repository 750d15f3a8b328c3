//! `[[nic]]` tables: emulated network cards, which drivers with the `devices` grant open.
//!
//! ```toml
//! [[nic]]
//! name = "eth0"
//! pair = "eth1"            # wired to the NIC eth1 of the same system
//! mac = "02:00:00:00:00:01"
//! mtu = 1500
//! ```
//!
//! A card has one backend of four: `pair = "NIC"`, `tap = "IFNAME"` (a Linux TAP device, needs
//! root), `stream = "PATH"` (a Unix socket speaking QEMU's stream protocol, such as a `passt`
//! the user started) or `passt = { … }`, a [`PasstConfig`]: the `domos` command starts a
//! `passt` for the card (no root needed) that forwards chosen ports of the host's 127.0.0.1 into
//! the guest, and hands its socket to the kernel as a `stream`.
//!
//! ```toml
//! [[nic]]
//! name = "eth0"
//! passt = { tcp = [2049, "20111:111"], udp = [2049, "20111:111"] }
//! # the guest's stack: net-ip with args = "ip=10.0.2.15/24" (passt's defaults below)
//! ```

use serde::Deserialize;
use std::collections::BTreeSet;
use std::net::Ipv4Addr;

/// One `[[nic]]`: a network card whose frames go to a Linux TAP device or to another NIC.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NicConfig {
    /// The name drivers open.
    pub name: String,
    /// A Linux TAP interface the kernel opens (or creates) by this name (needs root).
    #[serde(default)]
    pub tap: Option<String>,
    /// Another `[[nic]]` of the system this one is wired to, which must name this one back.
    #[serde(default)]
    pub pair: Option<String>,
    /// A Unix socket the kernel connects to, whose peer speaks QEMU's stream protocol (each
    /// frame preceded by its length, four bytes big-endian). The `domos` command also sets it on
    /// a `passt` card, to the socket of the passt it started.
    #[serde(default)]
    pub stream: Option<String>,
    /// A `passt` the `domos` command starts for this card, forwarding ports of the host's
    /// 127.0.0.1 into the guest.
    #[serde(default)]
    pub passt: Option<PasstConfig>,
    /// The card's Ethernet address, `"02:00:00:00:00:01"`; by default a locally administered
    /// address derived from the name.
    #[serde(default)]
    pub mac: Option<String>,
    /// The largest IP packet a frame carries (without the 14-byte Ethernet header).
    #[serde(default = "default_mtu")]
    pub mtu: u32,
}

fn default_mtu() -> u32 {
    1500
}

/// The smallest MTU (IPv4's minimum).
pub const MIN_MTU: u32 = 68;
/// The largest MTU: a frame of 64 KiB with its Ethernet header and its slot's 4-byte length
/// word, as large as the IP packets of Linux's loopback interface.
pub const MAX_MTU: u32 = 65_518;
/// The size of a Unix socket address's path, with its terminating zero (`sun_path`).
const UNIX_PATH_MAX: usize = 108;

/// The guest's address on a `passt` card unless the table says otherwise (QEMU's user network
/// uses the same).
pub const PASST_ADDRESS: &str = "10.0.2.15/24";
/// The address forwarded connections come from unless the table says otherwise.
pub const PASST_GATEWAY: &str = "10.0.2.2";

/// `passt = { tcp = [...], udp = [...], address = "A.B.C.D/N", gateway = "A.B.C.D" }`: what
/// the `passt` the `domos` command starts for a card forwards, and how it addresses the guest.
///
/// passt binds each forwarded host port on 127.0.0.1 only and carries what arrives there into
/// the guest, from the `gateway` address to the guest's `address`; the guest's stack answers
/// on its link, with no route beyond it. Ports below 1024 on the host need root (or
/// `net.ipv4.ip_unprivileged_port_start`): forward a high host port to them instead,
/// `"20111:111"`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PasstConfig {
    /// TCP ports forwarded: `2049` (the same port on the host and in the guest) or
    /// `"20049:2049"` (host port 20049 to guest port 2049).
    #[serde(default)]
    pub tcp: Vec<PortForward>,
    /// UDP ports forwarded, written as `tcp`.
    #[serde(default)]
    pub udp: Vec<PortForward>,
    /// The guest's address and prefix length, which its IP stack must use (`net-ip`'s `ip=`).
    #[serde(default = "default_passt_address")]
    pub address: String,
    /// The address on the guest's link that forwarded connections come from and replies go to.
    #[serde(default = "default_passt_gateway")]
    pub gateway: String,
}

fn default_passt_address() -> String {
    PASST_ADDRESS.to_string()
}

fn default_passt_gateway() -> String {
    PASST_GATEWAY.to_string()
}

/// One forwarded port: `N`, or `"HOST:GUEST"`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum PortForward {
    /// The same port on both sides.
    Same(u16),
    /// `"HOST:GUEST"`.
    Mapped(String),
}

impl PortForward {
    /// The host port and the guest port.
    ///
    /// # Errors
    /// Not `N` or `"HOST:GUEST"` with ports from 1 to 65535.
    pub fn ports(&self) -> Result<(u16, u16), String> {
        let port = |text: &str| text.trim().parse::<u16>().ok().filter(|&p| p != 0);
        let (host, guest) = match self {
            PortForward::Same(port) => (Some(*port).filter(|&p| p != 0), Some(*port).filter(|&p| p != 0)),
            PortForward::Mapped(text) => match text.split_once(':') {
                Some((host, guest)) => (port(host), port(guest)),
                None => (port(text), port(text)),
            },
        };
        match (host, guest) {
            (Some(host), Some(guest)) => Ok((host, guest)),
            _ => Err(format!("{self:?} is not a port from 1 to 65535 or \"HOST:GUEST\"")),
        }
    }
}

impl PasstConfig {
    /// The guest's address and prefix length.
    ///
    /// # Errors
    /// Not `A.B.C.D/N` with `N` from 8 to 30.
    pub fn guest(&self) -> Result<(Ipv4Addr, u8), String> {
        let bad = || format!("address {:?} must be A.B.C.D/N with N from 8 to 30", self.address);
        let (address, prefix) = self.address.split_once('/').ok_or_else(bad)?;
        let address: Ipv4Addr = address.parse().map_err(|_| bad())?;
        let prefix: u8 = prefix.parse().ok().filter(|p| (8..=30).contains(p)).ok_or_else(bad)?;
        Ok((address, prefix))
    }

    /// The gateway address.
    ///
    /// # Errors
    /// Not an IPv4 address.
    pub fn gateway(&self) -> Result<Ipv4Addr, String> {
        self.gateway.parse().map_err(|_| format!("gateway {:?} is not an IPv4 address", self.gateway))
    }

    /// Checks the ports and addresses: every port valid, no host port forwarded twice per
    /// protocol, the guest's address and the gateway two host addresses of one subnet.
    ///
    /// # Errors
    /// A message saying what is wrong.
    pub fn check(&self) -> Result<(), String> {
        for (protocol, forwards) in [("tcp", &self.tcp), ("udp", &self.udp)] {
            let mut hosts = BTreeSet::new();
            for forward in forwards {
                let (host, _) = forward.ports().map_err(|e| format!("{protocol}: {e}"))?;
                if !hosts.insert(host) {
                    return Err(format!("{protocol}: host port {host} is forwarded twice"));
                }
            }
        }
        let (guest, prefix) = self.guest()?;
        let gateway = self.gateway()?;
        let mask = u32::MAX << (32 - prefix);
        let host_part = |a: Ipv4Addr| u32::from(a) & !mask;
        let usable = |a: Ipv4Addr| host_part(a) != 0 && host_part(a) != !mask;
        if u32::from(guest) & mask != u32::from(gateway) & mask
            || guest == gateway
            || !usable(guest)
            || !usable(gateway)
        {
            return Err(format!(
                "address {} and gateway {gateway} must be two host addresses of one subnet",
                self.address
            ));
        }
        if guest.is_loopback() || guest.is_multicast() || guest.is_unspecified() {
            return Err(format!("address {} cannot be a guest's address", self.address));
        }
        Ok(())
    }
}

/// Which backend a NIC uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NicBackend {
    /// A Linux TAP device of this name.
    Tap(String),
    /// Wired to the NIC of this name.
    Pair(String),
    /// A Unix socket of this path, speaking QEMU's stream protocol.
    Stream(String),
    /// A `passt` not started yet: the `domos` command starts it and sets `stream`.
    Passt,
}

impl NicConfig {
    /// The backend, once [`check_nics`] accepted the table (a `passt` card whose `stream` the
    /// `domos` command has set is a `Stream`).
    pub fn backend(&self) -> NicBackend {
        match (&self.stream, &self.tap, &self.pair) {
            (Some(path), _, _) => NicBackend::Stream(path.clone()),
            (None, Some(tap), _) => NicBackend::Tap(tap.clone()),
            (None, None, Some(pair)) => NicBackend::Pair(pair.clone()),
            (None, None, None) if self.passt.is_some() => NicBackend::Passt,
            (None, None, None) => NicBackend::Pair(String::new()),
        }
    }

    /// The Ethernet address: the configured one, or `02:` and five bytes of a hash of the name.
    ///
    /// # Errors
    /// A malformed or multicast address.
    pub fn mac(&self) -> Result<[u8; 6], String> {
        let Some(text) = &self.mac else {
            let hash = self
                .name
                .bytes()
                .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
            let b = hash.to_le_bytes();
            return Ok([0x02, b[0], b[1], b[2], b[3], b[4]]);
        };
        let bad = || format!("nic {}: mac must be six hexadecimal bytes such as \"02:00:00:00:00:01\"", self.name);
        let mut mac = [0u8; 6];
        let mut parts = text.split(':');
        for byte in &mut mac {
            let part = parts.next().filter(|p| p.len() == 2).ok_or_else(bad)?;
            *byte = u8::from_str_radix(part, 16).map_err(|_| bad())?;
        }
        if parts.next().is_some() {
            return Err(bad());
        }
        if mac[0] & 1 == 1 {
            return Err(format!("nic {}: mac {text} is a multicast address", self.name));
        }
        Ok(mac)
    }
}

/// Checks the `[[nic]]` tables; `devices` holds the names of devices and disks seen so far, and
/// receives the NICs'.
///
/// # Errors
/// A message naming the NIC: no backend or two, a pair that does not name this NIC back, a bad
/// TAP name, socket path, passt table, MAC or MTU, a name in use.
pub fn check_nics<'a>(nics: &'a [NicConfig], devices: &mut BTreeSet<&'a str>) -> Result<(), String> {
    for nic in nics {
        let name = &nic.name;
        let backends = [nic.tap.is_some(), nic.pair.is_some(), nic.stream.is_some(), nic.passt.is_some()];
        if backends.iter().filter(|&&b| b).count() != 1 {
            return Err(format!(
                "nic {name}: give one of tap = \"IFNAME\", pair = \"NIC\", stream = \"PATH\" or passt = {{ … }}"
            ));
        }
        if let Some(path) = &nic.stream
            && (path.is_empty() || path.len() >= UNIX_PATH_MAX || path.contains('\0'))
        {
            return Err(format!("nic {name}: stream must be a Unix socket path of 1 to 107 bytes"));
        }
        if let Some(passt) = &nic.passt {
            passt.check().map_err(|e| format!("nic {name}: passt: {e}"))?;
        }
        if let Some(tap) = &nic.tap {
            let valid = !tap.is_empty()
                && tap.len() < 16
                && tap.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
            if !valid {
                return Err(format!(
                    "nic {name}: tap must be a Linux interface name of 1 to 15 letters, digits, '-', '_' or '.'"
                ));
            }
        }
        if let Some(pair) = &nic.pair {
            if pair == name {
                return Err(format!("nic {name}: cannot be paired with itself"));
            }
            let other = nics.iter().find(|n| &n.name == pair);
            if other.is_none_or(|o| o.pair.as_deref() != Some(name)) {
                return Err(format!("nic {name}: pair = \"{pair}\" needs a [[nic]] {pair} with pair = \"{name}\""));
            }
            if other.is_some_and(|o| o.mtu != nic.mtu) {
                return Err(format!("nic {name}: its pair {pair} has another mtu"));
            }
        }
        if !(MIN_MTU..=MAX_MTU).contains(&nic.mtu) {
            return Err(format!("nic {name}: mtu must be between {MIN_MTU} and {MAX_MTU}"));
        }
        nic.mac()?;
        if !devices.insert(name.as_str()) {
            return Err(format!("device {name} is defined twice"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::SystemConfig;

    fn config(nics: &str) -> Result<SystemConfig, String> {
        SystemConfig::parse(&format!("{nics}[[domain]]\nname = \"A\"\n[[domain.component]]\nname = \"x\""))
    }

    #[test]
    fn pairs_taps_macs_and_mtus_are_checked() {
        let pair = "[[nic]]\nname = \"a\"\npair = \"b\"\n[[nic]]\nname = \"b\"\npair = \"a\"\n";
        let parsed = config(pair).unwrap();
        assert_eq!(parsed.nics.len(), 2);
        let a = &parsed.nics[0];
        assert_eq!(a.mtu, 1500);
        assert_eq!(a.mac().unwrap()[0], 0x02, "locally administered");
        assert_ne!(a.mac(), parsed.nics[1].mac(), "two names, two addresses");
        let ok = config("[[nic]]\nname = \"t\"\ntap = \"domos0\"\nmac = \"02:aa:bb:cc:dd:0e\"\nmtu = 65518\n").unwrap();
        assert_eq!(ok.nics[0].mac(), Ok([2, 0xaa, 0xbb, 0xcc, 0xdd, 0x0e]));
        for (bad, why) in [
            ("[[nic]]\nname = \"a\"\n", "give one of"),
            ("[[nic]]\nname = \"a\"\ntap = \"t\"\npair = \"b\"\n", "give one of"),
            ("[[nic]]\nname = \"a\"\npair = \"b\"\n", "needs a [[nic]] b"),
            ("[[nic]]\nname = \"a\"\npair = \"a\"\n", "paired with itself"),
            ("[[nic]]\nname = \"a\"\ntap = \"a-very-long-interface\"\n", "tap must be"),
            ("[[nic]]\nname = \"a\"\ntap = \"x/y\"\n", "tap must be"),
            ("[[nic]]\nname = \"a\"\ntap = \"t\"\nmtu = 40\n", "mtu must be"),
            ("[[nic]]\nname = \"a\"\ntap = \"t\"\nmtu = 65519\n", "mtu must be"),
            ("[[nic]]\nname = \"a\"\ntap = \"t\"\nmac = \"02:00:00:00:00\"\n", "six hexadecimal"),
            ("[[nic]]\nname = \"a\"\ntap = \"t\"\nmac = \"02:00:00:00:00:zz\"\n", "six hexadecimal"),
            ("[[nic]]\nname = \"a\"\ntap = \"t\"\nmac = \"01:00:00:00:00:01\"\n", "multicast"),
            ("[[disk]]\nname = \"a\"\nsize = \"1 MiB\"\n[[nic]]\nname = \"a\"\ntap = \"t\"\n", "defined twice"),
        ] {
            let err = config(bad).unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
        }
        let passt = config(
            "[[nic]]\nname = \"p\"\npasst = { tcp = [2049, \"20111:111\"], udp = [\"20049:2049\"] }\n\
             [[nic]]\nname = \"s\"\nstream = \"/run/passt.socket\"\n",
        )
        .unwrap();
        let table = passt.nics[0].passt.as_ref().unwrap();
        let tcp: Vec<_> = table.tcp.iter().map(|f| f.ports().unwrap()).collect();
        assert_eq!(tcp, [(2049, 2049), (20111, 111)]);
        assert_eq!(table.udp[0].ports(), Ok((20049, 2049)));
        assert_eq!(table.guest(), Ok((std::net::Ipv4Addr::new(10, 0, 2, 15), 24)), "the default address");
        assert_eq!(passt.nics[0].backend(), super::NicBackend::Passt, "until domos starts passt");
        assert_eq!(passt.nics[1].backend(), super::NicBackend::Stream("/run/passt.socket".into()));
        for (bad, why) in [
            ("passt = {}\ntap = \"t\"", "give one of"),
            ("stream = \"\"", "stream must be"),
            ("passt = { tcp = [0] }", "not a port"),
            ("passt = { tcp = [\"1:2:3\"] }", "not a port"),
            ("passt = { udp = [\"70000:7\"] }", "not a port"),
            ("passt = { tcp = [7, \"7:8\"] }", "forwarded twice"),
            ("passt = { address = \"10.0.2.15\" }", "A.B.C.D/N"),
            ("passt = { address = \"10.0.2.15/31\" }", "A.B.C.D/N"),
            ("passt = { gateway = \"10.0.3.2\" }", "one subnet"),
            ("passt = { gateway = \"10.0.2.15\" }", "one subnet"),
            ("passt = { gateway = \"10.0.2.255\" }", "one subnet"),
            ("passt = { gateway = \"nowhere\" }", "not an IPv4"),
            ("passt = { address = \"127.0.0.5/8\", gateway = \"127.0.0.1\" }", "cannot be a guest"),
            ("passt = { tcp = [7], out = true }", "unknown field"),
        ] {
            let err = config(&format!("[[nic]]\nname = \"a\"\n{bad}\n")).unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
        }
        let mismatched = "[[nic]]\nname = \"a\"\npair = \"b\"\n[[nic]]\nname = \"b\"\npair = \"a\"\nmtu = 9000\n";
        assert!(config(mismatched).unwrap_err().contains("another mtu"));
    }
}
