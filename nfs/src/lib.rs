//! The protocols of Domos' file server, in both directions — XDR (RFC 4506), ONC RPC version 2
//! (RFC 5531) with TCP record marking, the portmapper (rpcbind version 2, RFC 1833), MOUNT
//! version 3 and NFS version 3 (RFC 1813) — for `svc-nfs` and `svc-rpcbind`, which run as
//! WebAssembly components, and for the host's clients: the system tests and the load generator
//! of `domos bench nfs`.
//!
//! `no_std` with `alloc`, no `unsafe`, no dependencies. Every decoder checks each length against
//! what is left of its input before it allocates, so a malformed message is an
//! [`xdr::XdrError`], never a panic and never an allocation larger than the message.
//!
//! A server's round, in short:
//!
//! ```
//! use domos_nfs::nfs3::{self, GetattrArgs, GetattrRes, Res, Status};
//! use domos_nfs::rpc::{self, Message, OpaqueAuth, ReplyStatus};
//! use domos_nfs::xdr::{Decoder, Encoder, Xdr};
//!
//! // The client's call.
//! let mut call = Encoder::new();
//! rpc::encode_call(&mut call, 1, nfs3::PROGRAM, nfs3::VERSION, nfs3::procedure::GETATTR, &OpaqueAuth::NONE);
//! GetattrArgs { object: nfs3::FileHandle::new(&[0; 16]).unwrap() }.encode(&mut call);
//!
//! // The server.
//! let mut d = Decoder::new(call.as_bytes());
//! let Ok(Message::Call(header)) = Message::decode(&mut d) else { panic!() };
//! let args = GetattrArgs::decode(&mut d).unwrap();
//! let mut reply = Encoder::new();
//! rpc::encode_reply(&mut reply, header.xid, &ReplyStatus::Success);
//! GetattrRes::Err(Status::Stale, ()).encode(&mut reply);
//!
//! // The client again.
//! let mut d = Decoder::new(reply.as_bytes());
//! let Ok(Message::Reply(header)) = Message::decode(&mut d) else { panic!() };
//! assert_eq!(header.status, ReplyStatus::Success);
//! assert_eq!(GetattrRes::decode(&mut d), Ok(Res::Err(Status::Stale, ())));
//! # let _ = args;
//! ```
#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

extern crate alloc;

pub mod xdr;

pub mod mount;
pub mod nfs3;
pub mod portmap;
pub mod rpc;
