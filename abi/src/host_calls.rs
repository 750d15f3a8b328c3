//! Every kernel host call, declared once.
//!
//! [`for_each_host_call!`](crate::for_each_host_call) hands the list to a macro of the caller's
//! choosing, and everything else follows from it: the kernel registers its implementations
//! (`kernel/src/host/`, one function per call, found by family and name), the guest's raw
//! `extern` declarations are generated (`sdk/sys`), the loader checks imports and their types
//! against [`HOST_CALLS`] and takes the calls a bounded function may make from it, and the index
//! of `docs/reference/host-calls.md` is rendered from it ([`render_index`], checked by a test).
//!
//! An entry reads `family: name(parameters) -> result, grant, [flags], "summary";`. The family is
//! the kernel module that implements the call. Flags: `waits` — the call may suspend the calling
//! thread (a service thread, which never blocks, gets an immediate answer instead); `bounded` —
//! the call never blocks and does work bounded by kernel limits, so a verified bounded function
//! (an interrupt handler) may make it.

/// A class of host calls that a configuration grants to a domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Grant {
    /// Console, clock, yield, heap, portals, names, threads, memory objects: every domain has these.
    Basic,
    /// Creating, terminating and inspecting child domains.
    Domains,
    /// Opening emulated disks and network cards and obtaining the memory of emulated devices.
    Devices,
    /// Replacing schedulers at run time: the domain's own and the global one.
    Scheduling,
}

impl Grant {
    /// Every grant, in the order of the reference page.
    pub const ALL: [Grant; 4] = [Grant::Basic, Grant::Domains, Grant::Devices, Grant::Scheduling];

    /// The name used in configurations (`grants = ["devices"]`).
    pub const fn name(self) -> &'static str {
        match self {
            Grant::Basic => "basic",
            Grant::Domains => "domains",
            Grant::Devices => "devices",
            Grant::Scheduling => "scheduling",
        }
    }

    /// The grant called `name`.
    pub fn named(name: &str) -> Option<Grant> {
        Grant::ALL.into_iter().find(|g| g.name() == name)
    }
}

/// A wasm value type of a host call's parameter or result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueType {
    /// `i32`, which carries `u32` and `i32` values and guest addresses.
    I32,
    /// `i64`, which carries `u64` values and every result that may be an error code.
    I64,
}

impl ValueType {
    /// The wasm text name.
    pub const fn name(self) -> &'static str {
        match self {
            ValueType::I32 => "i32",
            ValueType::I64 => "i64",
        }
    }
}

/// The integer type a host call or entry point declares for a parameter or result: what a guest
/// language passes, which says more than the wasm type that carries it (whether it is signed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntType {
    /// `u32`: an unsigned 32-bit value, such as a handle, a length or a guest address.
    U32,
    /// `i32`: a signed 32-bit value.
    I32,
    /// `u64`: an unsigned 64-bit value.
    U64,
    /// `i64`: a signed 64-bit value, such as a result that may be a negative `HostError` code.
    I64,
}

impl IntType {
    /// The wasm type that carries it.
    pub const fn wasm(self) -> ValueType {
        match self {
            IntType::U32 | IntType::I32 => ValueType::I32,
            IntType::U64 | IntType::I64 => ValueType::I64,
        }
    }

    /// The Rust type, as written in the table.
    pub const fn rust_name(self) -> &'static str {
        match self {
            IntType::U32 => "u32",
            IntType::I32 => "i32",
            IntType::U64 => "u64",
            IntType::I64 => "i64",
        }
    }

    /// The C type of `<stdint.h>`.
    pub const fn c_name(self) -> &'static str {
        match self {
            IntType::U32 => "uint32_t",
            IntType::I32 => "int32_t",
            IntType::U64 => "uint64_t",
            IntType::I64 => "int64_t",
        }
    }
}

/// One host call.
#[derive(Debug, Clone, Copy)]
pub struct HostCall {
    /// The import name in the [`HOST_MODULE`](crate::HOST_MODULE) module.
    pub name: &'static str,
    /// The kernel module that implements it.
    pub family: &'static str,
    /// What a domain needs to be granted to import it.
    pub grant: Grant,
    /// Whether it may suspend the calling thread.
    pub waits: bool,
    /// Whether a verified bounded function may call it.
    pub bounded: bool,
    /// Parameter names and types.
    pub params: &'static [(&'static str, IntType)],
    /// The result type, if any.
    pub result: Option<IntType>,
    /// One line for people.
    pub summary: &'static str,
}

