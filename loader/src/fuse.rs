//! `[[fuse]]` tables: `/dev/fuse` as an emulated device, mounted at a directory of the host,
//! whose requests a driver with the `devices` grant (`components/drv-fuse`) answers.
//!
//! ```toml
//! [[fuse]]
//! name = "fuse0"
//! mountpoint = "/mnt/domos"   # an existing directory; the kernel mounts for root, fusermount3
//!                             # for any other user (domos/src/fusermount.rs)
//! ```

use serde::Deserialize;
use std::collections::BTreeSet;

/// One `[[fuse]]`: a FUSE connection the kernel opens and mounts at `mountpoint`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FuseConfig {
    /// The name drivers open.
    pub name: String,
    /// The directory of the host the file system is mounted at.
    pub mountpoint: String,
}

/// Checks the `[[fuse]]` tables; `devices` holds the names of devices seen so far, and gets
/// theirs.
///
/// # Errors
/// A duplicate name, or a mount point that is not an absolute path or holds a NUL.
pub fn check_fuses<'a>(fuses: &'a [FuseConfig], devices: &mut BTreeSet<&'a str>) -> Result<(), String> {
    for fuse in fuses {
        let name = &fuse.name;
        if !fuse.mountpoint.starts_with('/') || fuse.mountpoint.contains('\0') {
            return Err(format!("fuse {name}: mountpoint must be an absolute path without NUL"));
        }
        if !devices.insert(name.as_str()) {
            return Err(format!("device {name} is defined twice"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::SystemConfig;

    fn config(fuse: &str) -> Result<SystemConfig, String> {
        SystemConfig::parse(&format!("{fuse}[[domain]]\nname = \"A\"\n[[domain.component]]\nname = \"x\""))
    }

    #[test]
    fn fuse_tables_are_checked() {
        let ok = config("[[fuse]]\nname = \"f\"\nmountpoint = \"/mnt/x\"\n").unwrap();
        assert_eq!(ok.fuses[0].mountpoint, "/mnt/x");
        assert!(config("[[fuse]]\nname = \"f\"\nmountpoint = \"mnt\"\n").unwrap_err().contains("absolute"));
        let twice = "[[fuse]]\nname = \"f\"\nmountpoint = \"/a\"\n[[fuse]]\nname = \"f\"\nmountpoint = \"/b\"\n";
        assert!(config(twice).unwrap_err().contains("defined twice"));
        assert!(config("[[fuse]]\nname = \"f\"\n").is_err(), "a mount point is needed");
    }
}
