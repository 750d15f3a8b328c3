//! `Manifest::parse`: the TOML text a component carries in its `domos:manifest` section, which the
//! loader reads from every module it is given.
//!
//! Input: the manifest text (bytes that are not UTF-8 are refused before the parser, as the
//! verifier refuses such a section).
//!
//! Checks, beyond no panic: an accepted manifest has a name of letters, digits, `-` and `_`;
//! every interface it provides or requires has a name of letters, digits and `_`, and satisfies
//! itself; and writing the manifest back out as TOML (with the `toml` crate, not the parser's
//! own code) and parsing that gives the same manifest: what was accepted depends only on what
//! the text says.
#![no_main]

use domos_loader::manifest::{InterfaceVersion, Manifest};
use libfuzzer_sys::fuzz_target;
use toml::{Table, Value};

fn strings(items: impl IntoIterator<Item = String>) -> Value {
    Value::Array(items.into_iter().map(Value::String).collect())
}

fn interfaces(list: &[InterfaceVersion]) -> Value {
    strings(list.iter().map(ToString::to_string))
}

/// The manifest as TOML text.
fn write(manifest: &Manifest) -> String {
    let mut table = Table::new();
    table.insert("name".into(), Value::String(manifest.name.clone()));
    table.insert("version".into(), Value::String(manifest.version.clone()));
    table.insert("description".into(), Value::String(manifest.description.clone()));
    table.insert("provides".into(), interfaces(&manifest.provides));
    table.insert("requires".into(), interfaces(&manifest.requires));
    table.insert("scheduler".into(), Value::String(manifest.scheduler.clone()));
    table.insert("bounded".into(), strings(manifest.bounded.iter().cloned()));
    table.insert("services_wait".into(), Value::Boolean(manifest.services_wait));
    if let Some(policy) = &manifest.policy {
        table.insert("policy".into(), Value::String(policy.clone()));
    }
    toml::to_string(&table).expect("a table of strings, arrays and a bool serializes")
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(manifest) = Manifest::parse(text) else {
        return;
    };
    assert!(!manifest.name.is_empty());
    assert!(manifest.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'), "{manifest:?}");
    for interface in manifest.provides.iter().chain(&manifest.requires) {
        assert!(!interface.name.is_empty());
        assert!(interface.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'), "{interface:?}");
        assert!(interface.satisfies(interface));
    }
    let written = write(&manifest);
    let again = Manifest::parse(&written).unwrap_or_else(|e| panic!("{e}: the manifest written back\n{written}"));
    assert_eq!(again, manifest, "the manifest written back\n{written}");
});
