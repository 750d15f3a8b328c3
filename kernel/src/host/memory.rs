//! Memory objects: creating, copying in and out, views, revocation (`crate::object::memory`).

use domos_abi::{GatherPiece, HostError};

use super::{Ctx, code};
use crate::domain::KernelObject;
use crate::domain::store::StoreCtx;
use crate::object::guest_memory::GuestView;
use crate::object::memory::{Block, MemoryObject};

pub(super) fn memory_create(c: Ctx<'_>, len: u64) -> i64 {
    let ctx = c.data();
    let charge = |bytes| ctx.kernel.charge(&ctx.domain, bytes);
    let block = Block::new(ctx.kernel.memory_engine(), len, Some((ctx.domain.quota(), &charge)));
    insert_memory(ctx, block.map(|b| MemoryObject::whole(b, len, false)))
}

pub(super) fn memory_info(c: Ctx<'_>, handle: u32) -> i64 {
    code(with_memory_locked(c.data(), handle, |mem| {
        Ok(((mem.len() as i64) << 2) | (i64::from(mem.is_device()) << 1) | i64::from(mem.is_writable()))
    }))
}

pub(super) fn memory_read(c: Ctx<'_>, handle: u32, offset: u64, dst: u32, len: u32) -> i64 {
    let ctx = c.data();
    code(with_memory(ctx, handle, |mem| {
        mem.read_into(offset, &GuestView::of(&ctx.instance.memory), dst, u64::from(len)).map(|()| 0)
    }))
}

pub(super) fn memory_write(c: Ctx<'_>, handle: u32, offset: u64, src: u32, len: u32) -> i64 {
    let ctx = c.data();
    code(with_memory(ctx, handle, |mem| {
        mem.write_from(offset, &GuestView::of(&ctx.instance.memory), src, u64::from(len)).map(|()| 0)
    }))
}

pub(super) fn memory_get_u32(c: Ctx<'_>, handle: u32, offset: u64) -> i64 {
    code(with_memory_locked(c.data(), handle, |mem| mem.get_u32(offset).map(i64::from)))
}

pub(super) fn memory_set_u32(c: Ctx<'_>, handle: u32, offset: u64, value: u32) -> i64 {
    code(with_memory_locked(c.data(), handle, |mem| mem.set_u32(offset, value).map(|()| 0)))
}

pub(super) fn memory_copy(c: Ctx<'_>, dst: u32, dst_offset: u64, src: u32, src_offset: u64, len: u64) -> i64 {
    let ctx = c.data();
    let source = ctx.domain.handles().memory(src).cloned();
    code(source.and_then(|source| {
        with_memory(ctx, dst, |mem| mem.copy_from(dst_offset, &source, src_offset, len).map(|()| 0))
    }))
}

pub(super) fn memory_gather(c: Ctx<'_>, dst: u32, dst_offset: u64, pieces: u32, count: u32) -> i64 {
    let ctx = c.data();
    code(gather(ctx, dst, dst_offset, pieces, count))
}

/// `memory_gather`: copies the pieces in order until one fails; how many it copied. The handle
/// table stays locked while copying, which saves taking a reference to every object (the copies
/// of one call take microseconds; the domain's other threads wait for the table meanwhile).
fn gather(ctx: &StoreCtx, dst: u32, dst_offset: u64, pieces: u32, count: u32) -> Result<i64, HostError> {
    let mut list = [0u8; GatherPiece::MAX * GatherPiece::BYTES];
    let list = list.get_mut(..count as usize * GatherPiece::BYTES).ok_or(HostError::InvalidArgument)?;
    GuestView::of(&ctx.instance.memory).read(pieces, list)?;
    let table = ctx.domain.handles();
    let target = table.memory(dst)?;
    let pieces = list.as_chunks::<{ GatherPiece::BYTES }>().0.iter().map(GatherPiece::decode);
    // The first piece whose source is no memory object ends the list.
    let pieces = pieces.map_while(|p| Some((table.memory(p.source).ok()?, p.offset, p.len)));
    Ok(target.gather_from(dst_offset, pieces) as i64)
}

pub(super) fn memory_subrange(c: Ctx<'_>, handle: u32, offset: u64, len: u64) -> i64 {
    let ctx = c.data();
    insert_memory(ctx, with_memory(ctx, handle, |mem| mem.subrange(offset, len)))
}

pub(super) fn memory_read_only(c: Ctx<'_>, handle: u32) -> i64 {
    let ctx = c.data();
    insert_memory(ctx, with_memory(ctx, handle, MemoryObject::read_only))
}

