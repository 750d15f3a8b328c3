//! `domos bench mem`: memory objects against the host's `memcpy` and against copying the same
//! bytes in a portal message.

use super::{Figure, baseline, measure, pick};

const ROUNDS: u64 = 200;

/// Runs the suite.
///
/// # Errors
/// When the measured system fails.
pub fn run() -> Result<Vec<Figure>, String> {
    let results = measure(&format!(
        "[system]\ncpus = 2\n\
         [[domain]]\nname = \"Inspector\"\nmax_message = \"2 MiB\"\n[[domain.component]]\nname = \"bench-mem\"\nargs = \"server\"\n\
         [[domain]]\nname = \"Client\"\nheap = \"32 MiB\"\nmax_message = \"2 MiB\"\n[[domain.component]]\nname = \"bench-mem\"\nargs = \"client {ROUNDS}\"\n"
    ))?;
    let memcpy = baseline::memcpy_round_trip(1 << 20, ROUNDS as u32);
    let pass_copy = pick(&results, "pass_1m_copy")?;
    Ok(vec![
        Figure {
            name: "memobj_copy_1m",
            unit: "ns",
            value: pick(&results, "memobj_copy_1m")?,
            baseline: "host_memcpy_1m",
            baseline_value: memcpy,
            what: "1 MiB from a component's heap into a memory object and back",
        },
        Figure {
            name: "memobj_typed_access",
            unit: "ns",
            value: pick(&results, "memobj_typed_access")?,
            baseline: "memobj_copy_1m",
            baseline_value: pick(&results, "memobj_copy_1m")? / (1 << 20) as f64 * 4.0,
            what: "one u32 read through the kernel (baseline: 4 bytes' share of the bulk copy)",
        },
        Figure {
            name: "pass_1m_memobj",
            unit: "ns",
            value: pick(&results, "pass_1m_memobj")?,
            baseline: "pass_1m_copy",
            baseline_value: pass_copy,
            what: "passing 1 MiB to another domain as a memory object vs copied in the message",
        },
    ])
}
