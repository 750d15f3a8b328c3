//! `test-kv`: a client that drives the `KeyValueStore` it finds under that name through every
//! method, its limits and its errors, and prints every answer (`kv LABEL: ANSWER`), so that the
//! system tests can boot it against two implementations (`svc-kv` in Rust, `svc-kv-c` in C) and
//! compare the transcripts. The store must be configured with `max_tables=3 max_entries=4`.
//! Prints `kv done` at the end.
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

use alloc::format;
use alloc::string::String;
use core::fmt::Debug;
use domos_interfaces::key_value_store::{KeyValueStore, KvError};
use domos_interfaces::table::Table;
use domos_sdk::{Portal, names, println};

domos_sdk::component! { main: main }

fn show(label: &str, answer: impl Debug) {
    println!("kv {label}: {answer:?}");
}

fn main() -> Result<(), KvError> {
    let store: Portal<dyn KeyValueStore> = names::lookup("KeyValueStore")?;
    // Names: empty, too long (the error keeps 32 characters, here of two bytes each), fine.
    show("open empty", store.open(String::new()).map(|_| ()));
    show("open long", store.open("x".repeat(257)).map(|_| ()));
    show("open long accented", store.open("é".repeat(200)).map(|_| ()));
    show("open longest", store.open("y".repeat(256)).map(|_| ()));
    let alpha = match store.open("alpha".into()) {
        Ok(table) => table,
        Err(e) => {
            show("open alpha", e);
            return Ok(());
        }
    };
    // Three tables at most, listed by name.
    show("open gamma", store.open("gamma".into()).map(|_| ()));
    show("open beta (a fourth)", store.open("beta".into()).map(|_| ()));
    show("tables", store.tables());

    for (key, value) in [("b", "2"), ("a", "1"), ("ab", "3"), ("a", "one"), ("", "x"), ("é", "accent")] {
        show(&format!("put {key:?}"), alpha.put(key.into(), value.into()));
    }
    show("put a fifth key", alpha.put("c".into(), "full".into()));
    show("put over a full table", alpha.put("b".into(), "two".into()));
    show("put a long key", alpha.put("k".repeat(300), "v".into()));
    for key in ["a", "ab", "zz", "", "é"] {
        show(&format!("get {key:?}"), alpha.get(key.into()));
    }
    for prefix in ["a", "", "é", "zzz", "abc"] {
        show(&format!("scan {prefix:?}"), alpha.scan(prefix.into()));
    }
    show("info", alpha.info());
    show("remove ab", alpha.remove("ab".into()));
    show("remove ab again", alpha.remove("ab".into()));
    show("remove missing", alpha.remove("nothing".into()));
    show("info after removal", alpha.info());

    // The same table through a second portal, after the first is dropped.
    drop(alpha);
    let again = store.open("alpha".into())?;
    show("reopened scan", again.scan(String::new()));
    // Values up to the per-call quota travel; a reply beyond it is refused.
    let big = "v".repeat(33_000);
    show("put big", again.put("big".into(), big.clone()).map(|old| old.map(|v| v.len())));
    show("get big", again.get("big".into()).map(|v| v.map(|v| v.len())));
    for key in ["big1", "big2"] {
        show(&format!("put {key}"), again.put(key.into(), big.clone()).map(|old| old.map(|v| v.len())));
    }
    show("replace b by a big value", again.put("b".into(), big).map(|old| old.map(|v| v.len())));
    show("scan beyond the quota", again.scan(String::new()).map(|entries| entries.len()));
    show("tables at the end", store.tables());
    println!("kv done");
    Ok(())
}
