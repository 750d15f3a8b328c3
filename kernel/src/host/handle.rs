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