impl HostCall {
    /// The call called `name`.
    pub fn named(name: &str) -> Option<&'static HostCall> {
        HOST_CALLS.iter().find(|c| c.name == name)
    }

    /// Whether `params` and `results` (wasm types of an import) are this call's.
    pub fn has_type(&self, params: &[ValueType], results: &[ValueType]) -> bool {
        self.params.len() == params.len()
            && self.params.iter().zip(params).all(|((_, t), p)| t.wasm() == *p)
            && match self.result {
                Some(r) => results == [r.wasm()],
                None => results.is_empty(),
            }
    }
}

/// Calls `$callback!` with the list of every host call (see the module documentation for the
/// form of an entry). Parameter and result types are Rust's `u32`, `i32`, `u64` and `i64`.
#[macro_export]
macro_rules! for_each_host_call {
    ($callback:path) => {
        $callback! {
            console: console_write(ptr: u32, len: u32), Basic, [],
                "Writes a line of UTF-8 text at `ptr` to the console, prefixed with the domain's name.";
            console: clock_ns() -> i64, Basic, [bounded],
                "Nanoseconds of the kernel's monotonic clock.";
            console: args(ptr: u32, cap: u32) -> i64, Basic, [],
                "Copies the component's configured `args`, a list encoded as `[len: u32][bytes]` per item, to `ptr`; returns the whole length.";
            heap: heap_grow(pages: u32) -> i64, Basic, [],
                "Grows the component's heap by 64 KiB pages, charged to the domain's quota.";
            heap: message_buffer() -> i64, Basic, [],
                "The calling thread's message buffer: capacity in the high 32 bits, address in the low.";
            portal: portal_call(handle: u32, method: u32, len: u32) -> i64, Basic, [],
                "Calls a service with the request in the message buffer; the reply replaces it.";
            portal: portal_call_waiting(handle: u32, method: u32, len: u32) -> i64, Basic, [waits],
                "A portal call that may wait: for a busy service, or inside a service that waits.";
            portal: portal_call_restartable(handle: u32, method: u32, len: u32) -> i64, Basic, [],
                "A portal call of a method that can be started again, run at once even in a service that may wait; `MustWait` if it would wait.";
            portal: portal_wait(handle: u32) -> i64, Basic, [waits],
                "Waits until the service behind a portal has a free service thread.";
            portal: portal_local(handle: u32) -> i64, Basic, [],
                "The object number of a portal served by the calling component instance itself.";
            portal: service_create(object: u32, interface: u32) -> i64, Basic, [],
                "Makes a portal to object `object` of the calling instance, implementing `interface`.";
            handle: handle_drop(handle: u32) -> i64, Basic, [bounded],
                "Drops a handle of the calling domain.";
            handle: handle_dup(handle: u32) -> i64, Basic, [],
                "A second handle to the same object.";
            names: name_register(ptr: u32, len: u32, handle: u32) -> i64, Basic, [],
                "Publishes a portal under a name (translated by the configuration's `register`).";
            names: name_lookup(ptr: u32, len: u32, interface: u32) -> i64, Basic, [],
                "A portal to the service registered under a name (translated by `bind`).";
            thread: yield_now(), Basic, [waits],
                "Lets the domain's other runnable threads run first.";
            thread: thread_spawn(arg: u32) -> i64, Basic, [],
                "Starts a thread of the domain running `domos_thread_entry(arg)`.";
            thread: thread_join(thread: u32) -> i64, Basic, [waits],
                "Waits for a thread of the domain to end; returns its exit code.";
            thread: thread_sleep(ns: u64) -> i64, Basic, [waits],
                "Suspends the calling thread for `ns` nanoseconds.";
            thread: thread_priority(thread: u32, priority: i32) -> i64, Basic, [],
                "Sets the priority a `priority` local scheduler orders a thread by.";
            atomic: atomic_create(value: u32) -> i64, Basic, [],
                "Creates an AtomicVariable holding `value`.";
            atomic: atomic_get(handle: u32) -> i64, Basic, [bounded],
                "The value of an AtomicVariable.";
            atomic: atomic_set(handle: u32, value: u32) -> i64, Basic, [bounded],
                "Sets an AtomicVariable.";
            atomic: atomic_set_and_unblock(handle: u32, value: u32, count: u32) -> i64, Basic, [bounded],
                "Sets an AtomicVariable and wakes up to `count` of its waiters.";
            atomic: atomic_block_if_equal(handle: u32, expected: u32) -> i64, Basic, [waits],
                "Waits while an AtomicVariable holds `expected`.";
            interrupt: timer_attach(period_ns: u64) -> i64, Basic, [],
                "A periodic timer interrupt handled by the component's bounded `domos_interrupt`.";
            interrupt: interrupt_detach(source: u32) -> i64, Basic, [],
                "Closes an interrupt source; its handler thread ends.";
            memory: memory_create(len: u64) -> i64, Basic, [],
                "A new zeroed memory object of `len` bytes, charged to the domain.";
            memory: memory_info(handle: u32) -> i64, Basic, [],
                "A memory object's length, device flag and writability.";
            memory: memory_read(handle: u32, offset: u64, dst: u32, len: u32) -> i64, Basic, [],
                "Copies bytes of a memory object into the component's heap.";
            memory: memory_write(handle: u32, offset: u64, src: u32, len: u32) -> i64, Basic, [],
                "Copies bytes of the component's heap into a memory object.";
            memory: memory_get_u32(handle: u32, offset: u64) -> i64, Basic, [],
                "Reads one little-endian `u32` of a memory object.";
            memory: memory_set_u32(handle: u32, offset: u64, value: u32) -> i64, Basic, [],
                "Writes one little-endian `u32` of a memory object.";
            memory: memory_copy(dst: u32, dst_offset: u64, src: u32, src_offset: u64, len: u64) -> i64, Basic, [],
                "Copies bytes from one memory object to another.";
            memory: memory_gather(dst: u32, dst_offset: u64, pieces: u32, count: u32) -> i64, Basic, [],
                "Copies up to 32 pieces of memory objects one after another into a memory object; returns how many it copied.";
            memory: memory_subrange(handle: u32, offset: u64, len: u64) -> i64, Basic, [],
                "A view of part of a memory object.";
            memory: memory_read_only(handle: u32) -> i64, Basic, [],
                "A read-only view of a memory object.";
            memory: memory_revoke(handle: u32) -> i64, Basic, [],
                "Revokes every copy of a view and what was derived from it; returns a fresh view.";
            memory: memory_lend(ptr: u32, len: u32) -> i64, Basic, [],
                "Lends part of the component's heap as a writable memory object, until `memory_end_lend`.";
            memory: memory_end_lend(handle: u32) -> i64, Basic, [],
                "Ends a loan of heap: every view of it is revoked, after any copy under way.";
            device: memory_device(ptr: u32, len: u32) -> i64, Devices, [],
                "A view of the memory of the emulated device called by the name at `ptr`.";
            device: disk_open(ptr: u32, len: u32) -> i64, Devices, [],
                "Opens the emulated disk called by the name at `ptr`.";
            device: disk_info(handle: u32) -> i64, Devices, [],
                "The number of 512-byte sectors of a disk.";
            device: disk_submit(handle: u32, operation: u32, sector: u64, count: u32, memory: u32, offset: u64) -> i64, Devices, [],
                "Queues a read, write or flush between a disk and a memory object; returns its id.";
            device: disk_complete(handle: u32) -> i64, Devices, [bounded],
                "The next completed request of a disk: its id and whether it failed.";
            device: disk_attach_interrupt(handle: u32) -> i64, Devices, [],
                "Delivers a disk's completions to the component's bounded `domos_interrupt`.";
            nic: nic_open(ptr: u32, len: u32) -> i64, Devices, [],
                "Opens the emulated network card called by the name at `ptr`.";
            nic: nic_info(handle: u32, what: u32) -> i64, Devices, [],
                "A card's MTU (0), MAC (1), frames received (2), dropped (3) or sent (4).";
            nic: nic_attach(handle: u32, rx: u32, tx: u32, slot: u32) -> i64, Devices, [],
                "Attaches a card's receive and transmit rings, memory objects cut into `slot`-byte slots; returns the receive ring's slots.";
            nic: nic_transmit(handle: u32, first: u32, count: u32) -> i64, Devices, [],
                "Sends the frames of `count` transmit slots from slot `first` on.";
            nic: nic_ready(handle: u32) -> i64, Devices, [bounded],
                "How many receive slots hold frames, from the oldest unreleased one on.";
            nic: nic_release(handle: u32, count: u32) -> i64, Devices, [bounded],
                "Gives the `count` oldest receive slots back to the card.";
            nic: nic_attach_interrupt(handle: u32) -> i64, Devices, [],
                "Delivers a card's received frames to the component's bounded `domos_interrupt`.";
            nic: nic_notify(handle: u32, atomic: u32, value: u32) -> i64, Devices, [],
                "Sets atomic variable `atomic` to `value` and wakes one of its waiters whenever frames arrive at a card, with no handler thread.";
            fuse: fuse_open(ptr: u32, len: u32) -> i64, Devices, [],
                "Opens the mounted FUSE connection called by the name at `ptr`.";
            fuse: fuse_attach(handle: u32, rx: u32, slot: u32) -> i64, Devices, [],
                "Attaches a FUSE connection's receive ring, a memory object cut into `slot`-byte slots.";
            fuse: fuse_ready(handle: u32) -> i64, Devices, [bounded],
                "How many slots hold requests, plus `FUSE_STOPPED` once the connection reads no more.";
            fuse: fuse_release(handle: u32, count: u32) -> i64, Devices, [bounded],
                "Gives the `count` oldest receive slots back to the FUSE connection.";
            fuse: fuse_reply(handle: u32, memory: u32, offset: u64, len: u32) -> i64, Devices, [],
                "Writes `len` bytes of a memory object from `offset` to the FUSE connection as one reply.";
            fuse: fuse_attach_interrupt(handle: u32) -> i64, Devices, [],
                "Delivers a FUSE connection's arriving requests to the component's bounded `domos_interrupt`.";
            scheduling: scheduler_replace(target: u32, slice_ms: u32, ptr: u32, len: u32) -> i64, Scheduling, [],
                "Replaces the domain's own (0) or the global (1) scheduler by a built-in one or a component.";
            domains: domain_create(ptr: u32, len: u32, fault_handler: u32) -> i64, Domains, [],
                "Creates a paused child domain from a `[[domain]]` table in TOML.";
            domains: domain_provide(child: u32, ptr: u32, len: u32, portal: u32) -> i64, Domains, [],
                "Hands a portal down to a child under a name of the child's namespace.";
            domains: domain_start(child: u32) -> i64, Domains, [],
                "Starts a child: each component runs `init`, then `main`.";
            domains: domain_wait(handle: u32) -> i64, Domains, [waits],
                "Waits until a domain has no threads left or is terminated.";
            domains: domain_terminate(handle: u32) -> i64, Domains, [],
                "Terminates a domain and its children.";
            domains: domain_inspect(handle: u32, ptr: u32, cap: u32) -> i64, Domains, [],
                "Writes a domain's one-line report to `ptr`.";
        }
    };
}

