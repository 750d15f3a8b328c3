//! `Table`: one table of string entries.

use alloc::string::String;
use alloc::vec::Vec;
use domos_sdk::{Wire, interface};

use crate::key_value_store::KvError;

/// One key and its value.
#[derive(Debug, Clone, PartialEq, Eq, Wire)]
pub struct Entry {
    /// The key.
    pub key: String,
    /// The value.
    pub value: String,
}

/// What a table holds.
#[derive(Debug, Clone, PartialEq, Eq, Wire)]
pub struct TableInfo {
    /// The table's name.
    pub name: String,
    /// Number of entries.
    pub entries: u64,
    /// Bytes of keys and values.
    pub bytes: u64,
}

/// A table of string entries, ordered by key.
#[interface(version = "1.0")]
pub trait Table {
    /// Sets `key` to `value`; returns the previous value.
    fn put(&self, key: String, value: String) -> Result<Option<String>, KvError>;
    /// The value of `key`.
    fn get(&self, key: String) -> Result<Option<String>, KvError>;
    /// Removes `key`; returns its value.
    fn remove(&self, key: String) -> Result<Option<String>, KvError>;
    /// Every entry whose key starts with `prefix`, ordered by key.
    fn scan(&self, prefix: String) -> Result<Vec<Entry>, KvError>;
    /// The table's name and size.
    fn info(&self) -> Result<TableInfo, KvError>;
}
