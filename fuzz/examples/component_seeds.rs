//! Writes small hand-made components as seeds of the `loader_component` target, beside the real
//! builds: each a few hundred bytes, so that the fuzzer also mutates inputs it can run thousands
//! of times a second, and each reaching a part of the loader the others do not (a local and a
//! global scheduler, bounded exports with counted loops, calls and `br_table`, a stack pointer
//! that moves, a copy of memory, a start function that waits, tables, data and element segments,
//! a pair of builds). Run from `fuzz/`: `cargo +nightly run --example component_seeds`.

fn component(shared: bool, manifest: &str, body: &str) -> Vec<u8> {
    let manifest = manifest.replace('"', "\\\"").replace('\n', "\\n");
    let shared = if shared { "shared" } else { "" };
    wat::parse_str(format!(
        r#"(module
  (import "env" "memory" (memory 1 65536 {shared}))
  {body}
  (global $sp (export "__stack_pointer") (mut i32) (i32.const 65536))
  (@custom "domos:manifest" "{manifest}"))"#
    ))
    .expect("valid wat")
}

const ORDINARY: &str = r#"
  (func (export "domos_init") (result i32) i32.const 0)
  (func (export "domos_thread_entry") (param i32) (result i32) i32.const 0)
  (func (export "domos_dispatch") (param i32 i32 i32 i32 i32) (result i32) i32.const 0)
  (func (export "domos_release") (param i32))"#;

fn main() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/corpus/loader_component");
    let frame = r#"
  (func $frame (param $size i32) (result i32) (local $old i32)
    (local.set $old (global.get $sp))
    (global.set $sp (i32.sub (global.get $sp) (local.get $size)))
    (i32.store (global.get $sp) (local.get $size))
    (global.set $sp (local.get $old))
    (local.get $old))"#;
    let main = format!(
        r#"(import "domos" "console_write" (func $write (param i32 i32)))
  (import "domos" "handle_drop" (func $drop (param i32) (result i64)))
  (import "domos" "memory_device" (func $device (param i32 i32) (result i64)))
  (table 2 funcref) (elem (i32.const 0) $frame $main)
  (data (i32.const 1024) "hello")
  {ORDINARY} {frame}
  (func $main (export "domos_main") (result i32)
    (call $write (i32.const 1024) (i32.const 5))
    (memory.copy (i32.const 2048) (i32.const 1024) (i32.const 5))
    (drop (call $frame (i32.const 64)))
    (call_indirect (param i32) (result i32) (i32.const 64) (i32.const 0)))"#
    );
    let interrupt = format!(
        r#"(import "domos" "atomic_set_and_unblock" (func $wake (param i32 i32 i32) (result i64)))
  (import "domos" "clock_ns" (func $clock (result i64)))
  {ORDINARY}
  (func $note (param i32) (drop (call $wake (local.get 0) (i32.const 1) (i32.const 1))))
  (func (export "domos_interrupt") (param $source i32) (param $events i32) (local $i i32)
    (drop (call $clock))
    (i32.const 0) (local.set $i)
    (loop
      (call $note (local.get $source))
      (local.get $i) (i32.const 1) (i32.add) (local.tee $i) (i32.const 8) (i32.lt_u) (br_if 0))
    (block (block (block (br_table 0 1 2 (local.get $events))) (call $note (i32.const 1))) (call $note (i32.const 2)))
    (memory.fill (i32.const 0) (i32.const 0) (i32.const 16)))"#
    );
    let local = r#"
  (import "domos" "clock_ns" (func $clock (result i64)))
  (func (export "domos_sched_runnable") (param i32 i32))
  (func (export "domos_sched_preempted") (param i32 i32) (local $i i32)
    (i32.const 16) (local.set $i)
    (loop (local.get $i) (i32.const 1) (i32.sub) (local.tee $i) (i32.const 0) (i32.gt_s) (br_if 0)))
  (func (export "domos_sched_activated") (param i32) (result i32) (drop (call $clock)) (i32.const -1))
  (func (export "domos_sched_interrupted") (param i32 i32) (result i32) (i32.const 0))
  (func (export "domos_sched_portal_call") (param i32) (result i32) (i32.const 0))"#;
    let global = r#"
  (func (export "domos_global_runnable") (param i32 i32))
  (func (export "domos_global_idle") (param i32))
  (func (export "domos_global_pick") (param i32) (result i32) (i32.const -1))
  (func (export "domos_global_ran") (param i32 i64))"#;
    let waits = format!(
        r#"{ORDINARY}
  (func $start (drop (memory.atomic.wait32 (i32.const 0) (i32.const 1) (i64.const 0))))
  (start $start)"#
    );
    let manifest = |name: &str, extra: &str| format!("name = \"{name}\"\nversion = \"1.0.0\"\n{extra}");
    let seeds = [
        ("tiny.threaded", component(true, &manifest("tiny", "provides = [\"Tiny@1.0\"]"), ORDINARY)),
        ("main.threaded", component(true, &manifest("main", "requires = [\"Tiny@1.0\"]"), &main)),
        ("interrupt.threaded", component(true, &manifest("irq", "bounded = [\"domos_interrupt\"]"), &interrupt)),
        (
            "local-scheduler.threaded",
            component(true, &manifest("sched", "policy = \"fifo\"\nbounded = [\"domos_sched_preempted\"]"), local),
        ),
        ("global-scheduler.threaded", component(true, &manifest("global", "policy = \"stride\""), global)),
        ("start-waits.threaded", component(true, &manifest("waits", "services_wait = true"), &waits)),
    ];
    let mut registry = domos_loader::ComponentRegistry::default();
    for (name, bytes) in &seeds {
        registry.add(name, bytes).unwrap_or_else(|e| panic!("the loader refuses seed {name}: {e}"));
        std::fs::write(format!("{dir}/{name}.wasm"), bytes).expect("write");
    }
    // A pair: the threaded build followed by the single-threaded one. A registry of its own, as
    // the one above holds a component called `main` already.
    let threaded = component(true, &manifest("main", "requires = [\"Tiny@1.0\"]"), &main);
    let single = component(false, &manifest("main", "requires = [\"Tiny@1.0\"]"), &main);
    domos_loader::ComponentRegistry::default()
        .add_pair("main.pair", &threaded, &single)
        .unwrap_or_else(|e| panic!("the loader refuses the pair: {e}"));
    std::fs::write(format!("{dir}/main.pair.wasm"), [threaded, single].concat()).expect("write");
    println!("{} seeds in {dir}", seeds.len() + 1);
}
