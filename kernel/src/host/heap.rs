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

#[cfg(test)]
mod tests {
    use crate::test_system::{System, component, main};

    #[test]
    fn the_message_buffer_follows_the_stack_and_the_heap_grows_by_charged_pages() {
        let body = main(
            "(i64.store (i32.const 0) (call $message_buffer))
             (i64.store (i32.const 8) (call $heap_grow (i32.const 1)))
             (i64.store (i32.const 16) (call $heap_grow (i32.const 1)))
             (i64.store (i32.const 24) (call $heap_grow (i32.const 0x10000)))
             (i64.store (i32.const 32) (call $heap_grow (i32.const 0)))",
        );
        let system = System::boot(
            &[component("c", "", &body)],
            "[[domain]]\nname = \"D\"\nheap = \"1 MiB\"\nstack = \"16 KiB\"\nmax_message = \"4 KiB\"\n\
             [[domain.component]]\nname = \"c\"\n",
        );
        const PAGE: i64 = 65536;
        // The module's page, then one page for the thread: 16 KiB of stack, then 4 KiB of buffer.
        let buffer = PAGE + 16 * 1024;
        assert_eq!(
            system.results("D", 5),
            [4096 << 32 | buffer, 2 * PAGE, 3 * PAGE, domos_abi::HostError::QuotaExceeded as i64, 4 * PAGE]
        );
        assert_eq!(system.domain("D").heap_used(), 4 * PAGE as u64, "every page charged, the refused ones not");
    }

    /// Each thread stores its buffer and the first of the runtime bytes before it at its
    /// argument, then sets that byte; the second thread gets the first one's region back, and
    /// the byte zeroed (the SDK keeps there whether the buffer is lent).
    #[test]
    fn a_reused_message_buffer_comes_with_its_runtime_bytes_zeroed() {
        let body = format!(
            "(func (export \"domos_thread_entry\") (param $a i32) (result i32) (local $b i64) (local $at i32)
               (local.set $b (call $message_buffer))
               (local.set $at (i32.sub (i32.wrap_i64 (local.get $b)) (i32.const 16)))
               (i64.store (local.get $a) (local.get $b))
               (i64.store (i32.add (local.get $a) (i32.const 8)) (i64.load8_u (local.get $at)))
               (i32.store8 (local.get $at) (i32.const 0xff))
               (i32.const 0))
             {}",
            main(
                "(drop (call $thread_join (i32.wrap_i64 (call $thread_spawn (i32.const 0)))))
                 (drop (call $thread_join (i32.wrap_i64 (call $thread_spawn (i32.const 16)))))",
            )
        );
        let system = System::boot(
            &[component("c", "", &body)],
            "[[domain]]\nname = \"D\"\nstack = \"16 KiB\"\nmax_message = \"4 KiB\"\n[[domain.component]]\nname = \"c\"\n",
        );
        let [first, fresh, second, reused] = system.results("D", 4)[..] else { panic!("four results") };
        assert_eq!(first, second, "the second thread got the first one's region");
        assert_eq!((fresh, reused), (0, 0), "the runtime bytes start zeroed, also when reused");
    }
}
