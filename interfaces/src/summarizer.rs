//! `Summarizer`: word statistics over a table it is handed.

use alloc::string::String;
use alloc::vec::Vec;
use domos_sdk::{CallError, Portal, Wire, interface};

use crate::table::Table;

/// Word statistics of the entries of a table.
#[derive(Debug, Clone, PartialEq, Eq, Wire)]
pub struct Summary {
    /// Entries read.
    pub entries: u64,
    /// Words in their values.
    pub words: u64,
    /// The most frequent words with their counts, most frequent first (ties by word).
    pub top_words: Vec<(String, u32)>,
}

/// Why a summary failed.
#[derive(Debug, Clone, PartialEq, Eq, Wire)]
pub enum SummaryError {
    /// Reading the table failed.
    Table(String),
    /// The portal call itself failed.
    Call(CallError),
}

impl From<CallError> for SummaryError {
    fn from(e: CallError) -> Self {
        SummaryError::Call(e)
    }
}

/// Computes statistics over a table reached through a portal it is given.
#[interface(version = "1.0")]
pub trait Summarizer {
    /// Summarizes the entries of `table` whose keys start with `prefix`; `top` bounds the word
    /// list.
    fn summarize(&self, table: Portal<dyn Table>, prefix: String, top: u32) -> Result<Summary, SummaryError>;
}
