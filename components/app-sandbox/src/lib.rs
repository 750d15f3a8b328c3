//! `app-sandbox`: Alta's `-memlimit` sandbox on Domos.
//!
//! Arguments: `[pass=NAME,…] [wrap=KeyValueStore] [grants=domains] [set=KEY:VALUE,…] LIMIT MAX COMPONENT [ARGS…]`
//! — runs `COMPONENT` (with `ARGS`) in a child domain whose heap starts at `LIMIT` bytes; each
//! memory fault of the child is printed and granted in steps while the child's total stays
//! within `MAX` bytes, and refused beyond, which ends the child. The child sees only the names
//! the sandbox hands down: those in `pass` unchanged, and `KeyValueStore` (logging every call)
//! or `IpcBench` (forwarding) through a wrapper the sandbox serves (`wrap`). `grants=domains` lets the child run a sandbox of its own;
//! `set=KEY:VALUE,…` adds settings to the child's `[[domain]]` table (`set=threads:8`).
//! The domain running the sandbox needs the `domains` grant and a quota that can hold `MAX`.
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use domos_interfaces::ipc_bench::IpcBench;
use domos_interfaces::key_value_store::{KeyValueStore, KvError};
use domos_interfaces::memory_fault_handler::MemoryFaultHandler;
use domos_interfaces::table::{Table, TableInfo};
use domos_sdk::domains::{Child, Ended};
use domos_sdk::{CallError, HostError, Mutex, Portal, names, println};

domos_sdk::component! { main: main }

fn main() -> Result<(), CallError> {
    let args = domos_sdk::args();
    let mut words: Vec<&str> = args.split_whitespace().collect();
    let mut options = Vec::new();
    while let Some((key, value)) =
        words.first().and_then(|w| w.split_once('=')).filter(|(k, _)| ["pass", "wrap", "grants", "set"].contains(k))
    {
        options.push((key, value));
        words.remove(0);
    }
    let (Some(limit), Some(max), Some(component)) = (
        words.first().and_then(|w| w.parse::<u64>().ok()),
        words.get(1).and_then(|w| w.parse::<u64>().ok()),
        words.get(2),
    ) else {
        println!("usage: LIMIT MAX COMPONENT [ARGS...]");
        return Err(CallError::Host(HostError::InvalidArgument));
    };
    let child_args: String = words.get(3..).map(|rest| rest.join(" ")).unwrap_or_default();
    let grants = options.iter().find(|(k, _)| *k == "grants").map_or("", |(_, v)| v);
    let grants: Vec<String> = grants.split(',').filter(|g| !g.is_empty()).map(|g| format!("\"{g}\"")).collect();
    let settings: String = options
        .iter()
        .filter(|(k, _)| *k == "set")
        .flat_map(|(_, v)| v.split(','))
        .filter_map(|setting| setting.split_once(':'))
        .map(|(key, value)| format!("{key} = {value}\n"))
        .collect();
    let spec = format!(
        "name = \"sandboxed-{component}\"\nheap = {limit}\ngrants = [{}]\n{settings}[[component]]\nname = \"{component}\"\nargs = \"{child_args}\"\n",
        grants.join(", ")
    );
    let handler = MemLimit { limit: Mutex::new(limit), max }.into_portal();
    println!("running {component} {child_args} with {limit} B, at most {max} B");
    let child = Child::create(&spec, Some(&handler))?;
    for (key, value) in &options {
        for name in value.split(',').filter(|n| !n.is_empty()) {
            match *key {
                "set" => {}
                "pass" => child.provide_any(name, &names::lookup_any(name)?)?,
                "wrap" if name == "KeyValueStore" => {
                    let inner: Portal<dyn KeyValueStore> = names::lookup(name)?;
                    child.provide(name, &Logged { inner }.into_portal())?;
                }
                "wrap" if name == "IpcBench" => {
                    let inner: Portal<dyn IpcBench> = names::lookup(name)?;
                    child.provide(name, &Forwarder { inner }.into_portal())?;
                }
                _ => {}
            }
        }
    }
    child.start()?;
    match child.wait()? {
        Ended::Finished => println!("child finished within its limit"),
        Ended::Terminated => println!("child terminated: {}", child.inspect()?),
    }
    Ok(())
}

/// `KeyValueStore` as the child sees it: every call is logged, then forwarded.
struct Logged {
    inner: Portal<dyn KeyValueStore>,
}

impl KeyValueStore for Logged {
    fn open(&self, name: String) -> Result<Portal<dyn Table>, KvError> {
        println!("interposed: KeyValueStore.open({name:?})");
        self.inner.open(name)
    }
    fn tables(&self) -> Result<Vec<TableInfo>, KvError> {
        println!("interposed: KeyValueStore.tables()");
        self.inner.tables()
    }
}

/// `IpcBench` as the child sees it: every call is forwarded (the per-level cost of a wrapper).
struct Forwarder {
    inner: Portal<dyn IpcBench>,
}

impl IpcBench for Forwarder {
    fn null(&self) -> Result<(), CallError> {
        self.inner.null()
    }
    fn add3(&self, a: u32, b: u32, c: u32) -> Result<u32, CallError> {
        self.inner.add3(a, b, c)
    }
    fn measure(&self, text: &str) -> Result<u32, CallError> {
        self.inner.measure(text)
    }
}

/// Grants faults in steps of at least 1 MiB while the child stays within `max`.
struct MemLimit {
    limit: Mutex<u64>,
    max: u64,
}

impl MemoryFaultHandler for MemLimit {
    fn out_of_memory(&self, child: u32, short_by: u64) -> Result<u64, CallError> {
        let mut limit = self.limit.lock();
        let grant = short_by.max(1 << 20);
        if *limit + grant > self.max {
            println!("fault: domain {child} short by {short_by} B; limit {} B reached, refusing", *limit);
            return Ok(0);
        }
        *limit += grant;
        println!("fault: domain {child} short by {short_by} B; granting {grant} B (limit now {} B)", *limit);
        Ok(grant)
    }
}