/// The [`IntType`] of a Rust integer type in a host-call declaration.
#[doc(hidden)]
#[macro_export]
macro_rules! host_call_int_type {
    (u32) => {
        $crate::IntType::U32
    };
    (i32) => {
        $crate::IntType::I32
    };
    (u64) => {
        $crate::IntType::U64
    };
    (i64) => {
        $crate::IntType::I64
    };
}

macro_rules! table {
    ($($family:ident: $name:ident($($param:ident: $ty:ident),*) $(-> $result:ident)?, $grant:ident, [$($flag:ident)*], $summary:literal;)*) => {
        /// Every host call, in the order of the reference page.
        pub const HOST_CALLS: &[HostCall] = &[$(HostCall {
            name: stringify!($name),
            family: stringify!($family),
            grant: Grant::$grant,
            waits: flag!(waits, $($flag)*),
            bounded: flag!(bounded, $($flag)*),
            params: &[$((stringify!($param), $crate::host_call_int_type!($ty))),*],
            result: first!($($crate::host_call_int_type!($result))?),
            summary: $summary,
        }),*];
    };
}

/// Whether `$wanted` is among the flags.
macro_rules! flag {
    (waits, waits $($rest:ident)*) => { true };
    (bounded, bounded $($rest:ident)*) => { true };
    ($wanted:ident, $other:ident $($rest:ident)*) => { flag!($wanted, $($rest)*) };
    ($wanted:ident,) => { false };
}

