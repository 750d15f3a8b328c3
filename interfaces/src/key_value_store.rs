//! `KeyValueStore`: a store of named tables.

use alloc::string::String;
use alloc::vec::Vec;
use domos_sdk::{CallError, Portal, Wire, interface};

use crate::table::{Table, TableInfo};

/// Why a key-value operation failed.
#[derive(Debug, Clone, PartialEq, Eq, Wire)]
pub enum KvError {
    /// A table or key name is empty or longer than the store accepts.
    InvalidName(String),
    /// The store holds as many tables or entries as it is configured for.
    Full,
    /// The portal call itself failed.
    Call(CallError),
}

impl From<CallError> for KvError {
    fn from(e: CallError) -> Self {
        KvError::Call(e)
    }
}

/// A store of named tables; each table is a service of its own.
#[interface(version = "1.0")]
pub trait KeyValueStore {
    /// Opens the table `name`, creating it when it does not exist. Every portal to the same
    /// name reaches the same table.
    fn open(&self, name: String) -> Result<Portal<dyn Table>, KvError>;
    /// Describes every table.
    fn tables(&self) -> Result<Vec<TableInfo>, KvError>;
}
