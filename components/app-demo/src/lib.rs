//! `app-demo`: a client that exercises what the kernel core offers.
//!
//! Its main thread looks up `KeyValueStore` and `Summarizer`, starts two writer threads that
//! fill the table `notes` with strings through their own portals, checks what they wrote,
//! hands a portal to that table to the summarizer (which calls the table in a third domain),
//! and finally hands the summarizer a table served by this component itself, so the summarizer
//! calls back into this domain. Arguments: `rounds=N` repeats the writing (default 1).
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use domos_interfaces::key_value_store::{KeyValueStore, KvError};
use domos_interfaces::summarizer::{Summarizer, Summary, SummaryError};
use domos_interfaces::table::{Entry, Table, TableInfo};
use domos_sdk::{CallError, Mutex, Portal, names, println, thread};

domos_sdk::component! { main: main }

const LINES: [&str; 8] = [
    "a domain owns its heap its threads and its portals",
    "a portal is a capability and a call copies its parameters",
    "the kernel verifies every component before it runs",
    "a trap in one domain ends that domain and no other",
    "memory objects are shared without copying and can be revoked",
    "schedulers and drivers are components like any other",
    "the configuration decides which component runs in which domain",
    "the same components run in one domain or in many",
];

#[derive(Debug)]
#[expect(dead_code, reason = "the fields are read through Debug when main reports the error")]
enum DemoError {
    Call(CallError),
    Store(KvError),
    Summary(SummaryError),
    Check(String),
}

impl From<CallError> for DemoError {
    fn from(e: CallError) -> Self {
        DemoError::Call(e)
    }
}
impl From<KvError> for DemoError {
    fn from(e: KvError) -> Self {
        DemoError::Store(e)
    }
}
impl From<SummaryError> for DemoError {
    fn from(e: SummaryError) -> Self {
        DemoError::Summary(e)
    }
}

/// Writes every `stride`-th line, starting at `first`, through a portal of its own.
fn writer(first: usize, stride: usize, rounds: usize) -> Result<usize, DemoError> {
    let store: Portal<dyn KeyValueStore> = names::lookup("KeyValueStore")?;
    let table = store.open("notes".into())?;
    let mut written = 0;
    for round in 0..rounds {
        for (i, line) in LINES.iter().enumerate().skip(first).step_by(stride) {
            table.put(format!("line/{i:02}"), format!("{line} (round {round})"))?;
            written += 1;
        }
    }
    Ok(written)
}

fn show(what: &str, summary: &Summary) {
    let top: Vec<String> = summary.top_words.iter().map(|(w, n)| format!("{w}={n}")).collect();
    println!("summary of {what}: {} entries, {} words, top: {}", summary.entries, summary.words, top.join(" "));
}

fn main() -> Result<(), DemoError> {
    let args = domos_sdk::args();
    let rounds =
        args.split_whitespace().find_map(|a| a.strip_prefix("rounds=")).and_then(|n| n.parse().ok()).unwrap_or(1);
    let store: Portal<dyn KeyValueStore> = names::lookup("KeyValueStore")?;
    let summarizer: Portal<dyn Summarizer> = names::lookup("Summarizer")?;

    let writers: Vec<_> = (0..2)
        .map(|first| {
            thread::spawn(move || match writer(first, 2, rounds) {
                Ok(written) => written as i32,
                Err(e) => {
                    println!("writer {first} failed: {e:?}");
                    -1
                }
            })
        })
        .collect::<Result<_, _>>()?;
    let mut written = 0;
    for writer in writers {
        let id = writer.id();
        let count = writer.join()?;
        if count < 0 {
            return Err(DemoError::Check(format!("writer thread {id} failed")));
        }
        written += count;
    }
    println!("2 threads wrote {written} entries");

    let table = store.open("notes".into())?;
    let info = table.info()?;
    if info.entries != LINES.len() as u64 {
        return Err(DemoError::Check(format!("expected {} entries, found {info:?}", LINES.len())));
    }
    let first = table.get("line/00".into())?;
    if first.as_deref().map(|v| v.starts_with(LINES[0])) != Some(true) {
        return Err(DemoError::Check(format!("line/00 reads back as {first:?}")));
    }
    println!("table {:?}: {} entries, {} bytes", info.name, info.entries, info.bytes);

    // The summarizer is handed a portal to a table served in another domain.
    let summary = summarizer.summarize(store.open("notes".into())?, "line/".into(), 3)?;
    show("notes (served by svc-kv)", &summary);

    // ... and a portal to a table this component serves itself: it calls back into this domain.
    let own = Scratch::default().into_portal();
    for (i, line) in LINES.iter().enumerate().filter(|(_, l)| l.contains("domain")) {
        own.put(format!("mine/{i}"), line.to_string())?;
    }
    let local_entries = own.info()?.entries;
    let summary = summarizer.summarize(own, "mine/".into(), 2)?;
    if summary.entries != local_entries {
        return Err(DemoError::Check(format!("summary saw {} of {local_entries} entries", summary.entries)));
    }
    show("scratch (served by app-demo)", &summary);

    let removed = table.remove("line/00".into())?;
    println!("removed line/00 ({} bytes); tables: {:?}", removed.map_or(0, |v| v.len()), store.tables()?);
    println!("demo finished: ok");
    Ok(())
}

/// A small table served by this component, to show a local object exported as a service.
#[derive(Default)]
struct Scratch {
    entries: Mutex<BTreeMap<String, String>>,
}

impl Table for Scratch {
    fn put(&self, key: String, value: String) -> Result<Option<String>, KvError> {
        Ok(self.entries.lock().insert(key, value))
    }
    fn get(&self, key: String) -> Result<Option<String>, KvError> {
        Ok(self.entries.lock().get(&key).cloned())
    }
    fn remove(&self, key: String) -> Result<Option<String>, KvError> {
        Ok(self.entries.lock().remove(&key))
    }
    fn scan(&self, prefix: String) -> Result<Vec<Entry>, KvError> {
        let entries = self.entries.lock();
        Ok(entries
            .iter()
            .filter(|(k, _)| k.starts_with(&prefix))
            .map(|(k, v)| Entry { key: k.clone(), value: v.clone() })
            .collect())
    }
    fn info(&self) -> Result<TableInfo, KvError> {
        let entries = self.entries.lock();
        let bytes = entries.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum();
        Ok(TableInfo { name: "scratch".into(), entries: entries.len() as u64, bytes })
    }
}
