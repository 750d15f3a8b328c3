//! `svc-rpcbind`: a portmapper — rpcbind version 2 (RFC 1833 §3; NULL, SET, UNSET, GETPORT,
//! DUMP) on port 111 over UDP and TCP — so that RPC clients find `svc-nfs` without port options.
//!
//! Uses the portal `Network`; serves none. Its table comes from the configuration, which wires
//! the system (decision 0008), in its arguments:
//!
//! - `nfs=PORT`: NFS version 3 and MOUNT version 3 on PORT, UDP and TCP (what `svc-nfs` serves);
//! - `map=PROGRAM:VERSION:tcp|udp:PORT`, any number of times: one mapping more;
//! - `port=N`: the portmapper's own port (default 111), which it maps too.
//!
//! SET and UNSET from the network are answered FALSE: rpcbind takes them only from the local
//! machine, and a Domos stack has no local peer, so the table cannot be changed from outside.
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

use alloc::format;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;

use domos_interfaces::network::{Network, TcpListener, TcpStream, UdpSocket};
use domos_nfs::portmap::{self, IPPROTO_TCP, IPPROTO_UDP, Mapping, MappingList};
use domos_nfs::rpc::record::{self, RecordReader};
use domos_nfs::rpc::{self, Message, ReplyStatus};
use domos_nfs::xdr::{Decoder, Encoder, Xdr};
use domos_nfs::{mount, nfs3};
use domos_sdk::{CallError, Portal, names, println, thread};

domos_sdk::component! { main: main }

/// How long a wait lasts before a thread looks again.
const POLL_MS: u32 = 1000;
/// The most TCP connections served at once.
const CONNECTIONS: usize = 8;

fn arguments() -> Result<(u16, Vec<Mapping>), String> {
    let mut port = portmap::PORT;
    let mut table = Vec::new();
    for word in domos_sdk::args().split_whitespace() {
        let (key, value) = word.split_once('=').ok_or_else(|| format!("{word}: arguments are key=value"))?;
        let number = |text: &str| text.parse::<u32>().map_err(|_| format!("{word}: {text} is not a number"));
        match key {
            "port" => port = value.parse().map_err(|_| format!("{word}: not a port"))?,
            "nfs" => {
                let port = number(value)?;
                for (program, version) in [(nfs3::PROGRAM, nfs3::VERSION), (mount::PROGRAM, mount::VERSION)] {
                    for protocol in [IPPROTO_UDP, IPPROTO_TCP] {
                        table.push(Mapping { program, version, protocol, port });
                    }
                }
            }
            "map" => {
                let parts: Vec<&str> = value.split(':').collect();
                let [program, version, protocol, port] = parts[..] else {
                    return Err(format!("{word}: map=PROGRAM:VERSION:tcp|udp:PORT"));
                };
                let protocol = match protocol {
                    "tcp" => IPPROTO_TCP,
                    "udp" => IPPROTO_UDP,
                    _ => return Err(format!("{word}: the protocol is tcp or udp")),
                };
                table.push(Mapping {
                    program: number(program)?,
                    version: number(version)?,
                    protocol,
                    port: number(port)?,
                });
            }
            _ => return Err(format!("{word}: unknown argument (nfs=PORT, map=..., port=N)")),
        }
    }
    for protocol in [IPPROTO_UDP, IPPROTO_TCP] {
        table.push(Mapping { program: portmap::PROGRAM, version: portmap::VERSION, protocol, port: port.into() });
    }
    Ok((port, table))
}

