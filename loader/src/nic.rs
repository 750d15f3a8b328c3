//! `[[nic]]` tables: emulated network cards, which drivers with the `devices` grant open.
//!
//! ```toml
//! [[nic]]
//! name = "eth0"
//! pair = "eth1"            # wired to the NIC eth1 of the same system (or: tap = "domos0")
//! mac = "02:00:00:00:00:01"
//! mtu = 1500
//! ```

use serde::Deserialize;
use std::collections::BTreeSet;

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
/// The largest MTU (a jumbo frame).
pub const MAX_MTU: u32 = 9000;

/// Which backend a NIC uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NicBackend {
    /// A Linux TAP device of this name.
    Tap(String),
    /// Wired to the NIC of this name.
    Pair(String),
}

impl NicConfig {
    /// The backend, once [`check_nics`] accepted the table.
    pub fn backend(&self) -> NicBackend {
        match (&self.tap, &self.pair) {
            (Some(tap), _) => NicBackend::Tap(tap.clone()),
            (None, Some(pair)) => NicBackend::Pair(pair.clone()),
            (None, None) => NicBackend::Pair(String::new()),
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
/// TAP name, MAC or MTU, a name in use.
pub fn check_nics<'a>(nics: &'a [NicConfig], devices: &mut BTreeSet<&'a str>) -> Result<(), String> {
    for nic in nics {
        let name = &nic.name;
        match (&nic.tap, &nic.pair) {
            (Some(tap), None) => {
                let valid = !tap.is_empty()
                    && tap.len() < 16
                    && tap.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
                if !valid {
                    return Err(format!(
                        "nic {name}: tap must be a Linux interface name of 1 to 15 letters, digits, '-', '_' or '.'"
                    ));
                }
            }
            (None, Some(pair)) => {
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
            _ => return Err(format!("nic {name}: give either tap = \"IFNAME\" or pair = \"NIC\"")),
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
        let ok = config("[[nic]]\nname = \"t\"\ntap = \"domos0\"\nmac = \"02:aa:bb:cc:dd:0e\"\nmtu = 9000\n").unwrap();
        assert_eq!(ok.nics[0].mac(), Ok([2, 0xaa, 0xbb, 0xcc, 0xdd, 0x0e]));
        for (bad, why) in [
            ("[[nic]]\nname = \"a\"\n", "give either tap"),
            ("[[nic]]\nname = \"a\"\ntap = \"t\"\npair = \"b\"\n", "give either tap"),
            ("[[nic]]\nname = \"a\"\npair = \"b\"\n", "needs a [[nic]] b"),
            ("[[nic]]\nname = \"a\"\npair = \"a\"\n", "paired with itself"),
            ("[[nic]]\nname = \"a\"\ntap = \"a-very-long-interface\"\n", "tap must be"),
            ("[[nic]]\nname = \"a\"\ntap = \"x/y\"\n", "tap must be"),
            ("[[nic]]\nname = \"a\"\ntap = \"t\"\nmtu = 40\n", "mtu must be"),
            ("[[nic]]\nname = \"a\"\ntap = \"t\"\nmac = \"02:00:00:00:00\"\n", "six hexadecimal"),
            ("[[nic]]\nname = \"a\"\ntap = \"t\"\nmac = \"02:00:00:00:00:zz\"\n", "six hexadecimal"),
            ("[[nic]]\nname = \"a\"\ntap = \"t\"\nmac = \"01:00:00:00:00:01\"\n", "multicast"),
            ("[[disk]]\nname = \"a\"\nsize = \"1 MiB\"\n[[nic]]\nname = \"a\"\ntap = \"t\"\n", "defined twice"),
        ] {
            let err = config(bad).unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
        }
        let mismatched = "[[nic]]\nname = \"a\"\npair = \"b\"\n[[nic]]\nname = \"b\"\npair = \"a\"\nmtu = 9000\n";
        assert!(config(mismatched).unwrap_err().contains("another mtu"));
    }
}
