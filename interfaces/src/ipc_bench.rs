//! `IpcBench`: the calls `domos bench ipc` times.

use domos_sdk::{CallError, interface};

/// Calls of increasing weight, each answered at once.
#[interface(version = "1.0")]
pub trait IpcBench {
    /// Does nothing.
    fn null(&self) -> Result<(), CallError>;
    /// Adds three integers.
    fn add3(&self, a: u32, b: u32, c: u32) -> Result<u32, CallError>;
    /// Returns the length of `text`.
    fn measure(&self, text: &str) -> Result<u32, CallError>;
}
