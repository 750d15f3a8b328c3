//! DomainZero's name service.
//!
//! Names are translated by the system configuration before the kernel sees them: a component
//! registers and looks up the names it knows (by convention its interfaces' names), and the
//! configuration's `register` and `bind` tables wire them to the system's names.

use crate::portal::{CallError, Interface, Portal};

/// Publishes `portal` under `name`.
///
/// # Errors
/// `NameTaken` when the name is registered already.
pub fn register<I: ?Sized + Interface>(name: &str, portal: &Portal<I>) -> Result<(), CallError> {
    let handle = portal.export_handle()?;
    crate::portal::check(domos_sys::name_register(name, handle)).map(|_| ())
}

/// Finds the service published under `name`, which must implement interface `I`.
///
/// # Errors
/// `NotFound` or `WrongInterface`.
pub fn lookup<I: ?Sized + Interface>(name: &str) -> Result<Portal<I>, CallError> {
    let handle = crate::portal::check(domos_sys::name_lookup(name, I::ID))?;
    Ok(Portal::from_handle(handle as u32))
}

/// A portal of unknown interface: found by [`lookup_any`] to be handed on (to a child domain,
/// say), never called.
#[derive(Debug)]
pub struct AnyPortal {
    pub(crate) handle: u32,
}

impl Drop for AnyPortal {
    fn drop(&mut self) {
        domos_sys::handle_drop(self.handle);
    }
}

/// Finds the service published under `name`, whatever its interface, to hand it on.
///
/// # Errors
/// `NotFound`.
pub fn lookup_any(name: &str) -> Result<AnyPortal, CallError> {
    let handle = crate::portal::check(domos_sys::name_lookup(name, 0))?;
    Ok(AnyPortal { handle: handle as u32 })
}