/// `Some` of the expression, if there is one.
macro_rules! first {
    () => {
        None
    };
    ($e:expr) => {
        Some($e)
    };
}

crate::for_each_host_call!(table);

/// Writes the reference page's index of host calls: one table row per call, grouped by grant.
///
/// # Errors
/// Only those of `out`.
pub fn render_index(out: &mut impl core::fmt::Write) -> core::fmt::Result {
    for grant in Grant::ALL {
        writeln!(out, "\n**Grant `{}`**\n", grant.name())?;
        writeln!(out, "| call | signature | waits | bounded | what it does |")?;
        writeln!(out, "|---|---|---|---|---|")?;
        for call in HOST_CALLS.iter().filter(|c| c.grant == grant) {
            write!(out, "| [`{}`](#{}) | `(", call.name, call.name)?;
            for (i, (name, ty)) in call.params.iter().enumerate() {
                write!(out, "{}{name}: {}", if i == 0 { "" } else { ", " }, ty.wasm().name())?;
            }
            write!(out, ")")?;
            if let Some(result) = call.result {
                write!(out, " -> {}", result.wasm().name())?;
            }
            let mark = |b: bool| if b { "yes" } else { "" };
            writeln!(out, "` | {} | {} | {} |", mark(call.waits), mark(call.bounded), call.summary)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::string::String;

    #[test]
    fn names_are_unique_and_waiting_calls_are_not_bounded() {
        for (i, call) in HOST_CALLS.iter().enumerate() {
            assert!(HOST_CALLS[i + 1..].iter().all(|c| c.name != call.name), "{} is declared twice", call.name);
            assert!(!(call.waits && call.bounded), "{} cannot both wait and be bounded", call.name);
        }
        let clock = HostCall::named("clock_ns").unwrap();
        assert!(clock.bounded && clock.params.is_empty() && clock.result == Some(IntType::I64));
        assert!(clock.has_type(&[], &[ValueType::I64]));
        assert!(!clock.has_type(&[ValueType::I32], &[ValueType::I64]));
        let console = HostCall::named("console_write").unwrap();
        assert!(console.has_type(&[ValueType::I32, ValueType::I32], &[]));
        assert!(!console.has_type(&[ValueType::I32, ValueType::I32], &[ValueType::I64]));
        assert_eq!(HostCall::named("disk_submit").unwrap().grant, Grant::Devices);
        assert!(HostCall::named("fork").is_none());
        for grant in Grant::ALL {
            assert_eq!(Grant::named(grant.name()), Some(grant));
        }
    }

    /// The reference page's index is the rendering of the table, so the page cannot drift.
    #[test]
    fn reference_page_index_is_the_table() {
        const BEGIN: &str = "<!-- host-call index: generated from abi/src/host_calls.rs -->";
        const END: &str = "<!-- end of host-call index -->";
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/reference/host-calls.md");
        let page = std::fs::read_to_string(path).unwrap();
        let mut index = String::new();
        render_index(&mut index).unwrap();
        let (Some(begin), Some(end)) = (page.find(BEGIN), page.find(END)) else {
            panic!("{path} lacks the markers {BEGIN} and {END}");
        };
        let current = &page[begin + BEGIN.len()..end];
        let wanted = std::format!("\n{}\n", index.trim());
        if current != wanted {
            if std::env::var_os("DOMOS_BLESS").is_some() {
                let fixed = std::format!("{}{BEGIN}{wanted}{}", &page[..begin], &page[end..]);
                std::fs::write(path, fixed).unwrap();
            } else {
                panic!("the host-call index of {path} is stale: run `DOMOS_BLESS=1 cargo test -p domos-abi`");
            }
        }
    }
}
