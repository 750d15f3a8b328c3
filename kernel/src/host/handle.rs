//! Dropping and duplicating handles.

use super::{Ctx, code};
use crate::portal;

pub(super) fn handle_drop(c: Ctx<'_>, handle: u32) -> i64 {
    let removed = c.data().domain.handles().remove(handle);
    code(removed.map(|object| {
        drop(object);
        0
    }))
}

pub(super) fn handle_dup(c: Ctx<'_>, handle: u32) -> i64 {
    code(portal::dup(&c.data().domain, handle))
}

#[cfg(test)]
mod tests {
    use domos_abi::HostError::*;

    use crate::test_system::{System, component, main};

    #[test]
    fn a_duplicate_names_the_same_object_and_outlives_the_dropped_original() {
        let body = main(
            "(local $a i32) (local $b i32)
             (local.set $a (i32.wrap_i64 (call $atomic_create (i32.const 5))))
             (local.set $b (i32.wrap_i64 (call $handle_dup (local.get $a))))
             (i64.store (i32.const 0) (i64.extend_i32_u (i32.ne (local.get $a) (local.get $b))))
             (i64.store (i32.const 8) (call $atomic_set (local.get $b) (i32.const 9)))
             (i64.store (i32.const 16) (call $atomic_get (local.get $a)))
             (i64.store (i32.const 24) (call $handle_drop (local.get $a)))
             (i64.store (i32.const 32) (call $atomic_get (local.get $a)))
             (i64.store (i32.const 40) (call $atomic_get (local.get $b)))
             (i64.store (i32.const 48) (call $handle_drop (local.get $a)))
             (i64.store (i32.const 56) (call $handle_dup (local.get $a)))
             (i64.store (i32.const 64) (call $handle_drop (i32.const 0)))
             (i64.store (i32.const 72) (call $memory_info (local.get $b)))
             (i64.store (i32.const 80) (call $atomic_get (i32.wrap_i64 (call $memory_create (i64.const 8)))))",
        );
        let system = System::boot(
            &[component("c", "", &body)],
            "[[domain]]\nname = \"D\"\n[[domain.component]]\nname = \"c\"\n",
        );
        let code = |e: domos_abi::HostError| e as i64;
        assert_eq!(
            system.results("D", 11),
            [
                1,
                0,
                9, // set through the duplicate, seen through the original
                0,
                code(InvalidHandle),
                9,
                code(InvalidHandle), // dropped once only
                code(InvalidHandle),
                code(InvalidHandle),
                code(InvalidHandle), // an atomic variable is no memory object
                code(InvalidHandle), // nor the reverse
            ]
        );
        assert_eq!(system.domain("D").handle_count(), 2, "the duplicate and the memory object are left");
    }
}
