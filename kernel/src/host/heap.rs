//! The component's heap and the calling thread's message buffer.

use super::{Ctx, code};

pub(super) fn heap_grow(c: Ctx<'_>, pages: u32) -> i64 {
    let ctx = c.data();
    code(ctx.instance.grow(&ctx.domain, u64::from(pages), &|bytes| ctx.kernel.charge(&ctx.domain, bytes)))
}

pub(super) fn message_buffer(c: Ctx<'_>) -> i64 {
    let region = c.data().region;
    (i64::from(region.buffer_len) << 32) | i64::from(region.buffer)
}
