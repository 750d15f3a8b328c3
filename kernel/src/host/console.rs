//! The console, the clock and the component's arguments.

use super::{Ctx, code};
use crate::object::guest_memory::{self};

pub(super) fn console_write(c: Ctx<'_>, ptr: u32, len: u32) {
    let ctx = c.data();
    if let Ok(text) = guest_memory::read_str(&ctx.instance.memory, ptr, len.min(4096), 4096) {
        ctx.kernel.console.line(&ctx.domain.name, &text);
    }
}

pub(super) fn clock_ns(c: Ctx<'_>) -> i64 {
    c.data().kernel.clock_ns() as i64
}

pub(super) fn args(c: Ctx<'_>, ptr: u32, cap: u32) -> i64 {
    let ctx = c.data();
    let args = ctx.instance.args.as_bytes();
    let take = args.len().min(cap as usize);
    code(guest_memory::write(&ctx.instance.memory, ptr, &args[..take]).map(|()| args.len() as i64))
}
