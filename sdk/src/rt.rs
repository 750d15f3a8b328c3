//! The component runtime behind the entry points that `component!` generates: the table of
//! exported objects, service dispatch, thread start. Not for direct use. A module that links
//! several components (the collocated build) has one of each table, shared by all of them.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::any::Any;
use core::fmt::Debug;
use domos_abi::HostError;

pub use alloc::sync::Arc;
pub use domos_abi::fnv1a;

use crate::Mutex;
use crate::portal::{CallError, Interface};
use crate::wire::{DecodeError, Decoder, Encoder, Wire};

/// Why a service could not handle a call; reported to the caller as a `HostError`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DispatchError {
    /// No method with that identifier.
    UnknownMethod,
    /// The request could not be decoded.
    BadRequest,
    /// The reply does not fit the caller's per-call quota.
    ReplyTooLarge,
}

impl DispatchError {
    fn code(self) -> i32 {
        match self {
            DispatchError::UnknownMethod => HostError::UnknownMethod as i32,
            DispatchError::BadRequest => HostError::BadRequest as i32,
            DispatchError::ReplyTooLarge => HostError::MessageTooLarge as i32,
        }
    }
}

/// Why a service thread traps when it finds its message buffer lent: only a `LentBuffer` that
/// was leaked (`core::mem::forget`) can be alive while the SDK's dispatch runs.
const LEAKED: &str = "a lent message buffer outlived the call that lent it";

/// A request of `len` bytes waiting in this service thread's message buffer.
pub struct IncomingCall {
    len: u32,
    buffer: domos_sys::MessageBuffer,
}