pub(super) fn memory_lend(c: Ctx<'_>, ptr: u32, len: u32) -> i64 {
    let ctx = c.data();
    insert_memory(ctx, MemoryObject::lent(&ctx.instance.memory, ptr, len))
}

pub(super) fn memory_end_lend(c: Ctx<'_>, handle: u32) -> i64 {
    // Outside the handle table's lock: the end waits for a copy under way.
    code(with_memory(c.data(), handle, |mem| mem.end_loan().map(|()| 0)))
}

pub(super) fn memory_revoke(c: Ctx<'_>, handle: u32) -> i64 {
    let ctx = c.data();
    // Revoke only when the fresh handle is sure to fit, or the caller would lose all access.
    let mut table = ctx.domain.handles();
    let fresh =
        table.memory(handle).and_then(|m| if table.has_room() { m.revoke() } else { Err(HostError::QuotaExceeded) });
    code(fresh.and_then(|m| table.insert(KernelObject::Memory(m))))
}

/// Looks up a memory object of the calling domain and applies `op` to it outside the handle
/// table's lock (for operations that may take long: bulk copies).
fn with_memory<R>(
    ctx: &StoreCtx,
    handle: u32,
    op: impl FnOnce(&MemoryObject) -> Result<R, HostError>,
) -> Result<R, HostError> {
    let memory = ctx.domain.handles().memory(handle)?.clone();
    op(&memory)
}

/// Applies a short `op` (a typed access) to a memory object under the handle table's lock,
/// which saves cloning the object's references.
fn with_memory_locked<R>(
    ctx: &StoreCtx,
    handle: u32,
    op: impl FnOnce(&MemoryObject) -> Result<R, HostError>,
) -> Result<R, HostError> {
    op(ctx.domain.handles().memory(handle)?)
}

/// Stores a new memory object in the calling domain's handle table.
pub(super) fn insert_memory(ctx: &StoreCtx, memory: Result<MemoryObject, HostError>) -> i64 {
    code(memory.and_then(|m| ctx.domain.handles().insert(KernelObject::Memory(m))))
}

#[cfg(test)]
mod tests {
    use domos_abi::HostError::*;

    use crate::test_system::{System, component};

    /// Boots one domain `D` (heap 4 MiB) whose `main` is `body`; returns its `count` results.
    fn run(body: &str, count: usize) -> Vec<i64> {
        let main = format!("(func (export \"domos_main\") (result i32) {body} i32.const 0)");
        let system = System::boot(
            &[component("c", "", &format!("(data (i32.const 1024) \"hello\") {main}"))],
            "[[domain]]\nname = \"D\"\nheap = \"4 MiB\"\n[[domain.component]]\nname = \"c\"\n",
        );
        assert_eq!(system.domain("D").termination_reason(), None);
        system.results("D", count)
    }

    #[test]
    fn memory_info_tells_length_device_and_writability_and_sizes_are_checked() {
        let results = run(
            "(local $m i32)
             (local.set $m (i32.wrap_i64 (call $memory_create (i64.const 100))))
             (i64.store (i32.const 0) (call $memory_info (local.get $m)))
             (i64.store (i32.const 8) (call $memory_info (i32.wrap_i64 (call $memory_read_only (local.get $m)))))
             (i64.store (i32.const 16)
               (call $memory_info (i32.wrap_i64 (call $memory_subrange (local.get $m) (i64.const 10) (i64.const 20)))))
             (i64.store (i32.const 24) (call $memory_create (i64.const 0)))
             (i64.store (i32.const 32) (call $memory_create (i64.const 0x40000001)))
             (i64.store (i32.const 40) (call $memory_create (i64.const 0x800000)))
             (i64.store (i32.const 48) (call $memory_info (i32.const 0x7fff0001)))
             (i64.store (i32.const 56) (call $memory_subrange (local.get $m) (i64.const 90) (i64.const 11)))
             (i64.store (i32.const 64) (call $memory_subrange (local.get $m) (i64.const -1) (i64.const 2)))",
            9,
        );
        let code = |e: domos_abi::HostError| e as i64;
        assert_eq!(
            results,
            [
                100 << 2 | 1, // writable, not a device
                100 << 2,     // read-only
                20 << 2 | 1,  // a writable subrange of 20 bytes
                code(InvalidArgument),
                code(InvalidArgument), // 1 GiB + 1
                code(QuotaExceeded),   // 8 MiB in a 4 MiB domain
                code(InvalidHandle),
                code(InvalidArgument),
                code(InvalidArgument),
            ]
        );
    }

