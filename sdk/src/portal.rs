//! Portals: capabilities to services, local or in another domain.

use alloc::sync::Arc;
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use domos_abi::HostError;

use crate::rt::{self, DispatchError, IncomingCall};
use crate::wire::{DecodeError, Decoder, EncodeError, Encoder, Wire};
use domos_sys::MessageBuffer;

/// A portal interface: implemented by `#[interface]` for `dyn Trait`.
pub trait Interface: Send + Sync + 'static {
    /// The interface's name, as in manifests.
    const NAME: &'static str;
    /// The interface's version, `major.minor`.
    const VERSION: &'static str;
    /// `fnv1a("Name@major")`: what the kernel checks when a portal is looked up.
    const ID: u32;
    /// Decodes a request for `method`, calls it on `object` and encodes the reply.
    ///
    /// # Errors
    /// An unknown method, an undecodable request or a reply that does not fit.
    fn dispatch(object: &Self, method: u32, call: IncomingCall) -> Result<usize, DispatchError>;
}

/// Why a portal call failed before the service's own answer could be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallError {
    /// The kernel refused or the service failed (see `HostError`).
    Host(HostError),
    /// The request did not fit the per-call quota or had too many portals.
    Encode(EncodeError),
    /// The reply was malformed.
    Decode(DecodeError),
    /// Made while encoding or decoding another call of the same thread (from a `Wire`
    /// implementation), whose message the thread's one buffer holds.
    BufferLent,
}

impl core::fmt::Display for CallError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            CallError::Host(e) => f.write_str(e.describe()),
            CallError::Encode(e) => write!(f, "request could not be encoded: {e:?}"),
            CallError::Decode(e) => write!(f, "reply could not be decoded: {e:?}"),
            CallError::BufferLent => f.write_str("portal call made while encoding or decoding another"),
        }
    }
}

/// A restartable call that would wait for a lock ([`Mutex::lock_restartable`](crate::Mutex::lock_restartable))
/// ends as one whose portal call would wait: it is made again the waiting way.
impl From<domos_sys::MustWait> for CallError {
    fn from(_: domos_sys::MustWait) -> Self {
        CallError::Host(HostError::MustWait)
    }
}

impl From<EncodeError> for CallError {
    fn from(e: EncodeError) -> Self {
        CallError::Encode(e)
    }
}

impl From<DecodeError> for CallError {
    fn from(e: DecodeError) -> Self {
        CallError::Decode(e)
    }
}

impl Wire for CallError {
    fn encode(&self, e: &mut Encoder<'_>) -> Result<(), EncodeError> {
        let code: i32 = match self {
            CallError::Host(h) => *h as i32,
            CallError::Encode(_) => HostError::MessageTooLarge as i32,
            CallError::Decode(_) => HostError::BadRequest as i32,
            CallError::BufferLent => HostError::NotPermitted as i32,
        };
        code.encode(e)
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        let code = i32::decode(d)?;
        HostError::from_code(code.into()).map(CallError::Host).ok_or(DecodeError::Invalid)
    }
}

/// How long a caller that cannot wait for a busy service tries again, yielding between tries,
/// before the call fails with `ServiceBusy`. A time, not a number of tries: an interpreted
/// service's `init`, which holds its one store, may take longer than a thousand quick refusals.
const BUSY_PATIENCE_NS: u64 = 1_000_000_000;

/// Whether a caller that first found the service busy at `*since` (now, if never) may try again.
fn still_patient(since: &mut Option<u64>) -> bool {
    let now = crate::time::now_ns();
    now.saturating_sub(*since.get_or_insert(now)) < BUSY_PATIENCE_NS
}

/// Turns a host-call result into a value or a `CallError`.
pub(crate) fn check(result: i64) -> Result<i64, CallError> {
    if result >= 0 {
        Ok(result)
    } else {
        Err(CallError::Host(HostError::from_code(result).unwrap_or(HostError::InvalidArgument)))
    }
}

/// A capability to a service implementing interface `I`.
///
/// Calls go through the trait `I`, implemented for `Portal<dyn I>` by `#[interface]`: on a local
/// object they are plain calls with reference semantics; on a remote service they are portal calls.
pub struct Portal<I: ?Sized + Interface> {
    target: Target<I>,
}

enum Target<I: ?Sized> {
    /// An object of this component instance; `exported` is its kernel handle once it was passed
    /// to another domain (0 while it was not).
    Local { object: Arc<I>, exported: AtomicU32 },
    /// A handle in this domain's handle table; `waits` once the kernel answered `MustWait` to a
    /// call through it (its service may wait), so that later calls go the waiting way at once.
    Remote { handle: u32, waits: AtomicBool },
}

impl<I: ?Sized + Interface> Portal<I> {
    /// A portal to a local object.
    pub fn new(object: Arc<I>) -> Self {
        Portal { target: Target::Local { object, exported: AtomicU32::new(0) } }
    }

    /// Takes ownership of a kernel handle; a handle to an object of this very component instance
    /// becomes a local reference again.
    pub(crate) fn from_handle(handle: u32) -> Self {
        if let Ok(object_id) = check(domos_sys::portal_local(handle))
            && let Some(object) = rt::local_object::<I>(object_id as u32)
        {
            return Portal { target: Target::Local { object, exported: AtomicU32::new(handle) } };
        }
        Portal { target: Target::Remote { handle, waits: AtomicBool::new(false) } }
    }

    /// The local object, when the service lives in this component instance.
    pub fn local(&self) -> Option<&I> {
        match &self.target {
            Target::Local { object, .. } => Some(object),
            Target::Remote { .. } => None,
        }
    }