impl IncomingCall {
    /// Decodes the arguments with `decode` (the generated dispatch reads them one by one, the
    /// borrowed ones into storage of its own frame). Handles the arguments do not take are
    /// dropped.
    ///
    /// # Errors
    /// `BadRequest` for a malformed request.
    #[inline]
    pub fn args_with<T>(
        &self,
        decode: impl FnOnce(&mut Decoder<'_>) -> Result<T, DecodeError>,
    ) -> Result<T, DispatchError> {
        let bytes = self.buffer.lend().expect(LEAKED);
        let mut decoder = Decoder::new(&bytes, self.len as usize).map_err(|_| DispatchError::BadRequest)?;
        let args = decode(&mut decoder);
        for stray in decoder.untaken_handles() {
            domos_sys::handle_drop(stray);
        }
        args.map_err(|_| DispatchError::BadRequest)
    }

    /// Encodes the reply into the buffer; returns its length.
    ///
    /// # Errors
    /// `ReplyTooLarge` when it does not fit.
    pub fn reply<T: Wire>(&self, value: &T) -> Result<usize, DispatchError> {
        let mut bytes = self.buffer.lend().expect(LEAKED);
        let mut encoder = Encoder::new(&mut bytes);
        value.encode(&mut encoder).map_err(|_| DispatchError::ReplyTooLarge)?;
        encoder.finish().map_err(|_| DispatchError::ReplyTooLarge)
    }
}

/// Turns a portal failure into the error type of an interface method (`Result<T, E>` with
/// `E: From<CallError>`).
pub trait FromCallError {
    /// The method's result for a call that failed in transport.
    fn from_call_error(error: CallError) -> Self;
}

impl<T, E: From<CallError>> FromCallError for Result<T, E> {
    fn from_call_error(error: CallError) -> Self {
        Err(E::from(error))
    }
}

/// An object exported as a service, type-erased.
trait Exported: Send + Sync {
    fn dispatch(&self, method: u32, call: IncomingCall) -> Result<usize, DispatchError>;
    fn as_any(&self) -> &dyn Any;
}

struct ExportedObject<I: ?Sized + Interface>(Arc<I>);

impl<I: ?Sized + Interface> Exported for ExportedObject<I> {
    fn dispatch(&self, method: u32, call: IncomingCall) -> Result<usize, DispatchError> {
        I::dispatch(&self.0, method, call)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The bodies of threads not yet started, by small integers (ids start at 1; 0 means none).
struct Slab<T> {
    slots: Vec<Option<T>>,
    free: Vec<u32>,
}

impl<T> Slab<T> {
    const fn new() -> Self {
        Slab { slots: Vec::new(), free: Vec::new() }
    }
    fn insert(&mut self, value: T) -> u32 {
        match self.free.pop() {
            Some(id) => {
                self.slots[id as usize - 1] = Some(value);
                id
            }
            None => {
                self.slots.push(Some(value));
                self.slots.len() as u32
            }
        }
    }
    fn remove(&mut self, id: u32) -> Option<T> {
        let value = self.slots.get_mut((id as usize).checked_sub(1)?)?.take()?;
        self.free.push(id);
        Some(value)
    }
}

/// The objects exported as services; incoming calls read it without a lock (see `release`).
static OBJECTS: domos_sys::ObjectTable<dyn Exported> = domos_sys::ObjectTable::new();
static THREAD_BODIES: Mutex<Slab<Box<dyn FnOnce() -> i32 + Send>>> = Mutex::new(Slab::new());

/// Records `object` as a service object of this component instance; returns its id.
///
/// # Errors
/// `QuotaExceeded` when the instance has as many objects as a domain has handles.
pub(crate) fn export<I: ?Sized + Interface>(object: Arc<I>) -> Result<u32, CallError> {
    OBJECTS.insert(Box::new(ExportedObject(object))).ok_or(CallError::Host(HostError::QuotaExceeded))
}

/// The exported object `id`, if it implements `I`. The caller holds a portal to its service,
/// so the kernel does not release it meanwhile.
pub(crate) fn local_object<I: ?Sized + Interface>(id: u32) -> Option<Arc<I>> {
    OBJECTS.get(id)?.as_any().downcast_ref::<ExportedObject<I>>().map(|o| o.0.clone())
}

/// `domos_dispatch`: runs one incoming portal call on this service thread. The request is in
/// the thread's message buffer, whose address and capacity the kernel passes.
///
/// # Safety
/// Only the kernel may call it (through the entry point `component!` exports): the buffer's
/// address and capacity are taken on its word.
#[expect(unsafe_code, reason = "the kernel's arguments name the buffer, which saves a host call per call")]
pub unsafe fn dispatch(object: u32, method: u32, buffer: u32, len: u32, capacity: u32) -> i32 {
    let Some(target) = OBJECTS.get(object) else {
        return HostError::ServiceDead as i32;
    };
    // SAFETY: see above.
    let buffer = unsafe { domos_sys::MessageBuffer::of_service_call(buffer, capacity) };
    // The kernel has just written the request into the buffer: a `LentBuffer` kept past an
    // earlier call (leaked) would now see it change under it, so no code may run that could
    // use one.
    assert!(buffer.lend().is_some(), "{LEAKED}");
    match target.dispatch(method, IncomingCall { len, buffer }) {
        Ok(reply_len) => reply_len as i32,
        Err(e) => e.code(),
    }
}

/// `domos_release`: the kernel deactivated the service of `object` (its last portal is gone).
///
/// # Safety
/// Only the kernel may call it (through the entry point `component!` exports): it tells a
/// component to release an object only after every call on it has returned (each call holds the
/// service until it returns) and passes no call for it afterwards, which is what
/// `ObjectTable::remove` asks.
#[expect(unsafe_code, reason = "the kernel's promise about releases is what lets calls read the table without a lock")]
pub unsafe fn release(object: u32) {
    // SAFETY: see above.
    let released = unsafe { OBJECTS.remove(object) };
    drop(released);
}

/// The `init` of a component that declares none.
pub fn no_init() -> Result<(), CallError> {
    Ok(())
}

/// Runs `init` or `main`; a returned error is reported on the console and as exit code 1.
pub fn run_entry<E: Debug>(what: &str, entry: fn() -> Result<(), E>) -> i32 {
    match entry() {
        Ok(()) => 0,
        Err(e) => {
            crate::console::write_line(&alloc::format!("{what} failed: {e:?}"));
            1
        }
    }
}

/// Stores a thread body until the kernel starts the thread.
pub(crate) fn park_thread_body(body: Box<dyn FnOnce() -> i32 + Send>) -> u32 {
    THREAD_BODIES.lock().insert(body)
}

/// Takes back a thread body the kernel refused to start.
pub(crate) fn unpark_thread_body(id: u32) {
    drop(THREAD_BODIES.lock().remove(id));
}

/// `domos_thread_entry`: the first instruction of a spawned thread.
pub fn thread_entry(body: u32) -> i32 {
    let body = THREAD_BODIES.lock().remove(body);
    match body {
        Some(body) => body(),
        None => -1,
    }
}