    #[test]
    fn reads_and_writes_copy_between_the_heap_and_the_object_within_both() {
        let system = System::boot(
            &[component(
                "c",
                "",
                r#"(data (i32.const 1024) "hello")
                (func (export "domos_main") (result i32)
                  (local $m i32) (local $ro i32)
                  (local.set $m (i32.wrap_i64 (call $memory_create (i64.const 16))))
                  (i64.store (i32.const 0) (call $memory_write (local.get $m) (i64.const 3) (i32.const 1024) (i32.const 5)))
                  (i64.store (i32.const 8) (call $memory_read (local.get $m) (i64.const 3) (i32.const 2048) (i32.const 5)))
                  (i64.store (i32.const 16) (call $memory_get_u32 (local.get $m) (i64.const 3)))
                  (i64.store (i32.const 24) (call $memory_write (local.get $m) (i64.const 12) (i32.const 1024) (i32.const 5)))
                  (i64.store (i32.const 32)
                    (call $memory_write (local.get $m) (i64.const 0) (i32.const 0xfffffff0) (i32.const 5)))
                  (i64.store (i32.const 40)
                    (call $memory_read (local.get $m) (i64.const 0) (i32.const 0xfffffffe) (i32.const 4)))
                  (local.set $ro (i32.wrap_i64 (call $memory_read_only (local.get $m))))
                  (i64.store (i32.const 48) (call $memory_set_u32 (local.get $ro) (i64.const 0) (i32.const 1)))
                  (i64.store (i32.const 56) (call $memory_write (local.get $ro) (i64.const 0) (i32.const 1024) (i32.const 1)))
                  (i64.store (i32.const 64) (call $memory_set_u32 (local.get $m) (i64.const 12) (i32.const 0xdeadbeef)))
                  (i64.store (i32.const 72) (call $memory_get_u32 (local.get $ro) (i64.const 12)))
                  (i64.store (i32.const 80) (call $memory_set_u32 (local.get $m) (i64.const 13) (i32.const 1)))
                  (i64.store (i32.const 88) (call $memory_read (local.get $m) (i64.const 0) (i32.const 4096) (i32.const 17)))
                  i32.const 0)"#,
            )],
            "[[domain]]\nname = \"D\"\n[[domain.component]]\nname = \"c\"\n",
        );
        let code = |e: domos_abi::HostError| e as i64;
        assert_eq!(
            system.results("D", 12),
            [
                0,
                0,
                i64::from(u32::from_le_bytes(*b"hell")),
                code(InvalidArgument), // past the object's end
                code(InvalidArgument), // source outside the heap
                code(InvalidArgument), // destination outside the heap
                code(ReadOnly),
                code(ReadOnly),
                0,
                0xdead_beef, // seen through the read-only view
                code(InvalidArgument),
                code(InvalidArgument),
            ]
        );
        assert_eq!(system.heap("D", 2048, 6), b"hello\0");
        assert!(system.heap("D", 4096, 17).iter().all(|b| *b == 0), "a refused read writes nothing");
    }

    #[test]
    fn revoking_returns_a_fresh_handle_and_takes_derived_views_but_not_the_parent() {
        let results = run(
            "(local $m i32) (local $sub i32) (local $fresh_sub i32) (local $fresh i32) (local $other i32)
             (local.set $m (i32.wrap_i64 (call $memory_create (i64.const 64))))
             (drop (call $memory_set_u32 (local.get $m) (i64.const 0) (i32.const 7)))
             (local.set $sub (i32.wrap_i64 (call $memory_subrange (local.get $m) (i64.const 0) (i64.const 32))))
             (local.set $fresh_sub (i32.wrap_i64 (call $memory_revoke (local.get $sub))))
             (i64.store (i32.const 0)
               (i64.extend_i32_u (i32.and (i32.gt_s (local.get $fresh_sub) (i32.const 0))
                                          (i32.ne (local.get $fresh_sub) (local.get $sub)))))
             (i64.store (i32.const 8) (call $memory_get_u32 (local.get $sub) (i64.const 0)))
             (i64.store (i32.const 16) (call $memory_get_u32 (local.get $m) (i64.const 0)))
             (i64.store (i32.const 24) (call $memory_revoke (local.get $sub)))
             (local.set $fresh (i32.wrap_i64 (call $memory_revoke (local.get $m))))
             (i64.store (i32.const 32) (call $memory_get_u32 (local.get $fresh_sub) (i64.const 0)))
             (i64.store (i32.const 40) (call $memory_get_u32 (local.get $fresh) (i64.const 0)))
             (local.set $other (i32.wrap_i64 (call $memory_create (i64.const 8))))
             (i64.store (i32.const 48)
               (call $memory_copy (local.get $other) (i64.const 0) (local.get $fresh) (i64.const 0) (i64.const 4)))
             (i64.store (i32.const 56) (call $memory_get_u32 (local.get $other) (i64.const 0)))
             (i64.store (i32.const 64)
               (call $memory_copy (local.get $other) (i64.const 0) (i32.const 0x7fff0001) (i64.const 0) (i64.const 4)))
             (i64.store (i32.const 72)
               (call $memory_copy (local.get $other) (i64.const 6) (local.get $fresh) (i64.const 0) (i64.const 4)))
             (i64.store (i32.const 80)
               (call $memory_copy (local.get $other) (i64.const 0) (local.get $m) (i64.const 0) (i64.const 4)))",
            11,
        );
        let code = |e: domos_abi::HostError| e as i64;
        assert_eq!(
            results,
            [
                1, // a new handle
                code(Revoked),
                7, // the parent is untouched
                code(Revoked),
                code(Revoked), // the fresh subrange went with its parent
                7,
                0,
                7,
                code(InvalidHandle),
                code(InvalidArgument),
                code(Revoked), // from the revoked handle
            ]
        );
    }

