//! AtomicVariable (JX): set, get, block-if-equal, set-and-unblock.

use std::sync::Arc;

use super::{Ctx, code};
use crate::domain::KernelObject;
use crate::domain::unless_terminated;

pub(super) fn atomic_create(c: Ctx<'_>, value: u32) -> i64 {
    let variable = Arc::new(crate::object::atomic::AtomicVariable::new(value));
    code(c.data().domain.handles().insert(KernelObject::Atomic(variable)))
}

pub(super) fn atomic_get(c: Ctx<'_>, handle: u32) -> i64 {
    code(c.data().domain.handles().atomic(handle).map(|v| v.get()))
}

pub(super) fn atomic_set(c: Ctx<'_>, handle: u32, value: u32) -> i64 {
    code(c.data().domain.handles().atomic(handle).map(|v| {
        v.set(value);
        0
    }))
}

pub(super) fn atomic_set_and_unblock(c: Ctx<'_>, handle: u32, value: u32, count: u32) -> i64 {
    let variable = c.data().domain.handles().atomic(handle).cloned();
    code(variable.map(|v| v.set_and_unblock(value, count)))
}

pub(super) fn atomic_block_if_equal(
    c: Ctx<'_>,
    (handle, expected): (u32, u32),
) -> Box<dyn Future<Output = wasmtime::Result<i64>> + Send + '_> {
    Box::new(async move {
        let ctx = c.data();
        let variable = match ctx.domain.handles().atomic(handle) {
            Ok(variable) => variable.clone(),
            Err(e) => return Ok(e as i64),
        };
        let mut wait = std::pin::pin!(variable.block_if_equal(expected));
        let blocked = unless_terminated(&ctx.domain, ctx.service, |cx| wait.as_mut().poll(cx)).await?;
        Ok(i64::from(blocked))
    })
}

/// The same calls in a service thread, which runs inside its caller's portal call and never
/// blocks: they answer at once.
pub(super) mod in_service {
    use domos_abi::HostError;

    use super::Ctx;
    use crate::host::refused;

    pub(in crate::host) fn atomic_block_if_equal(c: Ctx<'_>, _handle: u32, _expected: u32) -> i64 {
        refused(&c, HostError::NotPermitted)
    }
}

#[cfg(test)]
mod tests {
    use crate::test_system::{System, component, main};

    #[test]
    fn set_get_and_a_block_that_returns_at_once_when_the_value_differs() {
        let body = main(
            "(local $a i32)
             (local.set $a (i32.wrap_i64 (call $atomic_create (i32.const 5))))
             (i64.store (i32.const 0) (call $atomic_get (local.get $a)))
             (i64.store (i32.const 8) (call $atomic_set_and_unblock (local.get $a) (i32.const 3) (i32.const 10)))
             (i64.store (i32.const 16) (call $atomic_block_if_equal (local.get $a) (i32.const 4)))
             (i64.store (i32.const 24) (call $atomic_get (local.get $a)))
             (i64.store (i32.const 32) (call $atomic_block_if_equal (i32.const 0x7fff0001) (i32.const 0)))",
        );
        let system = System::boot(
            &[component("c", "", &body)],
            "[[domain]]\nname = \"D\"\n[[domain.component]]\nname = \"c\"\n",
        );
        // Nobody to wake; not blocked (3 is not 4); the value set; a forged handle.
        assert_eq!(system.results("D", 5), [5, 0, 0, 3, domos_abi::HostError::InvalidHandle as i64]);
    }
}