    /// The kernel handle of this portal, exporting a local object as a service on first use.
    pub(crate) fn export_handle(&self) -> Result<u32, CallError> {
        match &self.target {
            Target::Remote { handle, .. } => Ok(*handle),
            Target::Local { object, exported } => {
                let current = exported.load(Ordering::Acquire);
                if current != 0 {
                    return Ok(current);
                }
                let object_id = rt::export::<I>(object.clone())?;
                let handle = check(domos_sys::service_create(object_id, I::ID))? as u32;
                match exported.compare_exchange(0, handle, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => Ok(handle),
                    Err(winner) => {
                        domos_sys::handle_drop(handle);
                        Ok(winner)
                    }
                }
            }
        }
    }

    /// Calls `method` on a remote service: encodes `request` into this thread's message buffer,
    /// waits for a service thread if all are busy, and decodes the reply.
    ///
    /// # Errors
    /// Any `CallError`; on a local portal, `InvalidHandle` (call the object instead).
    pub fn call_remote<Req: Wire, Resp: Wire>(&self, method: u32, request: &Req) -> Result<Resp, CallError> {
        self.call_remote_encoded(method, Restartable::No, |encoder| request.encode(encoder))
    }

    /// [`Portal::call_remote`] with a request that `encode` writes (the generated proxies write
    /// their arguments one by one, borrowed ones from the borrow), of a method that may be
    /// `restartable`.
    ///
    /// # Errors
    /// As `call_remote`.
    pub fn call_remote_encoded<Resp: Wire>(
        &self,
        method: u32,
        restartable: Restartable,
        encode: impl FnOnce(&mut Encoder<'_>) -> Result<(), EncodeError>,
    ) -> Result<Resp, CallError> {
        let Target::Remote { handle, ref waits } = self.target else {
            return Err(CallError::Host(HostError::InvalidHandle));
        };
        let buffer = MessageBuffer::of_this_thread();
        let len = {
            let mut bytes = buffer.lend().ok_or(CallError::BufferLent)?;
            let mut encoder = Encoder::new(&mut bytes);
            encode(&mut encoder)?;
            encoder.finish()?
        };
        // A service that may wait answers `MustWait` to the fast call; from then on this call,
        // and every later one through this portal, goes the way that lets it wait (the kernel
        // runs a service that does not wait at once that way too). Either way a busy service is
        // waited for.
        let mut waiting = waits.load(Ordering::Relaxed);
        // A restartable method is tried at once, even in a service that waits; if the service
        // would have to wait, this call (and only this one) goes the waiting way.
        let mut restartable = restartable == Restartable::Yes;
        let mut busy_since = None;
        let reply_len = loop {
            let result = if restartable {
                buffer.portal_call_restartable(handle, method, len as u32)
            } else if waiting {
                buffer.portal_call_waiting(handle, method, len as u32)
            } else {
                buffer.portal_call(handle, method, len as u32)
            }
            .map_err(|domos_sys::BufferLent| CallError::BufferLent)?;
            match result {
                code if code == HostError::ServiceBusy as i64 => match domos_sys::portal_wait(handle) {
                    // A caller that cannot wait (a service thread, or the one store of an
                    // interpreted domain) is answered `ServiceBusy` at once: it lets others run
                    // and tries again, for a bounded time, before it gives up.
                    code if code == HostError::ServiceBusy as i64 && still_patient(&mut busy_since) => {
                        domos_sys::yield_now();
                    }
                    code => {
                        check(code)?;
                    }
                },
                code if code == HostError::MustWait as i64 && restartable => {
                    restartable = false;
                    waiting = true;
                }
                code if code == HostError::MustWait as i64 && !waiting => {
                    waiting = true;
                    waits.store(true, Ordering::Relaxed);
                }
                result => break check(result)? as usize,
            }
        };
        // Not lent since: the portal call ran no code of this thread.
        let bytes = buffer.lend().ok_or(CallError::BufferLent)?;
        let mut decoder = Decoder::new(&bytes, reply_len)?;
        let reply = Resp::decode(&mut decoder);
        for stray in decoder.untaken_handles() {
            domos_sys::handle_drop(stray);
        }
        Ok(reply?)
    }
}

/// Whether an interface method may be started again (`#[restartable]` in its interface): a
/// partial run of it leaves nothing behind but what a whole run would (it reads, and keeps at
/// most caches). Such a method is run at once even by a service that may wait, and made again
/// the waiting way only if the service would have to wait (the kernel's `portal_call_restartable`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restartable {
    /// It may be started again.
    Yes,
    /// It may not.
    No,
}

impl<I: ?Sized + Interface> Drop for Portal<I> {
    fn drop(&mut self) {
        let handle = match &self.target {
            Target::Remote { handle, .. } => *handle,
            Target::Local { exported, .. } => exported.load(Ordering::Acquire),
        };
        if handle != 0 {
            domos_sys::handle_drop(handle);
        }
    }
}

impl<I: ?Sized + Interface> Wire for Portal<I> {
    fn encode(&self, e: &mut Encoder<'_>) -> Result<(), EncodeError> {
        let handle = self.export_handle().map_err(|_| EncodeError::Export)?;
        e.handle(handle)
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        Ok(Portal::from_handle(d.handle()?))
    }
}

impl<I: ?Sized + Interface> core::fmt::Debug for Portal<I> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match &self.target {
            Target::Local { .. } => write!(f, "Portal<{}>(local)", I::NAME),
            Target::Remote { handle, .. } => write!(f, "Portal<{}>(handle {handle:#x})", I::NAME),
        }
    }
}
