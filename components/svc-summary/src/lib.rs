//! `svc-summary`: word statistics over a table reached through a portal it is handed.
//!
//! Serves `Summarizer` (registered under the name `Summarizer`); the table may live in any
//! domain, including the caller's.
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use domos_interfaces::summarizer::{Summarizer, Summary, SummaryError};
use domos_interfaces::table::Table;
use domos_sdk::{CallError, Portal, names};

domos_sdk::component! { init: init }

fn init() -> Result<(), CallError> {
    names::register("Summarizer", &WordStatistics.into_portal())
}

struct WordStatistics;

impl Summarizer for WordStatistics {
    fn summarize(&self, table: Portal<dyn Table>, prefix: String, top: u32) -> Result<Summary, SummaryError> {
        let entries = table.scan(prefix).map_err(|e| SummaryError::Table(format!("{e:?}")))?;
        let mut counts: BTreeMap<String, u32> = BTreeMap::new();
        let mut words = 0u64;
        for entry in &entries {
            for word in entry.value.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
                words += 1;
                *counts.entry(word.to_lowercase()).or_default() += 1;
            }
        }
        let mut top_words: Vec<(String, u32)> = counts.into_iter().collect();
        top_words.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        top_words.truncate(top as usize);
        Ok(Summary { entries: entries.len() as u64, words, top_words })
    }
}
