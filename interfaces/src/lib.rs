//! The portal interfaces of Domos components, one module per interface.
//!
//! Each is declared once with `#[domos_sdk::interface]`; clients call the trait on a
//! `Portal<dyn Trait>`, servers implement the trait.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod block_io;
pub mod buffer_cache;
pub mod file_system;
pub mod grafts;
pub mod inode_file_system;
pub mod ipc_bench;
pub mod key_value_store;
pub mod memory_fault_handler;
pub mod memory_inspector;
pub mod network;
pub mod network_device;
pub mod summarizer;
pub mod table;
