//! Child domains (needs the `domains` grant): create, wait for, inspect and terminate them.
//!
//! A child's heap limit is carved out of this domain's quota; when the child runs out, its
//! memory fault goes to the handler given at creation, which grants more (from this domain's
//! quota) or lets the child end. A child sees only the names its parent hands down with
//! [`Child::provide`] (a parent interposes by handing down a wrapper it serves itself), and it
//! ends with its parent.

use alloc::string::String;

use crate::portal::{CallError, Interface, Portal, check};

/// How a child domain ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// Every thread of it returned.
    Finished,
    /// It was terminated (a trap, a refused memory fault, `terminate`).
    Terminated,
}

/// A child domain.
#[derive(Debug)]
pub struct Child {
    handle: u32,
}

impl Child {
    /// Creates a child from one `[[domain]]` table as TOML (`name`, `heap`, `grants`,
    /// `[[component]]`…); its memory faults go to `fault_handler`. It runs after [`Child::start`].
    ///
    /// # Errors
    /// `NotPermitted` without the grant; `InvalidArgument` for a refused description (the
    /// kernel prints why) or a quota that cannot hold the child's limit.
    pub fn create<I: ?Sized + Interface>(spec: &str, fault_handler: Option<&Portal<I>>) -> Result<Child, CallError> {
        let handler = match fault_handler {
            Some(portal) => portal.export_handle()?,
            None => 0,
        };
        Ok(Child { handle: check(domos_sys::domain_create(spec, handler))? as u32 })
    }

    /// Hands `portal` down to the child under `name`: the child finds it with
    /// `names::lookup(name)`.
    ///
    /// # Errors
    /// A dropped handle.
    pub fn provide<I: ?Sized + Interface>(&self, name: &str, portal: &Portal<I>) -> Result<(), CallError> {
        check(domos_sys::domain_provide(self.handle, name, portal.export_handle()?)).map(|_| ())
    }

    /// Hands a portal of any interface down to the child under `name`, unchanged.
    ///
    /// # Errors
    /// A dropped handle.
    pub fn provide_any(&self, name: &str, portal: &crate::names::AnyPortal) -> Result<(), CallError> {
        check(domos_sys::domain_provide(self.handle, name, portal.handle)).map(|_| ())
    }

    /// Starts the child: each of its components runs `init`, then `main`.
    ///
    /// # Errors
    /// `InvalidArgument` when started already.
    pub fn start(&self) -> Result<(), CallError> {
        check(domos_sys::domain_start(self.handle)).map(|_| ())
    }

    /// Waits until every thread of the child has returned, or it was terminated.
    ///
    /// # Errors
    /// When called from a service call, which may not block.
    pub fn wait(&self) -> Result<Ended, CallError> {
        match check(domos_sys::domain_wait(self.handle))? {
            0 => Ok(Ended::Finished),
            _ => Ok(Ended::Terminated),
        }
    }

    /// The child's line of the kernel's domain summary.
    ///
    /// # Errors
    /// A dropped handle.
    pub fn inspect(&self) -> Result<String, CallError> {
        let mut buf = alloc::vec![0u8; 512];
        let len = check(domos_sys::domain_inspect(self.handle, &mut buf))? as usize;
        buf.truncate(len.min(512));
        Ok(String::from_utf8_lossy(&buf).into_owned())
    }

    /// Terminates the child (and its children).
    ///
    /// # Errors
    /// A dropped handle.
    pub fn terminate(&self) -> Result<(), CallError> {
        check(domos_sys::domain_terminate(self.handle)).map(|_| ())
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        domos_sys::handle_drop(self.handle);
    }
}
