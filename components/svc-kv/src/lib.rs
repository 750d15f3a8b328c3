//! `svc-kv`: an in-memory key-value store.
//!
//! Serves `KeyValueStore` (registered under the name `KeyValueStore`) and one `Table` service
//! per table it hands out. Arguments: `max_tables=N` (default 64), `max_entries=N` per table
//! (default 100000).
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use domos_interfaces::key_value_store::{KeyValueStore, KvError};
use domos_interfaces::table::{Entry, Table, TableInfo};
use domos_sdk::{CallError, Mutex, Portal, names};

domos_sdk::component! { init: init }

const MAX_NAME: usize = 256;

fn arg(args: &str, key: &str, default: usize) -> usize {
    args.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == key)
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(default)
}

fn init() -> Result<(), CallError> {
    let args = domos_sdk::args();
    let store = Store {
        tables: Mutex::new(BTreeMap::new()),
        max_tables: arg(&args, "max_tables", 64),
        max_entries: arg(&args, "max_entries", 100_000),
    };
    names::register("KeyValueStore", &store.into_portal())
}

fn check_name(name: &str) -> Result<(), KvError> {
    if name.is_empty() || name.len() > MAX_NAME {
        return Err(KvError::InvalidName(name.chars().take(32).collect()));
    }
    Ok(())
}

struct Store {
    tables: Mutex<BTreeMap<String, Arc<TableState>>>,
    max_tables: usize,
    max_entries: usize,
}

impl KeyValueStore for Store {
    fn open(&self, name: String) -> Result<Portal<dyn Table>, KvError> {
        check_name(&name)?;
        let mut tables = self.tables.lock();
        if let Some(table) = tables.get(&name) {
            return Ok(Portal::new(table.clone()));
        }
        if tables.len() >= self.max_tables {
            return Err(KvError::Full);
        }
        let table = Arc::new(TableState {
            name: name.clone(),
            entries: Mutex::new(BTreeMap::new()),
            max_entries: self.max_entries,
        });
        tables.insert(name, table.clone());
        Ok(Portal::new(table))
    }

    fn tables(&self) -> Result<Vec<TableInfo>, KvError> {
        let tables: Vec<_> = self.tables.lock().values().cloned().collect();
        tables.iter().map(|t| t.info()).collect()
    }
}

struct TableState {
    name: String,
    entries: Mutex<BTreeMap<String, String>>,
    max_entries: usize,
}

impl Table for TableState {
    fn put(&self, key: String, value: String) -> Result<Option<String>, KvError> {
        check_name(&key)?;
        let mut entries = self.entries.lock();
        if entries.len() >= self.max_entries && !entries.contains_key(&key) {
            return Err(KvError::Full);
        }
        Ok(entries.insert(key, value))
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
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .map(|(k, v)| Entry { key: k.clone(), value: v.clone() })
            .collect())
    }

    fn info(&self) -> Result<TableInfo, KvError> {
        let entries = self.entries.lock();
        let bytes = entries.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum();
        Ok(TableInfo { name: self.name.clone(), entries: entries.len() as u64, bytes })
    }
}