    #[test]
    fn a_gather_copies_its_pieces_in_order_until_one_fails() {
        // Pieces at 2048, 20 bytes each: source handle, offset, length.
        let piece = |k: u32, source: &str, offset: u64, len: u64| {
            let at = 2048 + 20 * k;
            format!(
                "(i32.store (i32.const {at}) {source})
                 (i64.store (i32.const {}) (i64.const {offset}))
                 (i64.store (i32.const {}) (i64.const {len}))",
                at + 4,
                at + 12
            )
        };
        let pieces = [
            piece(0, "(local.get $m)", 0, 4),
            piece(1, "(local.get $ro)", 8, 4),
            piece(2, "(i32.const 0x7fff0001)", 0, 4),
            // A loan of the heap's "hello" at 1024, then an object of its own.
            piece(3, "(local.get $lent)", 0, 5),
            piece(4, "(local.get $m)", 8, 4),
        ]
        .join("\n");
        let results = run(
            &format!(
                "(local $m i32) (local $ro i32) (local $dst i32) (local $lent i32)
                 (local.set $m (i32.wrap_i64 (call $memory_create (i64.const 64))))
                 (drop (call $memory_set_u32 (local.get $m) (i64.const 0) (i32.const 7)))
                 (drop (call $memory_set_u32 (local.get $m) (i64.const 8) (i32.const 9)))
                 (local.set $ro (i32.wrap_i64 (call $memory_read_only (local.get $m))))
                 (local.set $dst (i32.wrap_i64 (call $memory_create (i64.const 12))))
                 (local.set $lent (i32.wrap_i64 (call $memory_lend (i32.const 1024) (i32.const 5))))
                 {pieces}
                 (i64.store (i32.const 0) (call $memory_gather (local.get $dst) (i64.const 0) (i32.const 2048) (i32.const 3)))
                 (i64.store (i32.const 8) (call $memory_get_u32 (local.get $dst) (i64.const 0)))
                 (i64.store (i32.const 16) (call $memory_get_u32 (local.get $dst) (i64.const 4)))
                 (i64.store (i32.const 24) (call $memory_gather (local.get $dst) (i64.const 6) (i32.const 2048) (i32.const 2)))
                 (i64.store (i32.const 32) (call $memory_gather (local.get $ro) (i64.const 0) (i32.const 2048) (i32.const 1)))
                 (i64.store (i32.const 40) (call $memory_gather (i32.const 0x7fff0001) (i64.const 0) (i32.const 2048) (i32.const 1)))
                 (i64.store (i32.const 48) (call $memory_gather (local.get $dst) (i64.const 0) (i32.const 2048) (i32.const 33)))
                 (i64.store (i32.const 56) (call $memory_gather (local.get $dst) (i64.const 0) (i32.const -8) (i32.const 1)))
                 (i64.store (i32.const 64) (call $memory_gather (local.get $dst) (i64.const 0) (i32.const 2048) (i32.const 0)))
                 (i64.store (i32.const 72) (call $memory_gather (local.get $dst) (i64.const 1) (i32.const 2108) (i32.const 2)))
                 (i64.store (i32.const 80) (call $memory_get_u32 (local.get $dst) (i64.const 1)))
                 (i64.store (i32.const 88) (call $memory_get_u32 (local.get $dst) (i64.const 6)))
                 (i64.store (i32.const 96) (call $memory_gather (local.get $lent) (i64.const 1) (i32.const 2048) (i32.const 1)))
                 (i64.store (i32.const 104) (call $memory_get_u32 (local.get $lent) (i64.const 1)))"
            ),
            14,
        );
        let code = |e: domos_abi::HostError| e as i64;
        assert_eq!(
            results,
            [
                2, // the third piece's source is no memory object
                7,
                9, // from the read-only view
                1, // the second piece would end past the target
                0, // a read-only target takes nothing
                code(InvalidHandle),
                code(InvalidArgument), // more than 32 pieces
                code(InvalidArgument), // a list outside the heap
                0,
                2, // a piece of a loan, then one of an object of its own
                u32::from_le_bytes(*b"hell").into(),
                9,
                1, // into a loan
                7,
            ]
        );
    }

