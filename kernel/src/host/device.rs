//! Emulated devices: device memory and disks (grant `devices`, checked once when a component
//! is placed in a domain: see `domains.rs`).

use std::sync::Arc;

use domos_abi::{DiskCompletion, HostError};

use super::interrupt::attach_interrupt;
use super::memory::insert_memory;
use super::{Ctx, code};
use crate::domain::KernelObject;
use crate::domain::names::MAX_NAME;
use crate::domain::store::StoreCtx;
use crate::object::disk::Operation;
use crate::object::guest_memory::{self};

pub(super) fn disk_open(c: Ctx<'_>, ptr: u32, len: u32) -> i64 {
    let ctx = c.data();
    let disk = guest_memory::read_str(&ctx.instance.memory, ptr, len, MAX_NAME)
        .and_then(|name| ctx.kernel.disk(&name).ok_or(HostError::NotFound));
    code(disk.and_then(|d| ctx.domain.handles().insert(KernelObject::Disk(d))))
}

pub(super) fn disk_info(c: Ctx<'_>, handle: u32) -> i64 {
    code(with_disk(c.data(), handle).map(|d| d.sectors as i64))
}

pub(super) fn disk_submit(
    c: Ctx<'_>,
    handle: u32,
    operation: u32,
    sector: u64,
    count: u32,
    memory: u32,
    offset: u64,
) -> i64 {
    let ctx = c.data();
    let Some(operation) = Operation::from_code(operation) else {
        return HostError::InvalidArgument as i64;
    };
    let memory = match operation {
        Operation::Flush => None,
        _ => match ctx.domain.handles().memory(memory) {
            Ok(memory) => Some(memory.clone()),
            Err(e) => return e as i64,
        },
    };
    code(with_disk(ctx, handle).and_then(|d| d.submit(operation, sector, count, memory, offset)).map(|id| id as i64))
}

pub(super) fn disk_complete(c: Ctx<'_>, handle: u32) -> i64 {
    let done = with_disk(c.data(), handle).and_then(|d| d.complete().ok_or(HostError::NotFound));
    code(done.map(|(id, ok)| DiskCompletion { id, failed: !ok }.encode()))
}

pub(super) fn disk_attach_interrupt(c: Ctx<'_>, handle: u32) -> i64 {
    let ctx = c.data();
    code(with_disk(ctx, handle).and_then(|disk| attach_interrupt(ctx, |source| disk.attach(source.clone()))))
}

pub(super) fn memory_device(c: Ctx<'_>, ptr: u32, len: u32) -> i64 {
    let ctx = c.data();
    let device = guest_memory::read_str(&ctx.instance.memory, ptr, len, MAX_NAME)
        .and_then(|name| ctx.kernel.device(&name).ok_or(HostError::NotFound));
    insert_memory(ctx, device)
}

/// The disk behind a handle of the caller's domain.
fn with_disk(ctx: &StoreCtx, handle: u32) -> Result<Arc<crate::object::disk::Disk>, HostError> {
    ctx.domain.handles().disk(handle).cloned()
}

#[cfg(test)]
mod tests {
    use domos_abi::HostError::*;

    use crate::test_system::{System, component, main};

    #[test]
    fn each_holder_of_device_memory_gets_a_view_of_its_own() {
        let body = format!(
            r#"(data (i32.const 1024) "fb0") (data (i32.const 1030) "fb1") {}"#,
            main(
                "(local $a i32) (local $b i32)
                 (local.set $a (i32.wrap_i64 (call $memory_device (i32.const 1024) (i32.const 3))))
                 (local.set $b (i32.wrap_i64 (call $memory_device (i32.const 1024) (i32.const 3))))
                 (i64.store (i32.const 0) (call $memory_info (local.get $a)))
                 (i64.store (i32.const 8) (call $memory_set_u32 (local.get $a) (i64.const 4) (i32.const 0xfeed)))
                 (i64.store (i32.const 16) (call $memory_device (i32.const 1030) (i32.const 3)))
                 (drop (call $memory_revoke (local.get $a)))
                 (i64.store (i32.const 24) (call $memory_get_u32 (local.get $a) (i64.const 4)))
                 (i64.store (i32.const 32) (call $memory_get_u32 (local.get $b) (i64.const 4)))",
            )
        );
        let system = System::boot(
            &[component("c", "", &body)],
            "[[device]]\nname = \"fb0\"\nsize = 4096\n\
             [[domain]]\nname = \"D\"\ngrants = [\"devices\"]\n[[domain.component]]\nname = \"c\"\n",
        );
        let code = |e: domos_abi::HostError| e as i64;
        // 4096 bytes, device, writable; no device fb1; the revoker's old view is gone, the other
        // view still sees the device.
        assert_eq!(system.results("D", 5), [4096 << 2 | 2 | 1, 0, code(NotFound), code(Revoked), 0xfeed]);
        assert_eq!(system.kernel.device_bytes("fb0", 8).unwrap(), [0, 0, 0, 0, 0xed, 0xfe, 0, 0]);
        assert_eq!(system.domain("D").heap_used(), 3 * 65536, "device memory is charged to no domain");
    }
}
