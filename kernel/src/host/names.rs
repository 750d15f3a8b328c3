//! The name service, with the configuration's wiring of names.

use domos_abi::{HostError, fnv1a};

use super::{Ctx, code, wired};
use crate::domain::KernelObject;
use crate::domain::names::MAX_NAME;
use crate::object::guest_memory::{self};

pub(super) fn name_register(c: Ctx<'_>, ptr: u32, len: u32, handle: u32) -> i64 {
    let ctx = c.data();
    code(guest_memory::read_str(&ctx.instance.memory, ptr, len, MAX_NAME).and_then(|name| {
        let service = ctx.domain.handles().portal(handle)?.clone();
        // A component publishes only the interfaces its manifest says it provides.
        let provides = &ctx.part().component.manifest.provides;
        if !provides.iter().any(|p| fnv1a(format!("{}@{}", p.name, p.major).as_bytes()) == service.interface) {
            return Err(HostError::NotPermitted);
        }
        ctx.kernel.names.register_for(&ctx.domain, wired(&ctx.part().register, name), service).map(|()| 0)
    }))
}

pub(super) fn name_lookup(c: Ctx<'_>, ptr: u32, len: u32, interface: u32) -> i64 {
    let ctx = c.data();
    code(guest_memory::read_str(&ctx.instance.memory, ptr, len, MAX_NAME).and_then(|name| {
        let service = ctx.kernel.names.lookup_for(&ctx.domain, &wired(&ctx.part().bind, name))?;
        // Interface 0 asks for any interface: a portal to be passed on, not called.
        if interface != 0 && service.interface != interface {
            return Err(HostError::WrongInterface);
        }
        ctx.domain.handles().insert(KernelObject::Portal(service))
    }))
}

#[cfg(test)]
mod tests {
    use domos_abi::HostError::*;

    use crate::test_system::{System, component, main};

    #[test]
    fn names_are_registered_once_looked_up_by_interface_and_wired_by_the_configuration() {
        let body = format!(
            r#"(data (i32.const 1024) "svc") (data (i32.const 1030) "alias") (data (i32.const 1040) "\ff")
               (data (i32.const 1050) "mine") (data (i32.const 1060) "published") {}"#,
            main(
                "(local $p i32) (local $h i32)
                 (local.set $p (i32.wrap_i64 (call $service_create (i32.const 7) (i32.const 0x1234))))
                 (i64.store (i32.const 0) (call $name_register (i32.const 1024) (i32.const 3) (local.get $p)))
                 (i64.store (i32.const 8) (call $name_register (i32.const 1024) (i32.const 3) (local.get $p)))
                 (local.set $h (i32.wrap_i64 (call $name_lookup (i32.const 1024) (i32.const 3) (i32.const 0x1234))))
                 (i64.store (i32.const 16) (call $portal_local (local.get $h)))
                 (i64.store (i32.const 24) (call $name_lookup (i32.const 1024) (i32.const 3) (i32.const 0x9999)))
                 (i64.store (i32.const 32) (call $portal_local
                   (i32.wrap_i64 (call $name_lookup (i32.const 1024) (i32.const 3) (i32.const 0)))))
                 (i64.store (i32.const 40) (call $portal_local
                   (i32.wrap_i64 (call $name_lookup (i32.const 1030) (i32.const 5) (i32.const 0x1234)))))
                 (i64.store (i32.const 48) (call $name_lookup (i32.const 1024) (i32.const 257) (i32.const 0)))
                 (i64.store (i32.const 56) (call $name_register (i32.const 1040) (i32.const 1) (local.get $p)))
                 (i64.store (i32.const 64) (call $name_register (i32.const 1024) (i32.const 3)
                   (i32.wrap_i64 (call $memory_create (i64.const 1)))))
                 (i64.store (i32.const 72) (call $name_register (i32.const 1050) (i32.const 4) (local.get $p)))
                 (i64.store (i32.const 80) (call $name_lookup (i32.const 1050) (i32.const 4) (i32.const 0)))
                 (i64.store (i32.const 88) (call $portal_local
                   (i32.wrap_i64 (call $name_lookup (i32.const 1060) (i32.const 9) (i32.const 0)))))
                 (i64.store (i32.const 96) (call $name_lookup (i32.const 0xffffff00) (i32.const 3) (i32.const 0)))",
            )
        );
        // The service's interface is the one the manifest provides: `Svc@1`.
        let body = body.replace("0x1234", &domos_abi::fnv1a(b"Svc@1").to_string());
        let system = System::boot(
            &[component("c", "provides = [\"Svc@1.0\"]", &body)],
            "[[domain]]\nname = \"D\"\n[[domain.component]]\nname = \"c\"\n\
             register = { mine = \"published\" }\nbind = { alias = \"svc\" }\n",
        );
        let code = |e: domos_abi::HostError| e as i64;
        assert_eq!(
            system.results("D", 13),
            [
                0,
                code(NameTaken),
                7, // the lookup's portal leads to this instance's object 7
                code(WrongInterface),
                7,                      // interface 0: any
                7,                      // `alias` is bound to `svc`
                code(InvalidArgument),  // a name over 256 bytes
                code(MalformedMessage), // not UTF-8
                code(InvalidHandle),    // a memory object is no portal
                0,
                code(NotFound), // `mine` was published as `published`
                7,
                code(InvalidArgument), // a name outside the heap
            ]
        );
        assert!(system.kernel.names.lookup("published").is_ok());
    }
}
