//! The name service, with the configuration's wiring of names.

use domos_abi::HostError;

use super::{Ctx, code, wired};
use crate::domain::KernelObject;
use crate::domain::names::MAX_NAME;
use crate::object::guest_memory::{self};

pub(super) fn name_register(c: Ctx<'_>, ptr: u32, len: u32, handle: u32) -> i64 {
    let ctx = c.data();
    code(guest_memory::read_str(&ctx.instance.memory, ptr, len, MAX_NAME).and_then(|name| {
        let service = ctx.domain.handles().portal(handle)?.clone();
        ctx.kernel.names.register_for(&ctx.domain, wired(&ctx.instance.register, name), service).map(|()| 0)
    }))
}

pub(super) fn name_lookup(c: Ctx<'_>, ptr: u32, len: u32, interface: u32) -> i64 {
    let ctx = c.data();
    code(guest_memory::read_str(&ctx.instance.memory, ptr, len, MAX_NAME).and_then(|name| {
        let service = ctx.kernel.names.lookup_for(&ctx.domain, &wired(&ctx.instance.bind, name))?;
        // Interface 0 asks for any interface: a portal to be passed on, not called.
        if interface != 0 && service.interface != interface {
            return Err(HostError::WrongInterface);
        }
        ctx.domain.handles().insert(KernelObject::Portal(service))
    }))
}