    #[test]
    fn objects_are_charged_in_whole_pages_until_the_last_view_is_dropped() {
        let body = crate::test_system::main(
            "(local $small i32) (local $large i32)
             (local.set $small (i32.wrap_i64 (call $memory_create (i64.const 1))))
             (local.set $large (i32.wrap_i64 (call $memory_create (i64.const 65537))))
             (i64.store (i32.const 0) (call $memory_subrange (local.get $large) (i64.const 65536) (i64.const 1)))
             (i64.store (i32.const 8) (call $handle_drop (local.get $small)))
             (i64.store (i32.const 16) (call $handle_drop (local.get $large)))",
        );
        let system = System::boot(
            &[component("c", "", &body)],
            "[[domain]]\nname = \"D\"\n[[domain.component]]\nname = \"c\"\n",
        );
        assert_eq!(system.results("D", 3)[1..], [0, 0]);
        // The module's page and one thread's two (64 KiB of stack, 64 KiB of buffer), and the
        // large object's two pages, which its subrange keeps; the small one's page came back.
        assert_eq!(system.domain("D").heap_used(), 5 * 65536);
        let subrange = system.results("D", 1)[0] as u32;
        drop(system.domain("D").handles().remove(subrange).unwrap());
        assert_eq!(system.domain("D").heap_used(), 3 * 65536, "the last view gone, the block is freed");
    }

    #[test]
    fn a_loan_of_heap_is_written_through_until_it_ends_and_not_after() {
        let results = run(
            "(local $lent i32) (local $view i32) (local $m i32)
             (local.set $lent (i32.wrap_i64 (call $memory_lend (i32.const 2048) (i32.const 16))))
             (local.set $view (i32.wrap_i64 (call $memory_subrange (local.get $lent) (i64.const 4) (i64.const 8))))
             (local.set $m (i32.wrap_i64 (call $memory_create (i64.const 16))))
             (drop (call $memory_write (local.get $m) (i64.const 0) (i32.const 1024) (i32.const 5)))
             ;; A copy into the loan lands in the heap at 2048 + 4.
             (i64.store (i32.const 0) (call $memory_copy (local.get $view) (i64.const 0) (local.get $m) (i64.const 0) (i64.const 5)))
             (i64.store (i32.const 8) (i64.load (i32.const 2048)))
             (i64.store (i32.const 16) (call $memory_info (local.get $lent)))
             (i64.store (i32.const 24) (call $memory_end_lend (local.get $view)))
             ;; Ended through a derived view: every view of the loan answers Revoked.
             (i64.store (i32.const 32) (call $memory_set_u32 (local.get $lent) (i64.const 0) (i32.const 7)))
             (i64.store (i32.const 40) (call $memory_copy (local.get $view) (i64.const 0) (local.get $m) (i64.const 0) (i64.const 1)))
             (i64.store (i32.const 48) (call $memory_end_lend (local.get $lent)))
             (i64.store (i32.const 56) (call $memory_end_lend (local.get $m)))
             (i64.store (i32.const 64) (call $memory_lend (i32.const 2048) (i32.const 0)))
             (i64.store (i32.const 72) (call $memory_lend (i32.const 0xfffffff0) (i32.const 32)))
             (i64.store (i32.const 80) (i64.load (i32.const 2048)))",
            11,
        );
        let code = |e: domos_abi::HostError| e as i64;
        let hello_at_4 = i64::from_le_bytes(*b"\0\0\0\0hell");
        assert_eq!(
            results,
            [
                0,
                hello_at_4,
                16 << 2 | 1, // 16 writable bytes
                0,
                code(Revoked),
                code(Revoked),
                code(Revoked),         // ended already
                code(InvalidArgument), // not a loan
                code(InvalidArgument), // empty
                code(InvalidArgument), // outside the heap
                hello_at_4,            // nothing written after the end
            ]
        );
    }
}