/// Answers one call; `false` when it is dropped (not a call, or its header does not decode).
fn serve(table: &[Mapping], request: &[u8], reply: &mut Encoder) -> bool {
    let mut d = Decoder::new(request);
    let Ok(Message::Call(call)) = Message::decode(&mut d) else {
        return false;
    };
    let status = if call.rpc_version != rpc::RPC_VERSION {
        ReplyStatus::RpcMismatch { low: 2, high: 2 }
    } else if call.credential.caller().is_none() {
        ReplyStatus::AuthError(rpc::auth_stat::AUTH_TOOWEAK)
    } else if call.program != portmap::PROGRAM {
        ReplyStatus::ProgramUnavailable
    } else if call.version != portmap::VERSION {
        ReplyStatus::ProgramMismatch { low: 2, high: 2 }
    } else {
        let start = reply.len();
        rpc::encode_reply(reply, call.xid, &ReplyStatus::Success);
        let answered = match call.procedure {
            portmap::procedure::NULL => Ok(()),
            portmap::procedure::SET | portmap::procedure::UNSET => Mapping::decode(&mut d).map(|_| reply.bool(false)),
            portmap::procedure::GETPORT => Mapping::decode(&mut d).map(|asked| {
                let found = table
                    .iter()
                    .find(|m| m.program == asked.program && m.version == asked.version && m.protocol == asked.protocol);
                reply.u32(found.map_or(0, |m| m.port));
            }),
            portmap::procedure::DUMP => {
                MappingList(table.to_vec()).encode(reply);
                Ok(())
            }
            _ => {
                reply.truncate(start);
                rpc::encode_reply(reply, call.xid, &ReplyStatus::ProcedureUnavailable);
                return true;
            }
        };
        if answered.is_ok() {
            return true;
        }
        reply.truncate(start);
        ReplyStatus::GarbageArguments
    };
    rpc::encode_reply(reply, call.xid, &status);
    true
}

fn main() -> Result<(), String> {
    let (port, table) = arguments()?;
    let table: Arc<[Mapping]> = table.into();
    let net: Portal<dyn Network> = names::lookup("Network").map_err(|e| format!("no Network: {e}"))?;
    let bind = |e: CallError| format!("port {port}: {e}");
    let udp: Portal<dyn UdpSocket> = net.udp_bind(port).map_err(bind)?;
    let listener = net.tcp_listen(port, 4).map_err(bind)?;
    let udp_table = table.clone();
    thread::spawn(move || {
        let mut reply = Encoder::new();
        loop {
            match udp.receive_from(POLL_MS) {
                Ok(Some(datagram)) => {
                    reply.clear();
                    if serve(&udp_table, &datagram.data, &mut reply) {
                        let _ = udp.send_to(datagram.address, datagram.port, reply.as_bytes());
                    }
                }
                Ok(None) => {}
                Err(_) => return 1,
            }
        }
    })
    .map_err(|e| format!("no thread: {e}"))?;
    println!("rpcbind v2 on UDP and TCP port {port}: {} mappings", table.len());
    let open = Arc::new(core::sync::atomic::AtomicUsize::new(0));
    loop {
        let Some(stream) = listener.accept(POLL_MS).map_err(|e| format!("accept: {e}"))? else { continue };
        if open.load(core::sync::atomic::Ordering::Relaxed) >= CONNECTIONS {
            let _ = stream.close();
            continue;
        }
        open.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
        let (table, count) = (table.clone(), open.clone());
        let spawned = thread::spawn(move || {
            let _ = serve_connection(&table, &stream);
            let _ = stream.close();
            count.fetch_sub(1, core::sync::atomic::Ordering::Relaxed);
            0
        });
        if spawned.is_err() {
            open.fetch_sub(1, core::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// Answers the calls of one connection until the peer closes it or stays idle for a minute.
fn serve_connection(table: &[Mapping], stream: &Portal<dyn TcpStream>) -> Result<(), CallError> {
    let mut reader = RecordReader::new(4096);
    let mut reply = Encoder::new();
    let mut idle = 0;
    while idle < 60 {
        let Some(data) = stream.receive(4096, POLL_MS)? else {
            idle += 1;
            continue;
        };
        if data.is_empty() {
            break;
        }
        idle = 0;
        reader.push(&data);
        while let Ok(Some(request)) = reader.next_record() {
            reply.clear();
            reply.u32(0);
            if serve(table, request, &mut reply) {
                let len = reply.len() - 4;
                reply.patch_u32(0, u32::from_be_bytes(record::header(len)));
                let bytes = reply.as_bytes();
                let mut sent = 0;
                while sent < bytes.len() {
                    sent += stream.send(&bytes[sent..], POLL_MS)? as usize;
                }
            }
        }
        if reader.next_record().is_err() {
            break;
        }
    }
    Ok(())
}
