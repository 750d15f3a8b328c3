//! System tests: boot configurations with the real components and with hostile ones, and check
//! that every bad input ends in a clear error while the rest of the system keeps running.

use std::sync::Arc;
use std::time::Duration;

use domos_kernel::Console;
use domos_loader::codegen::Translator;
use domos_loader::config::{SchedulerChoice, SchedulerComponentConfig};
use domos_loader::{ComponentRegistry, SystemConfig};
use domos_testing::{CLANG, DEBUGFS, E2FSCK, LOOP_MOUNT, MAKE, MKE2FS, WASM_LD};

// The tests, in the order of this file; a test judged by Linux's tools names them, and is
// reported ignored where they are missing (failed in CI).
domos_testing::main! {
    demo_runs_in_one_domain_in_three_and_interpreted,
    explicit_bounds_checks_and_no_preemption_run_the_demo_and_still_trap_out_of_bounds,
    an_interpreted_domain_has_one_activity_at_a_time,
    malformed_and_unverifiable_modules_are_refused,
    dependency_cycles_and_missing_interfaces_are_named,
    wrong_configurations_get_clear_errors,
    host_calls_need_their_grant,
    forged_stale_and_malformed_portal_use_is_refused,
    a_lent_message_buffer_is_lent_once_and_never_written_under_its_borrower,
    random_portal_messages_are_refused_and_the_service_survives,
    memory_objects_are_shared_without_copy_and_revocable,
    a_sandbox_grants_memory_faults_and_the_workload_finishes,
    a_sandbox_ends_a_child_that_needs_too_much_and_gets_its_quota_back,
    terminating_a_parent_terminates_its_children,
    sandboxes_nest_and_interpose_on_the_names_a_child_sees,
    a_domain_creating_children_without_end_is_stopped_by_its_quota,
    names_and_records_of_ended_domains_are_bounded,
    children_get_cpu_in_proportion_to_the_shares_carved_from_their_parent,
    parameters_over_the_per_call_quota_are_refused,
    traps_and_quota_overruns_end_only_their_domain,
    a_spinning_domain_does_not_stop_the_others_and_can_be_terminated,
    an_init_that_never_returns_is_ended_and_the_boot_goes_on,
    a_start_function_that_waits_for_ever_lets_go_of_its_cpu_when_its_domain_ends,
    deep_and_deeply_nested_portal_calls_fail_cleanly,
    names_are_assigned_by_the_configuration_not_taken_first,
    killing_a_domain_that_holds_a_lock_releases_the_caller_waiting_for_it_through_a_portal,
    terminating_a_service_releases_a_caller_blocked_in_it,
    callers_of_a_spinning_service_are_preempted_and_other_domains_run,
    a_service_that_spins_in_its_first_call_is_ended,
    mutated_components_never_panic_the_loader,
    every_technology_computes_the_same_grafts,
    mutexes_and_condition_variables_block_in_the_kernel_and_count_right,
    threads_blocked_forever_cost_no_cpu_and_end_with_their_domain,
    bounded_handlers_are_proved_at_load_and_unbounded_ones_refused,
    the_trace_shows_every_thread_running_and_its_portal_calls,
    a_server_works_with_the_cpu_share_of_the_client_that_calls_it,
    timer_interrupts_run_the_bounded_handler_in_its_own_thread,
    local_schedulers_order_a_domains_threads_and_components_can_require_one,
    scheduler_components_on_two_cpus_lose_no_wake_up,
    the_global_scheduler_is_chosen_by_the_configuration,
    scheduler_components_that_loop_trap_or_answer_garbage_are_replaced_and_the_domain_runs_on,
    schedulers_are_replaced_at_run_time_and_only_by_policies_the_components_accept,
    a_scheduler_that_hears_of_portal_calls_lets_a_higher_priority_thread_run_first,
    a_disk_driver_serves_blocks_from_an_image_file_woken_by_its_completion_interrupt,
    shutdown_lets_the_kernel_go_even_with_threads_blocked_for_good,
    a_service_that_waits_suspends_its_caller_and_the_cpu_runs_others,
    a_restartable_call_that_meets_a_lock_held_by_a_waiting_call_is_made_again_the_waiting_way,
    domos_fs_makes_and_changes_images_that_e2fsck_and_debugfs_accept: [E2FSCK, DEBUGFS, MKE2FS],
    domos_fs_reads_symbolic_links: [DEBUGFS],
    domos_fs_takes_any_argument_and_a_closed_pipe_without_a_panic,
    domos_fs_mkfs_does_not_overwrite_a_file_system_without_force: [MKE2FS],
    domos_fs_errors_name_the_path_at_fault,
    domos_fs_takes_every_name_ext2_allows: [E2FSCK, DEBUGFS],
    domos_fs_stamps_the_hosts_time_and_counts_mounts_as_linux_does: [E2FSCK, DEBUGFS],
    two_domos_fs_writing_one_image_at_once_lose_nothing: [E2FSCK],
    a_booted_system_holds_its_disk_images_against_other_domos_processes,
    domos_fs_keeps_sparse_files_sparse_even_larger_than_the_image: [E2FSCK, DEBUGFS],
    domos_fs_moves_large_files_in_bounded_memory,
    a_buffer_cache_evicts_writes_back_and_syncs_to_the_disk_driver,
    a_buffer_cache_serves_other_threads_while_one_waits_for_the_disk,
    readers_of_the_file_system_see_whole_versions_while_a_writer_frees_and_reuses_blocks,
    the_storage_stack_runs_in_four_domains_or_one_without_a_code_change,
    the_file_system_by_node_serves_every_operation_and_e2fsck_accepts_the_image: [E2FSCK, DEBUGFS],
    a_second_file_system_that_renames_only_its_file_system_still_boots,
    a_file_system_killed_mid_write_leaves_an_image_e2fsck_repairs_with_synced_data_intact: [E2FSCK, DEBUGFS],
    linux_mounts_and_reads_an_image_made_and_filled_by_domos: [LOOP_MOUNT],
    the_page_eviction_graft_plugs_into_the_buffer_cache,
    components_load_from_files_named_relative_to_the_configuration,
    bad_component_files_are_refused_before_anything_boots,
    the_c_header_declares_every_host_call_as_the_kernel_checks_it: [CLANG, WASM_LD],
    a_component_in_c_serves_the_unchanged_rust_clients: [CLANG, WASM_LD],
    domos_new_makes_a_crate_that_builds_and_boots_as_printed,
    domos_new_lang_c_makes_a_component_that_builds_and_boots_as_printed: [CLANG, WASM_LD, MAKE],
}

/// The demo, which was the default system until the file server took its place.
const DEMO: &str = include_str!("../../configs/demo-separate.toml");

mod common;
use common::{Run, registry_with};

fn registry() -> ComponentRegistry {
    registry_with(&["test-hostile", "test-privileged", "test-bad-scheduler", "test-scheduling", "test-waiting"])
}

const DEMO_DOMAINS: &str = r#"
[[domain]]
name = "Store"
[[domain.component]]
name = "svc-kv"
[[domain]]
name = "Summary"
[[domain.component]]
name = "svc-summary"
[[domain]]
name = "Client"
[[domain.component]]
name = "app-demo"
"#;

fn demo_runs_in_one_domain_in_three_and_interpreted() {
    for file in ["demo-separate.toml", "demo-single.toml", "demo-interpreted.toml", "demo-schedulers.toml"] {
        let text = std::fs::read_to_string(format!("{}/../configs/{file}", env!("CARGO_MANIFEST_DIR"))).unwrap();
        let run = Run::boot(&text, Duration::from_secs(60));
        assert!(run.outcome.finished, "{file}: {:?}", run.lines());
        assert!(run.has_line("demo finished: ok"), "{file}: {:?}", run.lines());
        assert!(run.has_line("summary of scratch (served by app-demo): 4 entries"), "{file}: {:?}", run.lines());
        assert!(!run.has_line("failed"), "{file}: {:?}", run.lines());
        for domain in &run.outcome.domains {
            assert_eq!(domain.termination_reason(), None, "{file}");
        }
    }
    let run = Run::boot(DEMO, Duration::from_secs(60));
    let served = |name: &str| run.domain(name).calls_served();
    assert!(served("Store") >= 30, "the store served the writers, the reader and the summarizer");
    assert!(served("Client") >= 1, "the client served its own table to the summarizer");

    // One domain, collocated (demo-single.toml) or not: the same run, with no portal call at all
    // between collocated components, and copying portal calls between the others.
    let text = std::fs::read_to_string(format!("{}/../configs/demo-single.toml", env!("CARGO_MANIFEST_DIR"))).unwrap();
    assert!(text.contains("collocate = true\n"));
    for (collocate, calls) in [(true, 0..=0), (false, 30..=1000)] {
        let text = text.replace("collocate = true\n", &format!("collocate = {collocate}\n"));
        let run = Run::boot(&text, Duration::from_secs(60));
        assert!(run.has_line("demo finished: ok"), "collocate = {collocate}: {:?}", run.lines());
        let demo = run.domain("Demo");
        assert_eq!(demo.instances().len(), if collocate { 1 } else { 3 }, "collocate = {collocate}");
        assert!(calls.contains(&demo.calls_made()), "collocate = {collocate}: {} calls", demo.calls_made());
        assert_eq!(demo.calls_made(), demo.calls_served(), "every call stays inside the domain");
    }
}

fn explicit_bounds_checks_and_no_preemption_run_the_demo_and_still_trap_out_of_bounds() {
    let config = DEMO_DOMAINS
        .replace("name = \"Store\"\n", "name = \"Store\"\nbounds_checks = \"explicit\"\n")
        .replace("name = \"Client\"\n", "name = \"Client\"\npreemption = false\nbounds_checks = \"explicit\"\n");
    let run = Run::boot(&config, Duration::from_secs(60));
    assert!(run.has_line("demo finished: ok"), "{:?}", run.lines());

    // A load 16 bytes below 4 GiB, far beyond a one-page heap, under either kind of check.
    let wild = wat::parse_str(
        r#"(module
  (import "env" "memory" (memory 1 65536 shared))
  (global (export "__stack_pointer") (mut i32) (i32.const 65536))
  (func (export "domos_init") (result i32) i32.const 0)
  (func (export "domos_main") (result i32) (i32.load (i32.const 0xfffffff0)))
  (func (export "domos_thread_entry") (param i32) (result i32) i32.const 0)
  (func (export "domos_dispatch") (param i32 i32 i32 i32 i32) (result i32) i32.const 0)
  (func (export "domos_release") (param i32))
  (@custom "domos:manifest" "name = \"wild\"\nversion = \"1\""))"#,
    )
    .unwrap();
    for bounds in ["guard-pages", "explicit"] {
        let mut components = registry();
        components.add("wild", &wild).unwrap();
        let config = format!(
            "[[domain]]\nname = \"Wild\"\nbounds_checks = \"{bounds}\"\n[[domain.component]]\nname = \"wild\"\n{DEMO_DOMAINS}"
        );
        let (kernel, outcome) =
            domos::boot(&config, components, Console::capture(), Some(Duration::from_secs(60))).expect("boots");
        let wild = outcome.domains.iter().find(|d| d.name == "Wild").unwrap();
        let reason = wild.termination_reason().unwrap_or_default();
        assert!(reason.contains("out of bounds"), "{bounds}: {reason}");
        assert!(kernel.console.lines().iter().any(|l| l.contains("demo finished: ok")), "{bounds}");
        kernel.shutdown();
    }
}

fn an_interpreted_domain_has_one_activity_at_a_time() {
    let config = "[[domain]]\nname = \"Solo\"\ntranslator = \"pulley\"\n[[domain.component]]\nname = \"app-demo\"\n\
                  [[domain]]\nname = \"Store\"\n[[domain.component]]\nname = \"svc-kv\"\n\
                  [[domain]]\nname = \"Summary\"\n[[domain.component]]\nname = \"svc-summary\"\n";
    let run = Run::boot(config, Duration::from_secs(30));
    assert!(run.outcome.finished, "{:?}", run.lines());
    assert!(
        run.has_line("[Solo] app-demo main failed: Call(Host(NotPermitted))"),
        "no threads in an interpreted domain: {:?}",
        run.lines()
    );
    assert_eq!(run.domain("Solo").termination_reason(), None, "a refused spawn is an error, not a fault");
}

fn malformed_and_unverifiable_modules_are_refused() {
    let mut registry = ComponentRegistry::default();
    let junk = registry.add("junk", b"\0asm\x01\0\0\0garbage").unwrap_err();
    assert!(junk.contains("invalid WebAssembly"), "{junk}");
    let unknown = registry
        .add(
            "rogue",
            &wat_component("name = \"rogue\"\nversion = \"1\"", r#"(import "domos" "launch_missiles" (func))"#),
        )
        .unwrap_err();
    assert!(unknown.contains("domos.launch_missiles"), "{unknown}");
    let wasi = registry
        .add(
            "wasi",
            &wat_component(
                "name = \"w\"\nversion = \"1\"",
                r#"(import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) (result i32)))"#,
            ),
        )
        .unwrap_err();
    assert!(wasi.contains("wasi_snapshot_preview1.fd_write"), "{wasi}");
    let grow = registry
        .add(
            "grower",
            &wat_component(
                "name = \"g\"\nversion = \"1\"",
                r#"(func $grow (export "grow") (result i32) (memory.grow (i32.const 1)))"#,
            ),
        )
        .unwrap_err();
    assert!(grow.contains("memory.grow"), "{grow}");
    let no_manifest = registry
        .add("bare", &wat::parse_str(r#"(module (import "env" "memory" (memory 1 65536 shared)))"#).unwrap())
        .unwrap_err();
    assert_eq!(no_manifest, "component bare: does not export __stack_pointer, which the kernel sets for each thread");
    let bad_manifest =
        registry.add("bad", &wat_component("name = \"b\"\nversion = \"1\"\nprovides = [\"Nope\"]", "")).unwrap_err();
    assert!(bad_manifest.contains("Name@MAJOR.MINOR"), "{bad_manifest}");

    // What the kernel could not translate or instantiate, or only at great cost, is refused at
    // load, naming the limit.
    let manifest = "name = \"big\"\nversion = \"1\"";
    let functions: String = (0..10_000).map(|i| format!("(func $f{i})")).collect();
    let locals = "(func (local i32) (local i64 i64) (local ".to_string() + &"i32 ".repeat(10_000) + "))";
    let targets = "0 ".repeat(16_386); // the last is the default
    let br_table = format!("(func (block (br_table {targets} (i32.const 0))))");
    let oversized = wat_component(manifest, &format!("(@custom \"padding\" \"{}\")", "x".repeat(8 << 20)));
    for (bytes, refusal) in [
        (wat_component(manifest, &functions), "has 10004 functions; a component may have at most 10000"),
        (wat_component(manifest, &locals), "has 10003 locals; a function may have at most 10000"),
        (wat_component(manifest, &br_table), "has a br_table of 16385 targets; a br_table may have at most 16384"),
        (wat_component(manifest, "(table 20001 funcref)"), "has a table of 20001 elements"),
        (
            wat_component(manifest, "(table 1 funcref) (table 1 funcref)"),
            "has 2 tables; a component may have at most 1",
        ),
        (oversized, "a component may have at most 8388608"),
        (
            wat_component(manifest, r#"(import "domos" "clock_ns" (func (result i32)))"#),
            "imports domos.clock_ns with the wrong type; the kernel declares () -> i64",
        ),
    ] {
        let err = registry.add("big", &bytes).map(|_| ()).expect_err(refusal);
        assert!(err.contains(refusal), "{refusal}: {err}");
    }
    let capped = wat::parse_str(
        r#"(module (import "env" "memory" (memory 1 100 shared)) (global (export "__stack_pointer") (mut i32) (i32.const 0)))"#,
    )
    .unwrap();
    let err = registry.add("capped", &capped).unwrap_err();
    assert!(err.contains("imports env.memory with a maximum of 100 pages"), "{err}");
    // Exactly at the limits is accepted, and wasmtime translates it.
    let at_limits: String = (0..9_996).map(|i| format!("(func $f{i})")).collect();
    registry.add("at-limits", &wat_component(manifest, &at_limits)).expect("10,000 functions are fine");
}

/// A minimal module that satisfies the verifier, with `manifest` and `extra` definitions.
fn wat_component(manifest: &str, extra: &str) -> Vec<u8> {
    let manifest = manifest.replace('"', "\\\"").replace('\n', "\\n");
    wat::parse_str(format!(
        r#"(module
  (import "env" "memory" (memory 1 65536 shared))
  {extra}
  (global (export "__stack_pointer") (mut i32) (i32.const 65536))
  (func (export "domos_init") (result i32) i32.const 0)
  (func (export "domos_thread_entry") (param i32) (result i32) i32.const 0)
  (func (export "domos_dispatch") (param i32 i32 i32 i32 i32) (result i32) i32.const 0)
  (func (export "domos_release") (param i32))
  (@custom "domos:manifest" "{manifest}"))"#
    ))
    .expect("valid wat")
}

fn graph_registry(manifests: &[(&str, &str, &str)]) -> ComponentRegistry {
    let mut registry = ComponentRegistry::default();
    for (name, provides, requires) in manifests {
        let manifest = format!("name = \"{name}\"\nversion = \"1\"\nprovides = [{provides}]\nrequires = [{requires}]");
        registry.add(name, &wat_component(&manifest, "")).unwrap();
    }
    registry
}

fn config_of(components: &[&str]) -> domos_loader::SystemConfig {
    let mut text = String::new();
    for c in components {
        text.push_str(&format!("[[domain]]\nname = \"D{c}\"\n[[domain.component]]\nname = \"{c}\"\n"));
    }
    domos_loader::SystemConfig::parse(&text).unwrap()
}

fn dependency_cycles_and_missing_interfaces_are_named() {
    use domos_loader::boot_order;
    let cyclic = graph_registry(&[
        ("a", "\"A@1.0\"", "\"B@1.0\""),
        ("b", "\"B@1.0\"", "\"C@1.0\""),
        ("c", "\"C@1.0\"", "\"A@1.0\""),
    ]);
    let err = boot_order(&config_of(&["a", "b", "c"]), &cyclic).unwrap_err();
    assert!(err.contains("dependency cycle: a -> b -> c -> a"), "{err}");

    let missing = graph_registry(&[("a", "", "\"B@1.0\"")]);
    let err = boot_order(&config_of(&["a"]), &missing).unwrap_err();
    assert!(err.contains("component a requires B@1.0, which no component of this system provides"), "{err}");

    let incompatible = graph_registry(&[("a", "", "\"B@2.0\""), ("b", "\"B@1.4\"", "")]);
    let err = boot_order(&config_of(&["a", "b"]), &incompatible).unwrap_err();
    assert!(err.contains("incompatible: b provides B@1.4"), "{err}");

    let chain = graph_registry(&[("app", "", "\"B@1.0\""), ("lib", "\"B@1.1\"", "")]);
    let order = boot_order(&config_of(&["app", "lib"]), &chain).unwrap();
    assert_eq!(order, vec![1, 0], "providers boot first");
}

fn wrong_configurations_get_clear_errors() {
    let unknown = domos::boot(
        "[[domain]]\nname = \"A\"\n[[domain.component]]\nname = \"svc-nothing\"\n",
        registry(),
        Console::capture(),
        None,
    );
    let err = unknown.err().unwrap();
    assert!(err.contains("unknown component svc-nothing") && err.contains("svc-kv"), "{err}");
    let typo = domos::boot(
        "[[domain]]\nname = \"A\"\nheap = \"1 MB\"\n[[domain.component]]\nname = \"svc-kv\"\n",
        registry(),
        Console::capture(),
        None,
    );
    assert!(typo.err().unwrap().contains("unknown size unit `MB`"));
    let pulley = domos::boot(
        "[[domain]]\nname = \"A\"\ntranslator = \"pulley\"\nheap = \"128 KiB\"\n[[domain.component]]\nname = \"svc-kv\"\n",
        registry(),
        Console::capture(),
        None,
    );
    let err = pulley.err().unwrap();
    assert!(err.contains("an interpreted domain's heap is divided among its components"), "{err}");
    let small = domos::boot(
        "[[domain]]\nname = \"A\"\nheap = \"64 KiB\"\n[[domain.component]]\nname = \"svc-kv\"\n",
        registry(),
        Console::capture(),
        None,
    );
    assert!(small.err().unwrap().contains("heap limit"));
    for (scheduler, expected) in [
        ("\"lottery\"", "a built-in scheduler (a domain's: \"round-robin\", \"priority\" or \"fifo\""),
        ("{ component = \"sched-fifo\", slice = 3 }", "or a scheduler component: { component = \"NAME\""),
        ("{ component = \"sched-fifo\", slice_ms = 0 }", "domain A: a scheduler's slice_ms must be at least 1"),
        ("{ component = \"sched-lottery\" }", "unknown scheduler component sched-lottery (known: sched-fifo,"),
    ] {
        let config =
            format!("[[domain]]\nname = \"A\"\nscheduler = {scheduler}\n[[domain.component]]\nname = \"svc-kv\"\n");
        let err = domos::boot(&config, registry(), Console::capture(), None).err().unwrap_or_default();
        assert!(err.contains(expected), "{scheduler}: {err}");
    }
    let config = "[[domain]]\nname = \"A\"\ntranslator = \"pulley\"\nscheduler = { component = \"sched-fifo\" }\n\
                  [[domain.component]]\nname = \"svc-kv\"\n";
    let err = domos::boot(config, registry(), Console::capture(), None).err().unwrap_or_default();
    assert_eq!(err, "domain A: scheduler components need a compiled domain");
}

fn host_calls_need_their_grant() {
    let denied = domos::boot(
        "[[domain]]\nname = \"P\"\n[[domain.component]]\nname = \"test-privileged\"\n",
        registry(),
        Console::capture(),
        None,
    );
    let err = denied.err().unwrap();
    assert!(
        err.contains("domain P: component test-privileged imports domain_create") && err.contains("not granted"),
        "{err}"
    );

    let run = Run::boot(
        "[[domain]]\nname = \"P\"\ngrants = [\"domains\", \"devices\"]\n[[domain.component]]\nname = \"test-privileged\"\n",
        Duration::from_secs(30),
    );
    assert!(run.outcome.finished, "{:?}", run.lines());
    assert!(run.has_line("[P] child: Child"), "{:?}", run.lines());
    assert!(run.has_line("[P] terminate: 0"), "{:?}", run.lines());
    assert!(run.has_line("terminated: terminated by domain P"), "{:?}", run.lines());
}

fn forged_stale_and_malformed_portal_use_is_refused() {
    let config = format!(
        "{DEMO_DOMAINS}[[domain]]\nname = \"Forger\"\n[[domain.component]]\nname = \"test-hostile\"\nargs = \"forge\"\n"
    );
    let run = Run::boot(&config, Duration::from_secs(60));
    assert!(run.outcome.finished, "{:?}", run.lines());
    for handle in ["0x0", "0x1", "0x7", "0x10001", "0x7fffffff", "0xdeadbeef"] {
        assert!(run.has_line(&format!("forged handle {handle}: invalid handle")), "{handle}: {:?}", run.lines());
    }
    assert!(run.has_line("dropped handle: invalid handle"), "{:?}", run.lines());
    assert!(run.has_line("lookup with the wrong interface: portal does not implement"), "{:?}", run.lines());
    assert!(run.has_line("malformed message: malformed message"), "{:?}", run.lines());
    assert!(run.has_line("oversized message: message exceeds the per-call quota"), "{:?}", run.lines());
    assert!(run.has_line("a handle listed twice: malformed message; still ours: true"), "{:?}", run.lines());
    assert!(run.has_line("demo finished: ok"), "the other domains keep working: {:?}", run.lines());
    assert_eq!(run.domain("Forger").termination_reason(), None);
}

/// Safe code cannot hold its thread's message buffer twice (hole 12 of issue 12): a second lend,
/// a raw call while lent, a portal call from inside a request's encoding and a call after a
/// leaked lend are each refused, and the component keeps running.
fn a_lent_message_buffer_is_lent_once_and_never_written_under_its_borrower() {
    let config = format!(
        "{DEMO_DOMAINS}[[domain]]\nname = \"Borrower\"\n[[domain.component]]\nname = \"test-hostile\"\nargs = \"buffer\"\n"
    );
    let run = Run::boot(&config, Duration::from_secs(60));
    assert!(run.outcome.finished, "{:?}", run.lines());
    for line in [
        "lent twice: refused",
        "raw call while lent: Err(BufferLent)",
        "call while encoding: Err(Call(BufferLent))",
        "the call around it: answered",
        "call after a leaked lend: Err(Call(BufferLent))",
        "demo finished: ok",
    ] {
        assert!(run.has_line(line), "{line}: {:?}", run.lines());
    }
    assert_eq!(run.domain("Borrower").termination_reason(), None);
}

fn random_portal_messages_are_refused_and_the_service_survives() {
    let config = "[[domain]]\nname = \"Store\"\n[[domain.component]]\nname = \"svc-kv\"\n\
                  [[domain]]\nname = \"Fuzzer\"\n[[domain.component]]\nname = \"test-hostile\"\nargs = \"fuzz 20000\"\n";
    let run = Run::boot(config, Duration::from_secs(60));
    assert!(run.outcome.finished, "{:?}", run.lines());
    // Every one of the 20,000 calls got an answer or an error code; most random messages are
    // refused, and those the service could decode were answered.
    let line = run.lines().into_iter().find(|l| l.starts_with("[Fuzzer] fuzz: ")).expect("the fuzzer reports");
    let counts: Vec<u32> = line.split(' ').filter_map(|w| w.parse().ok()).collect();
    let [refused, answered] = counts[..] else { panic!("{line}") };
    assert_eq!(refused + answered, 20_000, "{line}");
    assert!(refused > answered, "random messages are mostly malformed: {line}");
    assert!(answered > 0, "a plausible header for a real method gets an answer: {line}");
    assert!(run.has_line("[Fuzzer] store still answers: Ok("), "{:?}", run.lines());
    assert_eq!(run.domain("Store").termination_reason(), None, "{:?}", run.lines());
}

fn memory_objects_are_shared_without_copy_and_revocable() {
    let config = "[[device]]\nname = \"fb0\"\nsize = \"256 KiB\"\n\
                  [[domain]]\nname = \"Inspector\"\n[[domain.component]]\nname = \"bench-mem\"\nargs = \"server\"\n\
                  [[domain]]\nname = \"Checker\"\nheap = \"4 MiB\"\n[[domain.component]]\nname = \"bench-mem\"\nargs = \"check\"\n\
                  [[domain]]\nname = \"Driver\"\ngrants = [\"devices\", \"domains\"]\n[[domain.component]]\nname = \"test-privileged\"\nargs = \"device fb0\"\n\
                  [[domain]]\nname = \"Store\"\n[[domain.component]]\nname = \"svc-kv\"\n\
                  [[domain]]\nname = \"Hostile\"\nheap = \"6 MiB\"\n[[domain.component]]\nname = \"test-hostile\"\nargs = \"memory\"\n";
    let run = Run::boot(config, Duration::from_secs(60));
    assert!(run.outcome.finished, "{:?}", run.lines());
    for expected in [
        "[Checker] checksum in another domain matches: true",
        "[Checker] a write by the other domain is seen here: 0xabcd1234",
        "[Checker] read-only view reads: 1",
        "[Checker] subrange bounds: Some(Host(InvalidArgument))",
        "[Checker] read past the end: Some(Host(InvalidArgument))",
        "[Checker] kept view before revocation: Ok(50462976)",
        "[Checker] kept view after revocation: Some(Host(Revoked))",
        "[Checker] derived view after revocation: Some(Host(Revoked))",
        "[Checker] revoker's fresh handle: Ok(50462976)",
        "[Checker] too large: Some(Host(InvalidArgument))",
        "[Driver] device fb0: 262144 bytes, first word 0xfeedf00d",
        "[Hostile] write through a read-only view: memory object is read-only",
        "[Hostile] typed write through a read-only view: memory object is read-only",
        "[Hostile] memory handle called as a portal: invalid handle",
        "[Hostile] portal used as memory: invalid handle",
        "[Hostile] memory objects until the quota refused: ",
        "[Hostile] after dropping them: created again",
    ] {
        assert!(run.has_line(expected), "missing {expected:?} in {:?}", run.lines());
    }
    for domain in &run.outcome.domains {
        assert_eq!(domain.termination_reason(), None, "{}", domain.name);
    }
    assert!(run.domain("Hostile").heap_used() <= 6 << 20);
}

fn sandbox(args: &str) -> String {
    format!(
        "[[domain]]\nname = \"Sandbox\"\nheap = \"24 MiB\"\ngrants = [\"domains\"]\n[[domain.component]]\nname = \"app-sandbox\"\nargs = \"{args}\"\n"
    )
}

fn a_sandbox_grants_memory_faults_and_the_workload_finishes() {
    let text = std::fs::read_to_string(format!("{}/../configs/sandbox.toml", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let run = Run::boot(&text, Duration::from_secs(60));
    assert!(run.outcome.finished, "{:?}", run.lines());
    assert!(run.has_line("[Sandbox] fault: domain "), "{:?}", run.lines());
    assert!(run.has_line("[sandboxed-work-sort] sorted 400000 numbers: in order true"), "{:?}", run.lines());
    assert!(run.has_line("[Sandbox] child finished within its limit"), "{:?}", run.lines());
    let child = run.kernel.domains().into_iter().find(|d| d.name.starts_with("sandboxed-")).unwrap();
    assert!(child.heap_limit() > 2 << 20, "the parent raised the child's limit");
    assert!(
        run.domain("Sandbox").heap_used() >= child.heap_limit(),
        "the child's limit is carved from the parent's quota"
    );
}

fn a_sandbox_ends_a_child_that_needs_too_much_and_gets_its_quota_back() {
    let run = Run::boot(&sandbox("2097152 4194304 work-sort n=400000"), Duration::from_secs(60));
    assert!(run.outcome.finished, "{:?}", run.lines());
    assert!(run.has_line("B reached, refusing"), "{:?}", run.lines());
    assert!(run.has_line("[Sandbox] child terminated: sandboxed-work-sort"), "{:?}", run.lines());
    let child = run.kernel.domains().into_iter().find(|d| d.name.starts_with("sandboxed-")).unwrap();
    assert!(
        child.termination_reason().unwrap_or_default().contains("memory fault"),
        "{:?}",
        child.termination_reason()
    );
    assert_eq!(run.domain("Sandbox").termination_reason(), None);
    assert!(
        run.domain("Sandbox").heap_used() < 2 << 20,
        "the carved quota came back: {}",
        run.domain("Sandbox").heap_used()
    );
}

fn terminating_a_parent_terminates_its_children() {
    let run = Run::boot(&sandbox("2097152 4194304 test-hostile spin"), Duration::from_millis(500));
    assert!(!run.outcome.finished);
    run.kernel.terminate(run.domain("Sandbox"), "stopped by the test".into());
    assert!(run.kernel.scheduler.wait_idle(Some(Duration::from_secs(10))), "{:?}", run.lines());
    let child = run.kernel.domains().into_iter().find(|d| d.name.starts_with("sandboxed-")).unwrap();
    assert_eq!(child.termination_reason().as_deref(), Some("its parent Sandbox ended"));
}

fn sandboxes_nest_and_interpose_on_the_names_a_child_sees() {
    let text =
        std::fs::read_to_string(format!("{}/../configs/sandbox-nested.toml", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let run = Run::boot(&text, Duration::from_secs(60));
    assert!(run.outcome.finished, "{:?}", run.lines());
    assert!(run.has_line("[sandboxed-app-sandbox] interposed: KeyValueStore.open(\"notes\")"), "{:?}", run.lines());
    assert!(run.has_line("[sandboxed-app-demo] demo finished: ok"), "{:?}", run.lines());
    assert!(run.has_line("[Outer] child finished within its limit"), "{:?}", run.lines());

    // A child sees only what its parent hands down, and gets no grant its parent lacks.
    let hidden = format!("{DEMO_DOMAINS}{}", sandbox("8388608 16777216 app-demo rounds=1"));
    let run = Run::boot(&hidden, Duration::from_secs(60));
    assert!(run.has_line("[sandboxed-app-demo] app-demo main failed: Call(Host(NotFound))"), "{:?}", run.lines());
    let greedy = sandbox("grants=devices 2097152 4194304 work-sort");
    let run = Run::boot(&greedy, Duration::from_secs(60));
    assert!(run.has_line("a child cannot be granted Devices, which its parent lacks"), "{:?}", run.lines());
    // Nor a trust setting or a limit its parent lacks (the Sandbox domain has the defaults).
    for (setting, refusal) in [
        ("accounting:false", "a child cannot have accounting = false, which its parent lacks"),
        ("preemption:false", "a child cannot have preemption = false, which its parent lacks"),
        ("threads:1000", "a child cannot have threads = 1000 (its own is 64), which its parent lacks"),
        ("service_threads:5", "a child cannot have service_threads = 5 (its own is 4)"),
        ("max_message:1048576", "a child cannot have max_message = 1048576 (its own is 65536)"),
    ] {
        let run = Run::boot(&sandbox(&format!("set={setting} 2097152 4194304 work-sort")), Duration::from_secs(60));
        assert!(run.has_line(refusal), "{setting}: {:?}", run.lines());
        assert!(run.kernel.domains().iter().all(|d| !d.name.starts_with("sandboxed-")), "{setting}: no child made");
    }
    let run = Run::boot(&sandbox("set=threads:8,accounting:true 2097152 4194304 work-sort"), Duration::from_secs(60));
    assert!(run.has_line("[sandboxed-work-sort] sorted"), "less than its parent is fine: {:?}", run.lines());

    // A fault handler is a MemoryFaultHandler whose service does not wait: the kernel calls it
    // synchronously with that interface's message.
    let config = format!(
        "{DEMO_DOMAINS}[[domain]]\nname = \"Waiter\"\n[[domain.component]]\nname = \"test-waiting\"\nargs = \"fault-handler\"\n\
         [[domain]]\nname = \"Parent\"\ngrants = [\"domains\", \"devices\"]\n[[domain.component]]\nname = \"test-privileged\"\nargs = \"bad-fault-handlers\"\n"
    );
    let run = Run::boot(&config, Duration::from_secs(60));
    assert!(
        run.has_line("KeyValueStore as a fault handler: portal does not implement the requested interface"),
        "{:?}",
        run.lines()
    );
    assert!(run.has_line("WaitingHandler as a fault handler: operation not granted"), "{:?}", run.lines());
}

fn a_domain_creating_children_without_end_is_stopped_by_its_quota() {
    let config = format!(
        "{DEMO_DOMAINS}[[domain]]\nname = \"Breeder\"\nheap = \"12 MiB\"\ngrants = [\"domains\", \"devices\"]\n[[domain.component]]\nname = \"test-privileged\"\nargs = \"children\"\n"
    );
    let run = Run::boot(&config, Duration::from_secs(60));
    assert!(run.outcome.finished, "{:?}", run.lines());
    let line = run.lines().into_iter().find(|l| l.contains("children created until refused")).unwrap_or_default();
    let created: usize =
        line.split(": ").nth(1).and_then(|r| r.split(' ').next()).and_then(|n| n.parse().ok()).unwrap_or(0);
    assert!((1..12).contains(&created), "the 12 MiB quota bounds the children: {line}");
    assert!(run.has_line("demo finished: ok"), "{:?}", run.lines());
    assert_eq!(run.domain("Breeder").termination_reason(), None);
}

fn names_and_records_of_ended_domains_are_bounded() {
    let config = "[[domain]]\nname = \"Squatter\"\n[[domain.component]]\nname = \"test-hostile\"\nargs = \"names\"\n\
                  [[domain]]\nname = \"Churner\"\nheap = \"8 MiB\"\ngrants = [\"domains\", \"devices\"]\n\
                  [[domain.component]]\nname = \"test-privileged\"\nargs = \"churn\"\n";
    let run = Run::boot(config, Duration::from_secs(60));
    assert!(run.outcome.finished, "{:?}", run.lines());
    assert!(run.has_line("names published until refused: 256 (memory quota exceeded)"), "{:?}", run.lines());
    assert!(run.has_line("[Churner] churned 400 children"), "{:?}", run.lines());
    let ended = run.kernel.domains().iter().filter(|d| d.is_terminated()).count();
    assert_eq!(
        ended,
        domos_kernel::domain::system::MAX_ENDED_DOMAINS,
        "the kernel keeps the most recent ended domains"
    );
}

fn children_get_cpu_in_proportion_to_the_shares_carved_from_their_parent() {
    let config = "[system]\ncpus = 1\n[[domain]]\nname = \"Parent\"\nheap = \"8 MiB\"\ngrants = [\"domains\", \"devices\"]\n[[domain.component]]\nname = \"test-privileged\"\nargs = \"shares\"\n";
    let run = Run::boot(config, Duration::from_millis(1500));
    assert!(
        run.has_line("a third child wanting 30 of the 20 tickets left: Some(Host(InvalidArgument))"),
        "{:?}",
        run.lines()
    );
    let cpu = |name: &str| {
        let domain = run.kernel.domains().into_iter().find(|d| d.name == name).unwrap();
        domain.cpu_ns() as f64
    };
    let ratio = cpu("Large") / cpu("Small");
    assert!((2.0..4.5).contains(&ratio), "60:20 tickets should give about 3:1 CPU, got {ratio:.2}");
    eprintln!("CPU ratio Large:Small = {ratio:.2}");
    run.kernel.terminate(run.domain("Parent"), "done".into());
    assert!(run.kernel.scheduler.wait_idle(Some(Duration::from_secs(10))));
}

fn parameters_over_the_per_call_quota_are_refused() {
    let config = "[[domain]]\nname = \"Store\"\nmax_message = \"4 KiB\"\n[[domain.component]]\nname = \"svc-kv\"\n\
                  [[domain]]\nname = \"Big\"\n[[domain.component]]\nname = \"test-hostile\"\nargs = \"flood 100000\"\n\
                  [[domain]]\nname = \"Medium\"\n[[domain.component]]\nname = \"test-hostile\"\nargs = \"flood 10000\"\n";
    let run = Run::boot(config, Duration::from_secs(30));
    assert!(run.outcome.finished, "{:?}", run.lines());
    assert!(run.has_line("[Big] flood of 100000 bytes refused: Call(Encode(TooLarge))"), "{:?}", run.lines());
    assert!(run.has_line("[Medium] flood of 10000 bytes refused: Call(Host(MessageTooLarge))"), "{:?}", run.lines());
    assert!(run.has_line("table still answers: Ok(0)"), "{:?}", run.lines());
}

fn traps_and_quota_overruns_end_only_their_domain() {
    let config = format!(
        "{DEMO_DOMAINS}\
         [[domain]]\nname = \"Trap\"\n[[domain.component]]\nname = \"test-hostile\"\nargs = \"trap\"\n\
         [[domain]]\nname = \"Deep\"\n[[domain.component]]\nname = \"test-hostile\"\nargs = \"recurse\"\n\
         [[domain]]\nname = \"Frames\"\n[[domain.component]]\nname = \"test-hostile\"\nargs = \"big-frames\"\n\
         [[domain]]\nname = \"Hog\"\nheap = \"3 MiB\"\n[[domain.component]]\nname = \"test-hostile\"\nargs = \"hog\"\n"
    );
    let run = Run::boot(&config, Duration::from_secs(60));
    assert!(run.outcome.finished, "{:?}", run.lines());
    assert!(run.has_line("demo finished: ok"), "{:?}", run.lines());
    let reason = |name: &str| run.domain(name).termination_reason().unwrap_or_default();
    assert!(
        reason("Trap").contains("test-hostile main trapped") && reason("Trap").contains("unreachable"),
        "{}",
        reason("Trap")
    );
    assert!(run.has_line("[Trap] panic: panicked at"), "{:?}", run.lines());
    assert!(reason("Deep").contains("stack"), "{}", reason("Deep"));
    // The shadow stack in linear memory is checked too: the thread may not go below its region.
    assert!(reason("Frames").contains("shadow stack overflow"), "{}", reason("Frames"));
    assert!(reason("Frames").contains("big_frames"), "{}", reason("Frames"));
    assert!(reason("Hog").contains("trapped"), "{}", reason("Hog"));
    let hog = run.domain("Hog");
    assert!(hog.heap_used() <= 3 << 20, "the quota held: {}", hog.heap_used());
    assert!(run.has_line("[Hog] holding 2048 KiB"), "the hog got what its quota allows: {:?}", run.lines());
    assert!(run.has_line("memory allocation of 262144 bytes failed"), "{:?}", run.lines());
    for name in ["Store", "Summary", "Client"] {
        assert_eq!(run.domain(name).termination_reason(), None, "{name}");
    }
}

fn a_spinning_domain_does_not_stop_the_others_and_can_be_terminated() {
    // Under the built-in schedulers, and under scheduler components at both levels.
    for (global, local) in
        [("\"stride\"", "\"round-robin\""), ("{ component = \"sched-stride\" }", "{ component = \"sched-fifo\" }")]
    {
        let config = format!(
            "[system]\ncpus = 1\nscheduler = {global}\n{DEMO_DOMAINS}[[domain]]\nname = \"Spin\"\nscheduler = {local}\n\
             [[domain.component]]\nname = \"test-hostile\"\nargs = \"spin\"\n"
        );
        let run = Run::boot(&config, Duration::from_secs(3));
        assert!(!run.outcome.finished, "the spinner never ends on its own");
        assert!(run.has_line("demo finished: ok"), "one CPU is shared by preemption: {:?}", run.lines());
        run.kernel.terminate(run.domain("Spin"), "stopped by the test".into());
        assert!(run.kernel.scheduler.wait_idle(Some(Duration::from_secs(10))), "the spinner's thread ends");
        assert_eq!(run.domain("Spin").live_threads(), 0);
        assert_eq!(run.domain("Spin").scheduling.describe(), "round-robin", "its scheduler component is gone");
        assert!(!run.has_line("failed"), "{:?}", run.lines());
    }
}

fn an_init_that_never_returns_is_ended_and_the_boot_goes_on() {
    // The spinning init boots first (no dependencies either way); the demo after it must run.
    let config = format!(
        "[system]\ninit_timeout_ms = 300\n[[domain]]\nname = \"Stuck\"\n[[domain.component]]\nname = \"test-hostile\"\nargs = \"init-spin\"\n{DEMO_DOMAINS}"
    );
    let run = Run::boot(&config, Duration::from_secs(60));
    assert!(run.outcome.finished, "{:?}", run.lines());
    assert_eq!(
        run.domain("Stuck").termination_reason().as_deref(),
        Some("test-hostile init did not return within 300 ms")
    );
    assert!(run.has_line("demo finished: ok"), "the domains after it booted: {:?}", run.lines());
    let zero = SystemConfig::parse(&format!("[system]\ninit_timeout_ms = 0\n{DEMO_DOMAINS}"));
    assert!(zero.unwrap_err().contains("init_timeout_ms must be at least 1"));
}

fn a_start_function_that_waits_for_ever_lets_go_of_its_cpu_when_its_domain_ends() {
    // Its start function waits on a word nobody sets: the one kernel CPU instantiating its init
    // thread is held, where no epoch check reaches. The init's time limit ends the domain, the
    // kernel changes the word and notifies, and the CPU runs the demo.
    let waiter = wat_component(
        "name = \"waiter\"\nversion = \"1\"",
        "(func $init_memory (drop (memory.atomic.wait32 (i32.const 2048) (i32.const 0) (i64.const -1)))) (start $init_memory)",
    );
    let mut components = registry();
    components.add("waiter", &waiter).expect("a start function may wait on a constant address");
    let config = format!(
        "[system]\ncpus = 1\ninit_timeout_ms = 300\n[[domain]]\nname = \"Waiter\"\n[[domain.component]]\nname = \"waiter\"\n{DEMO_DOMAINS}"
    );
    let (kernel, outcome) =
        domos::boot(&config, components, Console::capture(), Some(Duration::from_secs(30))).unwrap();
    assert!(outcome.finished, "{:?}", kernel.console.lines());
    assert!(kernel.console.lines().iter().any(|l| l.contains("demo finished: ok")), "{:?}", kernel.console.lines());
    let waiter = outcome.domains.iter().find(|d| d.name == "Waiter").unwrap();
    assert_eq!(waiter.termination_reason().as_deref(), Some("waiter init did not return within 300 ms"));
    kernel.shutdown();
    // A wait whose address the kernel cannot know is refused at load.
    let computed = wat_component(
        "name = \"computed\"\nversion = \"1\"",
        "(func $init_memory (drop (memory.atomic.wait32 (i32.load (i32.const 0)) (i32.const 0) (i64.const -1)))) (start $init_memory)",
    );
    let err = ComponentRegistry::default().add("computed", &computed).unwrap_err();
    assert!(err.contains("executes memory.atomic.wait on operands that are not constants"), "{err}");
}

fn names_are_assigned_by_the_configuration_not_taken_first() {
    // The squatter boots first and tries to publish under the name app-demo finds its store by.
    let config = format!(
        "[[domain]]\nname = \"Squatter\"\n[[domain.component]]\nname = \"test-hostile\"\nargs = \"squat\"\n{DEMO_DOMAINS}"
    );
    let run = Run::boot(&config, Duration::from_secs(60));
    assert!(run.outcome.finished, "{:?}", run.lines());
    assert!(run.has_line("[Squatter] squat KeyValueStore: operation not granted"), "{:?}", run.lines());
    assert!(run.has_line("[Squatter] republish KeyValueStore as copy: operation not granted"), "{:?}", run.lines());
    assert!(run.has_line("[Client] demo finished: ok"), "the demo talks to the real store: {:?}", run.lines());
    assert_eq!(run.domain("Store").termination_reason(), None);

    // A component that claims the store's interface under the same name makes the
    // configuration ambiguous: refused before anything runs, naming both.
    let mut components = registry();
    let liar = wat_component("name = \"liar\"\nversion = \"1\"\nprovides = [\"KeyValueStore@1.0\"]", "");
    components.add("liar", &liar).unwrap();
    let config = format!("[[domain]]\nname = \"Liar\"\n[[domain.component]]\nname = \"liar\"\n{DEMO_DOMAINS}");
    let refused = domos::boot(&config, components, Console::capture(), None).err().unwrap();
    assert!(
        refused.contains("component app-demo requires KeyValueStore@1.0 under the name KeyValueStore, which both")
            && refused.contains("give one of them another name with register"),
        "{refused}"
    );
}

fn deep_and_deeply_nested_portal_calls_fail_cleanly() {
    // A caller deep in its own stack calls a service that overflows its stack: the service's
    // domain ends with a stack overflow, never the process (the fiber used to end first).
    for depth in [2000, 3500, 4500, 5000] {
        let config = format!(
            "[[domain]]\nname = \"Spin\"\n[[domain.component]]\nname = \"test-hostile\"\nargs = \"serve-spin\"\n\
             [[domain]]\nname = \"Deep\"\nstack = \"8 MiB\"\nheap = \"32 MiB\"\n[[domain.component]]\nname = \"test-hostile\"\nargs = \"deep-call {depth}\"\n"
        );
        let run = Run::boot(&config, Duration::from_secs(60));
        assert!(run.outcome.finished, "{depth}: {:?}", run.lines());
        let failed = format!("deep call at {depth} frames failed: service trapped");
        assert!(run.has_line(&failed), "{depth}: {:?}", run.lines());
        let reason = run.domain("Spin").termination_reason().unwrap_or_default();
        assert!(reason.contains("stack overflow"), "{depth}: {reason}");
    }
    // Two services that call each other: the ninth nested call is refused, and the refusal
    // travels back up; a chain within the limit works.
    let config = "[[domain]]\nname = \"A\"\n[[domain.component]]\nname = \"test-hostile\"\nargs = \"serve-relay\"\n\
                  register = { Spinner = \"RelayA\" }\nbind = { Relay = \"RelayB\" }\n\
                  [[domain]]\nname = \"B\"\n[[domain.component]]\nname = \"test-hostile\"\nargs = \"serve-relay\"\n\
                  register = { Spinner = \"RelayB\" }\nbind = { Relay = \"RelayA\" }\n\
                  [[domain]]\nname = \"Client\"\n[[domain.component]]\nname = \"test-hostile\"\nargs = \"relay\"\n\
                  bind = { Relay = \"RelayA\" }\n";
    let run = Run::boot(config, Duration::from_secs(60));
    assert!(run.has_line("relay 20: Err(Host(QuotaExceeded))"), "{:?}", run.lines());
    assert!(run.has_line("relay 5: Ok(5)"), "{:?}", run.lines());
    assert!(["A", "B", "Client"].iter().all(|d| run.domain(d).termination_reason().is_none()), "{:?}", run.lines());
}

fn killing_a_domain_that_holds_a_lock_releases_the_caller_waiting_for_it_through_a_portal() {
    let registry = registry();
    let config = "[system]\ncpus = 1\n\
                  [[domain]]\nname = \"Server\"\n[[domain.component]]\nname = \"test-waiting\"\nargs = \"server\"\n\
                  [[domain]]\nname = \"Client\"\n[[domain.component]]\nname = \"test-waiting\"\nargs = \"client-locked\"\n";
    let (kernel, outcome) =
        domos::boot(config, registry, Console::capture(), Some(Duration::from_millis(300))).expect("boots");
    assert!(!outcome.finished, "the client waits for the lock: {:?}", kernel.console.lines());
    let domain = |name: &str| kernel.domains().into_iter().find(|d| d.name == name).unwrap();
    let waiting_cpu = domain("Client").cpu_ns();
    kernel.terminate(&domain("Server"), "stopped by the test".into());
    assert!(kernel.scheduler.wait_idle(Some(Duration::from_secs(10))), "{:?}", kernel.console.lines());
    let lines = kernel.console.lines();
    kernel.shutdown();
    assert!(lines.iter().any(|l| l.contains("[Server] holding the lock")), "{lines:?}");
    let ended = lines.iter().find(|l| l.contains("[Client] locked call: ")).unwrap_or_else(|| panic!("{lines:?}"));
    assert!(ended.ends_with("locked call: service is gone (deactivated or its domain terminated)"), "{ended}");
    assert_eq!(domain("Client").termination_reason(), None);
    assert!(waiting_cpu < 20_000_000, "the waiting caller spent no CPU: {waiting_cpu} ns");
}

/// The spinner once ran past a slice, so the call into it that never returns is preempted and
/// runs until the spinner's domain is terminated from outside. (A service that spins in its
/// first call is ended by the kernel: `a_service_that_spins_in_its_first_call_is_ended`.)
fn terminating_a_service_releases_a_caller_blocked_in_it() {
    let config = "[[domain]]\nname = \"Spinner\"\n[[domain.component]]\nname = \"test-hostile\"\nargs = \"serve-spin\"\n\
                  [[domain]]\nname = \"Caller\"\n[[domain.component]]\nname = \"test-hostile\"\nargs = \"call-spinner-threads 1\"\n";
    let run = Run::boot(config, Duration::from_millis(500));
    assert!(!run.outcome.finished, "{:?}", run.lines());
    assert!(run.has_line("[Caller] 1 threads call the spinner"), "{:?}", run.lines());
    run.kernel.terminate(run.domain("Spinner"), "stopped by the test".into());
    assert!(run.kernel.scheduler.wait_idle(Some(Duration::from_secs(10))), "{:?}", run.lines());
    assert!(run.has_line("[Caller] thread 0: spinner call failed: service is gone"), "{:?}", run.lines());
    assert_eq!(run.domain("Caller").termination_reason(), None);
    assert_eq!(run.domain("Spinner").handle_count(), 0, "termination revoked the spinner's handles");
    assert!(run.domain("Spinner").instances().is_empty(), "termination released the spinner's memory");
}

/// A call that spins from a service's first call cannot be preempted: the kernel ends the
/// service's domain once the call has used `UNPREEMPTIBLE_CPU` (200 ms) after its first slice,
/// and the caller gets `ServiceDead`.
fn a_service_that_spins_in_its_first_call_is_ended() {
    let config = "[[domain]]\nname = \"Spinner\"\n[[domain.component]]\nname = \"test-hostile\"\nargs = \"serve-spin\"\n\
                  [[domain]]\nname = \"Caller\"\n[[domain.component]]\nname = \"test-hostile\"\nargs = \"call-spinner\"\n";
    let run = Run::boot(config, Duration::from_secs(20));
    assert!(run.outcome.finished, "{:?}", run.lines());
    assert!(run.has_line("[Caller] spinner call failed: service is gone"), "{:?}", run.lines());
    let reason = run.domain("Spinner").termination_reason().unwrap_or_default();
    assert!(reason.contains("without giving up its kernel CPU"), "{reason}");
    assert!(run.domain("Spinner").cpu_ns() >= 200_000_000, "charged as it ran");
    assert_eq!(run.domain("Caller").termination_reason(), None);
}

/// Issue 12, hole 4: two threads (as many as the kernel's CPUs) call a service whose `null`
/// never returns, after a call of it ran past a slice. Their calls are preempted at the end of
/// each slice like threads (the SDK makes them through `portal_call_waiting` when `portal_call`
/// answers `MustWait`), so a domain that computes keeps running; the spinner's domain is charged
/// for its calls while they run; terminating it ends them, and the system shuts down.
fn callers_of_a_spinning_service_are_preempted_and_other_domains_run() {
    let config = "[system]\ncpus = 2\n\
                  [[domain]]\nname = \"Spinner\"\n[[domain.component]]\nname = \"test-hostile\"\nargs = \"serve-spin\"\n\
                  [[domain]]\nname = \"Caller\"\n[[domain.component]]\nname = \"test-hostile\"\nargs = \"call-spinner-threads 2\"\n\
                  [[domain]]\nname = \"Busy\"\n[[domain.component]]\nname = \"test-hostile\"\nargs = \"spin\"\n";
    let run = Run::boot(config, Duration::from_millis(600));
    assert!(!run.outcome.finished);
    // On a loaded machine the caller may not have started its threads within the boot's 600 ms.
    let started = std::time::Instant::now() + Duration::from_secs(10);
    while !run.has_line("[Caller] 2 threads call the spinner") && std::time::Instant::now() < started {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(run.has_line("[Caller] the spinner ran Ok(150) ms and returned"), "{:?}", run.lines());
    assert!(run.has_line("[Caller] 2 threads call the spinner"), "{:?}", run.lines());
    let (spinner, busy) = (run.domain("Spinner"), run.domain("Busy"));
    let (computed, charged) = (busy.cpu_ns(), spinner.cpu_ns());
    std::thread::sleep(Duration::from_millis(400));
    assert!(!run.has_line("spinner call failed"), "both calls still run: {:?}", run.lines());
    let computed = busy.cpu_ns() - computed;
    assert!(computed >= 40_000_000, "the busy domain ran {computed} ns in 400 ms: {:?}", run.lines());
    let charged = spinner.cpu_ns() - charged;
    assert!(charged >= 40_000_000, "the spinner was charged {charged} ns in 400 ms: {:?}", run.lines());
    assert_eq!(spinner.termination_reason(), None);

    run.kernel.terminate(spinner, "stopped by the test".into());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let ended = || (0..2).all(|n| run.has_line(&format!("[Caller] thread {n}: spinner call failed: service is gone")));
    while !ended() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(ended(), "{:?}", run.lines());
    assert_eq!(run.domain("Caller").termination_reason(), None);
    run.kernel.terminate(busy, "stopped by the test".into());
    assert!(run.kernel.scheduler.wait_idle(Some(Duration::from_secs(10))), "{:?}", run.lines());
}

/// Mutated component binaries are refused with an error or accepted, never a panic (a cheap fuzz
/// of the validator, verifier and manifest parser together).
fn mutated_components_never_panic_the_loader() {
    let (threaded, single) = domos::guest_component("svc-summary").unwrap();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let (mut refused, mut accepted) = (0, 0);
    let mut config = wasmtime::Config::new();
    config.wasm_threads(true).shared_memory(true);
    let engine = wasmtime::Engine::new(&config).unwrap();
    for round in 0..400 {
        let mut bytes = if round % 2 == 0 { threaded.clone() } else { single.clone() };
        for _ in 0..(seed % 8 + 1) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let at = (seed as usize) % bytes.len();
            bytes[at] = (seed >> 32) as u8;
        }
        let result = std::panic::catch_unwind(|| ComponentRegistry::default().add("mutant", &bytes));
        match result {
            Ok(Err(e)) => {
                // A refusal says whose and why, on one line.
                let why = e.strip_prefix("component mutant: ").unwrap_or_else(|| panic!("round {round}: {e}"));
                assert!(!why.trim().is_empty() && !e.contains('\n'), "round {round}: {e:?}");
                refused += 1;
            }
            // Accepted: the loader instrumented it with the stack guard, and wasmtime translates
            // what the loader accepted, as the kernel will.
            Ok(Ok(component)) => {
                let code = component.code_for(Translator::Cranelift).unwrap_or_else(|e| panic!("round {round}: {e}"));
                if let Err(e) = wasmtime::Module::new(&engine, code) {
                    panic!("round {round}: the loader accepted a module wasmtime cannot translate: {e:#}");
                }
                accepted += 1;
            }
            Err(_) => panic!("the loader panicked on mutation round {round}"),
        }
    }
    assert!(
        refused > 0 && accepted > 0,
        "mutations are both refused and accepted: {refused} refused, {accepted} accepted"
    );
}

fn every_technology_computes_the_same_grafts() {
    use domos_grafts::{logical_disk, md5, page_eviction};
    let searches = page_eviction::SEARCHES;
    let page_eviction = page_eviction::run(&page_eviction::inputs(searches), searches);
    let rest = format!(
        "{} {}",
        md5::hex(&md5::digest(&md5::inputs())),
        logical_disk::run(&logical_disk::inputs(logical_disk::WRITES))
    );
    let expected = format!("1 {page_eviction} {rest}");
    for settings in ["", "bounds_checks = \"explicit\"\npreemption = false\n", "translator = \"pulley\"\n"] {
        let config = format!(
            "[[domain]]\nname = \"Graft\"\nheap = \"64 MiB\"\n{settings}[[domain.component]]\nname = \"bench-grafts\"\nargs = \"run {expected}\"\n"
        );
        let run = Run::boot(&config, Duration::from_secs(120));
        for graft in ["page_eviction", "md5", "logical_disk"] {
            assert!(run.has_line(&format!("[Graft] bench {graft} ")), "{settings}: {:?}", run.lines());
        }
        assert!(!run.has_line("error"), "{settings}: {:?}", run.lines());
    }
    // A wrong expectation is reported, not measured.
    let wrong = format!("1 {} {rest}", page_eviction ^ 1);
    let run = Run::boot(
        &format!(
            "[[domain]]\nname = \"Graft\"\nheap = \"64 MiB\"\n[[domain.component]]\nname = \"bench-grafts\"\nargs = \"run {wrong}\"\n"
        ),
        Duration::from_secs(120),
    );
    assert!(run.has_line("error page_eviction: result"), "{:?}", run.lines());

    let config = format!(
        "[[domain]]\nname = \"Application\"\nheap = \"64 MiB\"\nmax_message = \"128 KiB\"\n[[domain.component]]\nname = \"bench-grafts\"\nargs = \"server\"\n\
         [[domain]]\nname = \"Kernel\"\nheap = \"64 MiB\"\nmax_message = \"128 KiB\"\n[[domain.component]]\nname = \"bench-grafts\"\nargs = \"client {expected}\"\n"
    );
    let run = Run::boot(&config, Duration::from_secs(120));
    for name in ["page_eviction_server", "md5_server", "logical_disk_server", "logical_disk_server_batch256"] {
        assert!(run.has_line(&format!("[Kernel] bench {name} ")), "{:?}", run.lines());
    }
    assert!(!run.has_line("error"), "{:?}", run.lines());
}

fn mutexes_and_condition_variables_block_in_the_kernel_and_count_right() {
    let config =
        "[[domain]]\nname = \"Contend\"\n[[domain.component]]\nname = \"test-hostile\"\nargs = \"contend 20000\"\n";
    let run = Run::boot(config, Duration::from_secs(60));
    assert!(run.outcome.finished, "{:?}", run.lines());
    assert!(run.has_line("counted 160000 of 160000"), "{:?}", run.lines());
    assert!(run.has_line("slept at least 20 ms: true"), "{:?}", run.lines());
}

fn threads_blocked_forever_cost_no_cpu_and_end_with_their_domain() {
    let config = format!(
        "[system]\ncpus = 1\n{DEMO_DOMAINS}[[domain]]\nname = \"Stuck\"\n[[domain.component]]\nname = \"test-hostile\"\nargs = \"block-forever\"\n"
    );
    let run = Run::boot(&config, Duration::from_secs(2));
    assert!(!run.outcome.finished, "the blocked threads never end on their own");
    assert!(run.has_line("[Stuck] blocked") && run.has_line("demo finished: ok"), "{:?}", run.lines());
    let stuck = run.domain("Stuck");
    assert!(stuck.cpu_ns() < 100_000_000, "blocked threads do not spin");
    run.kernel.terminate(stuck, "stopped by the test".into());
    assert!(run.kernel.scheduler.wait_idle(Some(Duration::from_secs(10))), "blocked and sleeping threads end at once");
}

/// Handlers rustc compiled from ordinary loops (`for i in 0..16`, a fixed-size array, a call
/// chain, nested loops) are proved bounded when the component is loaded, with their bounds kept,
/// and run; a listed export whose loop writes its own counter in the body is refused, naming the
/// function and the loop.
fn bounded_handlers_are_proved_at_load_and_unbounded_ones_refused() {
    let (threaded, single) =
        domos::guest_component("test-bounded").expect("test components are built by domos/build.rs");
    let mut registry = domos::embedded_components().expect("embedded components verify");
    let component = registry.add_pair("test-bounded", &threaded, &single).expect("rustc's loops are counted loops");
    let exports: Vec<&str> = component.bounded.iter().map(|(export, _)| export.as_str()).collect();
    assert_eq!(exports, component.manifest.bounded, "every listed export has a bound");
    let bound = |name: &str| component.bounded.iter().find(|(export, _)| export == name).map(|(_, b)| *b).unwrap();
    for build in [&threaded, &single] {
        for (listed, kept) in &component.bounded {
            // The manifest lists the interrupt handler by the entry point's name; the module
            // exports it under the component's (`domos_interrupt:test-bounded`).
            let export = if listed == "domos_interrupt" { &component.entries.interrupt } else { listed };
            let checked = domos_loader::bounded::check(build, export).unwrap();
            assert!(checked <= *kept, "{listed}: the kept bound covers both builds");
        }
    }
    // 16 rounds; 64 entries; three runs of a 100-step loop; 8 × 64 steps.
    assert!((16..2_000).contains(&bound("bounded_rounds")), "{:?}", component.bounded);
    assert!((64..2_000).contains(&bound("bounded_table_sum")), "{:?}", component.bounded);
    assert!((64..2_000).contains(&bound("bounded_table_fill")), "{:?}", component.bounded);
    assert!((300..20_000).contains(&bound("bounded_chain")), "{:?}", component.bounded);
    assert!((512..50_000).contains(&bound("bounded_nested")), "{:?}", component.bounded);
    let config = "[[domain]]\nname = \"Bounded\"\n[[domain.component]]\nname = \"test-bounded\"\n";
    let (kernel, _) = domos::boot(config, registry, Console::capture(), Some(Duration::from_secs(30))).expect("boots");
    let lines = kernel.console.lines();
    kernel.shutdown();
    assert!(lines.iter().any(|l| l.contains("[Bounded] bounded handlers ran")), "{lines:?}");

    let mut registry = ComponentRegistry::default();
    let spin = wat_component(
        "name = \"spin\"\nversion = \"1\"\nbounded = [\"tick\"]",
        r#"(func $spin (export "tick") (param i32) (result i32) (local i32)
             i32.const 0 local.set 1
             loop
               local.get 0 local.set 1
               local.get 1 i32.const 1 i32.add local.tee 1 i32.const 16 i32.lt_u br_if 0
             end
             local.get 1)"#,
    );
    let error = registry.add("spin", &spin).unwrap_err();
    assert!(error.starts_with("component spin: bounded export tick: function 0 (spin): loop at offset 0x"), "{error}");
    assert!(
        error.contains("is not a counted loop (its counter, local 1, is written in the body at offset 0x"),
        "{error}"
    );
    let missing = registry.add("missing", &wat_component("name = \"m\"\nversion = \"1\"\nbounded = [\"nope\"]", ""));
    assert!(missing.unwrap_err().contains("nope: the module exports no function of that name"));
}

fn the_trace_shows_every_thread_running_and_its_portal_calls() {
    let (kernel, outcome) =
        domos::boot_traced(DEMO, registry(), Console::capture(), Some(Duration::from_secs(60)), true).expect("boots");
    assert!(outcome.finished);
    let domains: Vec<(u32, String)> = kernel.domains().iter().map(|d| (d.id, d.name.clone())).collect();
    let json = domos::trace::chrome_json(&kernel.scheduler.trace, &domains);
    kernel.shutdown();
    let client = domains.iter().find(|(_, n)| n == "Client").unwrap().0;
    assert!(json.contains("\"name\":\"process_name\",\"args\":{\"name\":\"Client\"}"), "{json}");
    assert!(json.contains("\"cat\":\"run\",\"name\":\"run on cpu"), "{json}");
    assert!(json.contains(&format!("\"cat\":\"portal\",\"name\":\"call Store\",\"pid\":{client},")), "{json}");
    assert!(json.contains("\"thread_name\",\"args\":{\"name\":\"app-demo main\"}"), "{json}");
}

fn a_server_works_with_the_cpu_share_of_the_client_that_calls_it() {
    // One CPU; the clients do next to nothing themselves, the server's MD5 is the work. If the
    // server's time were its own, both clients would get about as many calls done; it runs on the
    // caller's CPU time and share instead, so the 300-ticket client gets about three times more.
    let config = "[system]\ncpus = 1\n\
                  [[domain]]\nname = \"Server\"\nheap = \"64 MiB\"\nmax_message = \"128 KiB\"\n[[domain.component]]\nname = \"bench-grafts\"\nargs = \"server\"\n\
                  [[domain]]\nname = \"Large\"\ncpu_share = 300\nmax_message = \"128 KiB\"\n[[domain.component]]\nname = \"bench-sched\"\nargs = \"donate 1500\"\n\
                  [[domain]]\nname = \"Small\"\ncpu_share = 100\nmax_message = \"128 KiB\"\n[[domain.component]]\nname = \"bench-sched\"\nargs = \"donate 1500\"\n";
    let run = Run::boot(config, Duration::from_secs(30));
    assert!(run.outcome.finished, "{:?}", run.lines());
    let calls = |domain: &str| -> f64 {
        run.lines()
            .iter()
            .find_map(|l| l.strip_prefix(&format!("[{domain}] donated calls "))?.trim().parse().ok())
            .unwrap_or_else(|| panic!("{domain} reported no calls: {:?}", run.lines()))
    };
    let ratio = calls("Large") / calls("Small");
    assert!((2.2..4.0).contains(&ratio), "calls Large:Small = {ratio}");
    let cpu = |name: &str| run.domain(name).cpu_ns() as f64;
    assert!(cpu("Server") < 0.05 * cpu("Small"), "the server's work is charged to its callers");
}

fn timer_interrupts_run_the_bounded_handler_in_its_own_thread() {
    let (threaded, single) = domos::guest_component("test-bounded").expect("built by domos/build.rs");
    let mut registry = registry();
    registry.add_pair("test-bounded", &threaded, &single).expect("verifies");
    let config = "[system]\ncpus = 1\n[[domain]]\nname = \"Ticks\"\n[[domain.component]]\nname = \"test-bounded\"\nargs = \"ticks 20\"\n\
         [[domain]]\nname = \"Spin\"\n[[domain.component]]\nname = \"test-hostile\"\nargs = \"spin\"\n\
         [[domain]]\nname = \"NoHandler\"\n[[domain.component]]\nname = \"test-hostile\"\nargs = \"attach-timer\"\n";
    let (kernel, _) = domos::boot(config, registry, Console::capture(), Some(Duration::from_secs(3))).expect("boots");
    let lines = kernel.console.lines();
    let ticks = kernel.domains().into_iter().find(|d| d.name == "Ticks").unwrap();
    let spin = kernel.domains().into_iter().find(|d| d.name == "Spin").unwrap();
    kernel.terminate(&spin, "stopped by the test".into());
    assert!(kernel.scheduler.wait_idle(Some(Duration::from_secs(10))), "the handler thread ended with its source");
    kernel.shutdown();
    let handled = lines.iter().find(|l| l.contains("[Ticks] 20 ticks handled by the interrupt thread")).cloned();
    let ms: u64 = handled
        .as_deref()
        .and_then(|l| l.split(" in ").nth(1)?.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("{lines:?}"));
    assert!(ms >= 38, "20 ticks of 2 ms each, while a spinning domain shares the one CPU: {ms} ms");
    assert_eq!(ticks.termination_reason(), None, "{lines:?}");
    assert_eq!(ticks.live_threads(), 0, "main and the interrupt thread ended");
    assert!(
        lines.iter().any(|l| l.contains("[NoHandler] timer without a bounded handler: operation not granted")),
        "{lines:?}"
    );
}

fn local_schedulers_order_a_domains_threads_and_components_can_require_one() {
    // Slices of 2 ms, so that each thread's 30 ms of work is preempted even when the test
    // machine is loaded and the timer ticks late; the local slices are shorter still.
    let order = |local: &str| -> String {
        let system_slice = if local.contains("slice_ms") { 20 } else { 2 };
        let config = format!(
            "[system]\ncpus = 1\nslice_ms = {system_slice}\n[[domain]]\nname = \"Order\"\nscheduler = {local}\n[[domain.component]]\nname = \"test-hostile\"\nargs = \"order\"\n"
        );
        let run = Run::boot(&config, Duration::from_secs(30));
        assert!(run.outcome.finished, "{local}: {:?}", run.lines());
        let line = run.lines().into_iter().find_map(|l| l.split("order ").nth(1).map(str::to_string));
        line.unwrap_or_else(|| panic!("{local}: {:?}", run.lines()))
    };
    // The built-in schedulers and the scheduler components order the threads alike.
    for (built_in, component) in
        [("fifo", "sched-fifo"), ("priority", "sched-priority"), ("round-robin", "sched-round-robin")]
    {
        let choices = [format!("\"{built_in}\""), format!("{{ component = \"{component}\" }}")];
        for choice in choices {
            let order = order(&choice);
            match built_in {
                // Non-preemptive FIFO: a thread the timer preempts resumes before the others start.
                "fifo" => assert_eq!(order, "AAAAAAAAAABBBBBBBBBBCCCCCCCCCC", "{choice}"),
                // Priority: B (5), then C (1), then A (0).
                "priority" => assert_eq!(order, "BBBBBBBBBBCCCCCCCCCCAAAAAAAAAA", "{choice}"),
                // Round-robin: every thread gets the CPU before any finishes.
                _ => assert!(order.find('C') < order.rfind('A'), "{choice}: {order}"),
            }
        }
    }
    // A local scheduler's own, shorter slice: it is interrupted every 1 ms within the domain's
    // 20 ms, and still keeps its policy.
    let sliced = order("{ component = \"sched-round-robin\", slice_ms = 1 }");
    assert!(sliced.find('C') < sliced.rfind('A'), "{sliced}");
    assert_eq!(order("{ component = \"sched-fifo\", slice_ms = 1 }"), "AAAAAAAAAABBBBBBBBBBCCCCCCCCCC");

    let mut components = registry();
    let needs_fifo = wat_component("name = \"needs-fifo\"\nversion = \"1\"\nscheduler = \"fifo\"", "");
    components.add("needs-fifo", &needs_fifo).unwrap();
    let config = "[[domain]]\nname = \"Fs\"\n[[domain.component]]\nname = \"needs-fifo\"\n";
    let error = domos::boot(config, components.clone(), Console::capture(), None).err().unwrap_or_default();
    assert_eq!(
        error,
        "domain Fs: component needs-fifo requires the fifo local scheduler, but the domain uses round-robin"
    );
    // A FIFO scheduler component satisfies the requirement.
    let config = "[[domain]]\nname = \"Fs\"\nscheduler = { component = \"sched-fifo\" }\n[[domain.component]]\nname = \"needs-fifo\"\n";
    let (kernel, _) = domos::boot(config, components, Console::capture(), Some(Duration::from_secs(5))).expect("boots");
    kernel.shutdown();
}

/// Two threads of a domain hand a turn back and forth through atomic variables on two kernel
/// CPUs, under each scheduler component: every turn is a thread made runnable on one CPU while
/// the other asks the component what to run. A notice that fell between the component's
/// answer of nothing and the run queue's note of it left the domain passed over with a thread
/// to run, and the system stopped (before the fix, 3 runs of 5 with 20,000 turns).
fn scheduler_components_on_two_cpus_lose_no_wake_up() {
    for component in ["sched-fifo", "sched-priority", "sched-round-robin"] {
        let config = format!(
            "[system]\ncpus = 2\n[[domain]]\nname = \"Turns\"\nscheduler = {{ component = \"{component}\" }}\n\
             [[domain.component]]\nname = \"bench-sched\"\nargs = \"pingpong 50000\"\n"
        );
        let run = Run::boot(&config, Duration::from_secs(30));
        assert!(run.outcome.finished, "{component}: the turns stopped: {:?}", run.lines());
        assert!(run.has_line("[Turns] bench wait_notify_rt "), "{component}: {:?}", run.lines());
    }
}

fn the_global_scheduler_is_chosen_by_the_configuration() {
    let ratio = |global: &str| -> f64 {
        let config = format!(
            "[system]\ncpus = 1\nscheduler = {global}\n\
             [[domain]]\nname = \"Large\"\ncpu_share = 300\n[[domain.component]]\nname = \"test-hostile\"\nargs = \"spin\"\n\
             [[domain]]\nname = \"Small\"\ncpu_share = 100\n[[domain.component]]\nname = \"test-hostile\"\nargs = \"spin\"\n"
        );
        let run = Run::boot(&config, Duration::from_millis(800));
        let cpu = |name: &str| run.domain(name).cpu_ns() as f64;
        let ratio = cpu("Large") / cpu("Small");
        assert!(!run.has_line("failed"), "{global}: {:?}", run.lines());
        for name in ["Large", "Small"] {
            run.kernel.terminate(run.domain(name), "stopped by the test".into());
        }
        ratio
    };
    for stride in ["\"stride\"", "{ component = \"sched-stride\" }"] {
        let ratio = ratio(stride);
        assert!((2.4..3.6).contains(&ratio), "{stride} follows the tickets: {ratio}");
    }
    for round_robin in ["\"round-robin\"", "{ component = \"sched-global-round-robin\" }"] {
        let ratio = ratio(round_robin);
        assert!((0.7..1.4).contains(&ratio), "{round_robin} ignores them: {ratio}");
    }
}

fn scheduler_components_that_loop_trap_or_answer_garbage_are_replaced_and_the_domain_runs_on() {
    // A looping scheduler is stopped by its own work, so also in a domain without preemption
    // checks (whose code the epoch timer cannot interrupt).
    for (priority, what, preemption) in [
        (101, "activated() did not return within 2000000 instructions", true),
        (101, "activated() did not return within 2000000 instructions", false),
        (102, "activated() wasm trap: wasm `unreachable` instruction executed", true),
        (103, "activated() answered thread 3735928559, which is not a thread of the domain", true),
    ] {
        let config = format!(
            "[system]\ncpus = 1\n\
             [[domain]]\nname = \"Bad\"\npreemption = {preemption}\ngrants = [\"scheduling\"]\nscheduler = {{ component = \"test-bad-scheduler\" }}\n[[domain.component]]\nname = \"test-scheduling\"\nargs = \"bad {priority}\"\n\
             [[domain]]\nname = \"Other\"\n[[domain.component]]\nname = \"test-hostile\"\nargs = \"order\"\n"
        );
        let run = Run::boot(&config, Duration::from_secs(30));
        assert!(run.outcome.finished, "{priority}: {:?}", run.lines());
        let failed = format!("domain Bad: scheduler test-bad-scheduler failed: {what}");
        assert!(run.lines().iter().any(|l| l.contains(&failed)), "{failed}: {:?}", run.lines());
        assert!(run.has_line("the built-in round-robin scheduler takes over"), "{:?}", run.lines());
        assert!(run.has_line(&format!("survived {priority}")), "{:?}", run.lines());
        assert!(run.has_line("order "), "the other domain ran to its end: {:?}", run.lines());
        assert!(run.domain("Bad").termination_reason().is_none());
    }

    // A global scheduler that answers a domain with nothing to run, or never answers.
    let mut components = registry();
    for (name, pick, what) in [
        ("sched-bogus", "(i32.const 999)", "pick() answered domain 999, which has no thread to run"),
        ("sched-stuck", "(loop (br 0)) (i32.const 0)", "pick() did not return within 2000000 instructions"),
    ] {
        let module = wat_component(
            &format!("name = \"{name}\"\nversion = \"1\"\npolicy = \"round-robin\""),
            &format!(
                r#"(func (export "domos_global_runnable") (param i32 i32))
                   (func (export "domos_global_idle") (param i32))
                   (func (export "domos_global_pick") (param i32) (result i32) {pick})
                   (func (export "domos_global_ran") (param i32 i64))"#
            ),
        );
        components.add(name, &module).unwrap();
        let config = format!(
            "[system]\ncpus = 1\nscheduler = {{ component = \"{name}\" }}\n\
             [[domain]]\nname = \"Other\"\n[[domain.component]]\nname = \"test-hostile\"\nargs = \"order\"\n"
        );
        let (kernel, outcome) =
            domos::boot(&config, components.clone(), Console::capture(), Some(Duration::from_secs(30))).expect("boots");
        let lines = kernel.console.lines();
        kernel.shutdown();
        assert!(outcome.finished, "{lines:?}");
        let failed = format!("global scheduler {name} failed: {what}; the built-in round-robin scheduler takes over");
        assert!(lines.iter().any(|l| l.contains(&failed)), "{failed}: {lines:?}");
        assert!(lines.iter().any(|l| l.contains("order ")), "{lines:?}");
    }

    // A scheduler whose preempted() is not bounded, or that imports a blocking call, is refused.
    let looping_preempted = wat_component(
        "name = \"sched-unbounded\"\nversion = \"1\"\nbounded = [\"domos_sched_preempted\"]",
        r#"(func (export "domos_sched_runnable") (param i32 i32))
           (func (export "domos_sched_preempted") (param i32 i32) (loop (br 0)))
           (func (export "domos_sched_activated") (param i32) (result i32) (i32.const 0))"#,
    );
    let refused = components.add("sched-unbounded", &looping_preempted).err().unwrap_or_default();
    assert!(refused.contains("domos_sched_preempted"), "{refused}");
    let blocking = wat_component(
        "name = \"sched-blocking\"\nversion = \"1\"\nbounded = [\"domos_sched_preempted\"]",
        r#"(import "domos" "yield_now" (func $yield))
           (func (export "domos_sched_runnable") (param i32 i32) (call $yield))
           (func (export "domos_sched_preempted") (param i32 i32))
           (func (export "domos_sched_activated") (param i32) (result i32) (i32.const 0))"#,
    );
    components.add("sched-blocking", &blocking).unwrap();
    let config = "[[domain]]\nname = \"D\"\ngrants = [\"scheduling\"]\nscheduler = { component = \"sched-blocking\" }\n[[domain.component]]\nname = \"test-scheduling\"\n";
    let error = domos::boot(config, components.clone(), Console::capture(), None).err().unwrap_or_default();
    assert!(error.contains("scheduler sched-blocking imports yield_now"), "{error}");
    // Schedulers in the wrong place: a local one as the global, a component as a scheduler.
    let config = "[system]\nscheduler = { component = \"sched-fifo\" }\n[[domain]]\nname = \"D\"\ngrants = [\"scheduling\"]\n[[domain.component]]\nname = \"test-scheduling\"\n";
    let error = domos::boot(config, components.clone(), Console::capture(), None).err().unwrap_or_default();
    assert_eq!(error, "component sched-fifo is a local scheduler, not a global scheduler");
    let config = "[[domain]]\nname = \"D\"\ngrants = [\"scheduling\"]\nscheduler = { component = \"svc-kv\" }\n[[domain.component]]\nname = \"test-scheduling\"\n";
    let error = domos::boot(config, components.clone(), Console::capture(), None).err().unwrap_or_default();
    assert_eq!(error, "domain D: component svc-kv is not a scheduler");
    let config = "[[domain]]\nname = \"D\"\n[[domain.component]]\nname = \"sched-fifo\"\n";
    let error = domos::boot(config, components, Console::capture(), None).err().unwrap_or_default();
    assert!(error.contains("component sched-fifo is a scheduler"), "{error}");
}

fn schedulers_are_replaced_at_run_time_and_only_by_policies_the_components_accept() {
    let config = "[system]\ncpus = 1\n[[domain]]\nname = \"Admin\"\ngrants = [\"scheduling\"]\n\
                  [[domain.component]]\nname = \"test-scheduling\"\nargs = \"replace\"\n";
    let run = Run::boot(config, Duration::from_secs(30));
    assert!(run.outcome.finished, "{:?}", run.lines());
    for (name, answer) in [
        ("no-such-scheduler", "refused"),
        ("sched-stride", "refused"),
        ("sched-fifo", "refused"),
        ("sched-stride", "ok"),
        ("sched-priority", "ok"),
    ] {
        let line = format!("replace {name}: {answer}");
        assert!(run.has_line(&line), "{line}: {:?}", run.lines());
    }
    assert!(run.has_line("unknown scheduler component no-such-scheduler"), "{:?}", run.lines());
    // The priority component now orders the domain's threads: B (5), C (1), A (0).
    assert!(run.has_line("order BCA"), "{:?}", run.lines());
    assert_eq!(run.domain("Admin").scheduling.describe(), "sched-priority (component)");
    assert_eq!(run.kernel.scheduler.describe_global(), "sched-stride (component)");
    let summary = domos::summary(&run.kernel);
    assert!(summary.contains("global scheduler sched-stride (component)"), "{summary}");
    // A replaced scheduler component gives its heap back to the domain's quota.
    let admin = run.domain("Admin");
    let before = admin.heap_used();
    let fifo = SchedulerChoice::Component(SchedulerComponentConfig { component: "sched-fifo".into(), slice_ms: None });
    for _ in 0..20 {
        run.kernel.set_local_scheduler(admin, &fifo).expect("replaced");
    }
    assert_eq!(admin.heap_used(), before);

    // Without the grant, the component cannot even be placed.
    let config = "[[domain]]\nname = \"User\"\n[[domain.component]]\nname = \"test-scheduling\"\n";
    let error = domos::boot(config, registry(), Console::capture(), None).err().unwrap_or_default();
    assert!(error.contains("scheduler_replace"), "{error}");
}

fn a_scheduler_that_hears_of_portal_calls_lets_a_higher_priority_thread_run_first() {
    let order = |scheduler: &str| -> (usize, usize) {
        let config = format!(
            "[system]\ncpus = 1\n{DEMO_DOMAINS}\
             [[domain]]\nname = \"Caller\"\ngrants = [\"scheduling\"]\nscheduler = {{ component = \"{scheduler}\" }}\n\
             [[domain.component]]\nname = \"test-scheduling\"\nargs = \"defer\"\n"
        );
        let run = Run::boot(&config, Duration::from_secs(30));
        assert!(run.outcome.finished, "{:?}", run.lines());
        let lines = run.lines();
        let at =
            |text: &str| lines.iter().position(|l| l.contains(text)).unwrap_or_else(|| panic!("{text}: {lines:?}"));
        (at("high done"), at("call done (table opened: true)"))
    };
    // sched-priority opts into the portal-call notification and defers the low-priority call.
    let (high, call) = order("sched-priority");
    assert!(high < call, "deferred");
    // sched-round-robin does not hear of portal calls: the call goes first.
    let (high, call) = order("sched-round-robin");
    assert!(call < high, "not deferred");
}

fn a_disk_driver_serves_blocks_from_an_image_file_woken_by_its_completion_interrupt() {
    let image = std::env::temp_dir().join(format!("domos-disk-test-{}.img", std::process::id()));
    let mut bytes = vec![0u8; 1 << 20];
    bytes[..4].copy_from_slice(b"EXT?");
    std::fs::write(&image, &bytes).unwrap();
    let config = format!(
        "[[disk]]\nname = \"disk0\"\nimage = \"{}\"\n\
         [[domain]]\nname = \"Driver\"\ngrants = [\"devices\"]\n[[domain.component]]\nname = \"drv-disk\"\nargs = \"disk=disk0\"\n\
         [[domain]]\nname = \"Client\"\ngrants = [\"domains\", \"devices\"]\n[[domain.component]]\nname = \"test-privileged\"\nargs = \"disk-io\"\n",
        image.display()
    );
    let run = Run::boot(&config, Duration::from_secs(30));
    assert!(run.outcome.finished, "the driver's interrupt thread does not keep the system running: {:?}", run.lines());
    let written = std::fs::read(&image).unwrap();
    let _ = std::fs::remove_file(&image);
    for expected in [
        "[Client] disk has 2048 sectors",
        "[Client] read back what was written: true",
        "[Client] sector 0 starts with [69, 88, 84, 63]",
        "[Client] past the end: Some(Host(InvalidArgument))",
    ] {
        assert!(run.has_line(expected), "{expected}: {:?}", run.lines());
    }
    let pattern: Vec<u8> = (0..4096u32).map(|i| (i * 7 % 251) as u8).collect();
    assert_eq!(&written[16 * 512..24 * 512], &pattern[..], "the write reached the image file");
    // The same driver over a RAM disk.
    let ram = "[[disk]]\nname = \"disk0\"\nsize = \"64 KiB\"\n\
               [[domain]]\nname = \"Driver\"\ngrants = [\"devices\"]\n[[domain.component]]\nname = \"drv-disk\"\n\
               [[domain]]\nname = \"Client\"\ngrants = [\"domains\", \"devices\"]\n[[domain.component]]\nname = \"test-privileged\"\nargs = \"disk-io\"\n";
    let run = Run::boot(ram, Duration::from_secs(30));
    for expected in [
        "[Client] disk has 128 sectors",
        "[Client] read back what was written: true",
        "[Client] sector 0 starts with [0, 0, 0, 0]",
    ] {
        assert!(run.has_line(expected), "{expected}: {:?}", run.lines());
    }
    let rogue = "[[disk]]\nname = \"disk0\"\nsize = \"64 KiB\"\n[[domain]]\nname = \"Rogue\"\n[[domain.component]]\nname = \"drv-disk\"\n";
    let refused = domos::boot(rogue, registry(), Console::capture(), None).err().unwrap_or_default();
    assert!(
        refused.contains("component drv-disk imports disk_attach_interrupt"),
        "no disk without the grant: {refused}"
    );
}

fn shutdown_lets_the_kernel_go_even_with_threads_blocked_for_good() {
    // Blocked and sleeping threads hold wakers that point at their stores, which hold the
    // kernel: unless shutdown breaks the cycle, every boot leaks its engines and mappings.
    let config = "[system]\ncpus = 1\n[[domain]]\nname = \"Stuck\"\n[[domain.component]]\nname = \"test-hostile\"\nargs = \"block-forever\"\n";
    let (kernel, outcome) =
        domos::boot(config, registry(), Console::capture(), Some(Duration::from_millis(300))).expect("boots");
    assert!(!outcome.finished);
    let weak = Arc::downgrade(&kernel);
    kernel.shutdown();
    drop((kernel, outcome));
    assert!(weak.upgrade().is_none(), "the kernel outlived its shutdown");
}

fn a_service_that_waits_suspends_its_caller_and_the_cpu_runs_others() {
    let registry = registry();
    let config = "[system]\ncpus = 1\n\
                  [[domain]]\nname = \"Server\"\n[[domain.component]]\nname = \"test-waiting\"\nargs = \"server\"\n\
                  [[domain]]\nname = \"Client\"\n[[domain.component]]\nname = \"test-waiting\"\nargs = \"client\"\n\
                  [[domain]]\nname = \"Spin\"\n[[domain.component]]\nname = \"test-hostile\"\nargs = \"spin\"\n";
    let (kernel, _) = domos::boot(config, registry, Console::capture(), Some(Duration::from_secs(2))).expect("boots");
    let lines = kernel.console.lines();
    let domain = |name: &str| kernel.domains().into_iter().find(|d| d.name == name).unwrap();
    let client_cpu = domain("Client").cpu_ns();
    kernel.terminate(&domain("Spin"), "stopped by the test".into());
    kernel.shutdown();
    let ms = |prefix: &str| -> u64 {
        let line = lines.iter().find(|l| l.contains(prefix)).unwrap_or_else(|| panic!("{prefix}: {lines:?}"));
        line.rsplit("after ").next().and_then(|t| t.trim_end_matches(" ms").parse().ok()).unwrap()
    };
    assert!(ms("[Client] a call that sleeps 100 ms: Ok(()) after") >= 100, "{lines:?}");
    assert!(ms("[Client] a call that waits for an event 50 ms later: Ok(5) after") >= 50, "{lines:?}");
    // A caller that spun would spend the 150 ms its calls waited; one that waits, well under a
    // millisecond, but first calls and first faults on a loaded machine have taken 15 ms.
    assert!(client_cpu < 50_000_000, "the waiting caller spent no CPU: {client_cpu} ns");
}

/// One kernel CPU: the read, tried synchronously, must not spin on the lock (its holder sleeps in
/// a call that waits and could not run) but give up and be made again the waiting way.
fn a_restartable_call_that_meets_a_lock_held_by_a_waiting_call_is_made_again_the_waiting_way() {
    let config = "[system]\ncpus = 1\n\
                  [[domain]]\nname = \"Server\"\n[[domain.component]]\nname = \"test-waiting\"\nargs = \"guarded\"\n\
                  [[domain]]\nname = \"Client\"\n[[domain.component]]\nname = \"test-waiting\"\nargs = \"client-guarded\"\n";
    let (kernel, outcome) =
        domos::boot(config, registry(), Console::capture(), Some(Duration::from_secs(10))).expect("boots");
    let lines = kernel.console.lines();
    let domain = |name: &str| kernel.domains().into_iter().find(|d| d.name == name).unwrap();
    let ended = (domain("Server").termination_reason(), domain("Client").termination_reason());
    kernel.shutdown();
    assert!(outcome.finished, "{lines:?}");
    assert_eq!(ended, (None, None), "{lines:?}");
    // Alone, the read ran once; with the lock held, once abandoned and once the waiting way,
    // after the holder (which added one) let go.
    assert!(lines.iter().any(|l| l.ends_with("[Client] alone: value 0, started 1 times")), "{lines:?}");
    assert!(lines.iter().any(|l| l.ends_with("[Client] held: value 1, started 3 times")), "{lines:?}");
    assert!(lines.iter().any(|l| l.ends_with("[Client] holder ended with Ok(0)")), "{lines:?}");
}

/// Runs the `domos` binary; returns its exit code, standard output and standard error.
fn domos_command(args: &[&str]) -> (i32, String, String) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_domos")).args(args).output().expect("domos runs");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (output.status.code().unwrap_or(-1), text(&output.stdout), text(&output.stderr))
}

fn domos_fs_makes_and_changes_images_that_e2fsck_and_debugfs_accept() {
    let (e2fsck, debugfs, mke2fs) = (E2FSCK.path(), DEBUGFS.path(), MKE2FS.path());
    let dir = std::env::temp_dir().join(format!("domos-fs-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let image = dir.join("made-by-domos.img");
    let image = image.to_str().unwrap();
    let local = dir.join("local.bin");
    let data: Vec<u8> = (0..300_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    std::fs::write(&local, &data).unwrap();
    let local = local.to_str().unwrap();
    let fsck = |image: &str| {
        let out = std::process::Command::new(&e2fsck).args(["-fn", image]).output().unwrap();
        assert!(out.status.success(), "e2fsck -fn {image}: {}", String::from_utf8_lossy(&out.stdout));
    };
    let debugfs_cat = |image: &str, path: &str| {
        std::process::Command::new(&debugfs).args(["-R", &format!("cat {path}"), image]).output().unwrap().stdout
    };

    // An image made by Domos and filled by Domos, through four domains (and one, --single).
    let (code, out, err) = domos_command(&["fs", image, "mkfs", "8"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("block size 4096"), "{out}");
    fsck(image);
    for args in [
        vec!["fs", image, "mkdir", "/docs"],
        vec!["fs", image, "put", local, "/docs/data.bin"],
        vec!["fs", "--single", image, "ln", "/docs/data.bin", "/link"],
        vec!["fs", image, "mv", "/docs/data.bin", "/docs/renamed.bin"],
    ] {
        let (code, out, err) = domos_command(&args);
        assert_eq!(code, 0, "{args:?}: {out}{err}");
    }
    fsck(image);
    assert_eq!(debugfs_cat(image, "/docs/renamed.bin"), data, "debugfs reads what domos fs put");
    let (_, listing, _) = domos_command(&["fs", image, "ls", "/docs"]);
    assert!(listing.contains("renamed.bin") && !listing.contains("data.bin"), "{listing}");
    let fetched = dir.join("fetched.bin");
    let (code, out, err) = domos_command(&["fs", image, "get", "/docs/renamed.bin", fetched.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(std::fs::read(&fetched).unwrap(), data, "get returns the bytes put");
    let text = dir.join("hello.txt");
    std::fs::write(&text, "hello from domos\n").unwrap();
    assert_eq!(domos_command(&["fs", image, "put", text.to_str().unwrap(), "/hello.txt"]).0, 0);
    let (code, cat, err) = domos_command(&["fs", image, "cat", "/hello.txt"]);
    assert_eq!((code, cat.as_str()), (0, "hello from domos\n"), "{err}");

    // A full disk: the error, and an image still consistent after the half-done write.
    let big = dir.join("big.bin");
    std::fs::write(&big, vec![7u8; 12 << 20]).unwrap();
    let (code, _, err) = domos_command(&["fs", image, "put", big.to_str().unwrap(), "/big.bin"]);
    assert_eq!((code, err.trim()), (1, "domos fs: /big.bin: No space left on device"));
    fsck(image);

    // Errors, with the exit codes and messages such tools have.
    let (code, _, err) = domos_command(&["fs", image, "cat", "/missing"]);
    assert_eq!((code, err.trim()), (1, "domos fs: /missing: No such file or directory"));
    let (code, _, err) = domos_command(&["fs", image, "rm", "/docs"]);
    assert_eq!((code, err.trim()), (1, "domos fs: /docs: Directory not empty"));
    let (code, _, _) = domos_command(&["fs", image, "frobnicate"]);
    assert_eq!(code, 2);

    // An image made by mke2fs, changed by Domos, still clean.
    let theirs = dir.join("made-by-mke2fs.img");
    let theirs = theirs.to_str().unwrap();
    std::fs::write(theirs, vec![0u8; 8 << 20]).unwrap();
    let made = std::process::Command::new(&mke2fs)
        .args(["-q", "-F", "-t", "ext2", "-b", "1024", "-O", "^resize_inode,^dir_index,^ext_attr", theirs])
        .status()
        .unwrap();
    assert!(made.success());
    for args in [
        vec!["fs", theirs, "put", local, "/copy.bin"],
        vec!["fs", theirs, "mkdir", "/d"],
        vec!["fs", theirs, "rm", "/lost+found"],
    ] {
        let (code, out, err) = domos_command(&args);
        assert_eq!(code, 0, "{args:?}: {out}{err}");
    }
    fsck(theirs);
    assert_eq!(debugfs_cat(theirs, "/copy.bin"), data);

    // A corrupt image is refused with a clear error, not a crash.
    let mut bytes = std::fs::read(theirs).unwrap();
    bytes[1024 + 56] = 0; // the superblock's magic
    std::fs::write(theirs, &bytes).unwrap();
    let (code, _, err) = domos_command(&["fs", theirs, "ls", "/"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("storage stack failed") || err.contains("mount"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A directory for one test's images and files, removed when dropped.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(label: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("domos-{label}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    /// The path of `name` in the directory, as a string.
    fn path(&self, name: &str) -> String {
        self.0.join(name).to_str().unwrap().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `debugfs -R REQUEST IMAGE`'s standard output.
fn debugfs_says(image: &str, request: &str) -> String {
    let out = std::process::Command::new(DEBUGFS.path()).args(["-R", request, image]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn domos_fs_reads_symbolic_links() {
    let scratch = Scratch::new("fs-readlink");
    let image = scratch.path("links.img");
    assert_eq!(domos_command(&["fs", &image, "mkfs", "8"]).0, 0);
    // A fast link (the target in the inode) and a slow one (the target in a block).
    let long = format!("/{}", "long-target/".repeat(10));
    for (target, link) in [("/etc/passwd", "/fast"), (long.as_str(), "/slow")] {
        assert_eq!(domos_command(&["fs", &image, "ln", target, link]).0, 0);
        let (code, out, err) = domos_command(&["fs", &image, "readlink", link]);
        assert_eq!((code, out.as_str()), (0, format!("{target}\n").as_str()), "{err}");
        let theirs = if target.len() < 60 {
            debugfs_says(&image, &format!("stat {link}"))
                .lines()
                .find_map(|l| l.strip_prefix("Fast link dest: ").map(|t| t.trim_matches('"').to_string()))
                .unwrap_or_default()
        } else {
            debugfs_says(&image, &format!("cat {link}"))
        };
        assert_eq!(theirs, target, "debugfs reads the same target");
    }
    let (code, _, err) = domos_command(&["fs", &image, "readlink", "/lost+found"]);
    assert_eq!((code, err.trim()), (1, "domos fs: /lost+found: Invalid argument: not a symbolic link"));
    let (code, _, err) = domos_command(&["fs", &image, "readlink", "/none"]);
    assert_eq!((code, err.trim()), (1, "domos fs: /none: No such file or directory"));
    let (code, help, _) = domos_command(&["fs", "--help"]);
    assert!(code == 0 && help.contains("readlink PATH"), "{help}");
}

fn domos_fs_takes_any_argument_and_a_closed_pipe_without_a_panic() {
    use std::os::unix::ffi::OsStrExt;
    use std::process::{Command, Stdio};
    let scratch = Scratch::new("fs-arguments");
    let image = scratch.path("args.img");
    assert_eq!(domos_command(&["fs", &image, "mkfs", "8"]).0, 0);
    let run = |args: &[&std::ffi::OsStr]| {
        let out = Command::new(env!("CARGO_BIN_EXE_domos")).args(args).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let bad = std::ffi::OsStr::from_bytes(b"/\xff");
    // A path inside the image that is not UTF-8 is a name like any other.
    let (code, err) = run(&["fs".as_ref(), image.as_ref(), "ls".as_ref(), bad]);
    assert_eq!((code, err.trim()), (Some(1), "domos fs: /\\377: No such file or directory"));
    let (code, err) = run(&["fs".as_ref(), image.as_ref(), bad]);
    assert!(code == Some(2) && !err.contains("panicked"), "{err}");
    let (code, err) = run(&[bad]);
    assert!(code == Some(2) && !err.contains("panicked"), "{err}");
    // Local files may have any name; paths inside the image may hold spaces.
    let local = scratch.0.join(std::ffi::OsStr::from_bytes(b"local-\xff.txt"));
    std::fs::write(&local, "bytes from a file with a Latin-1 name\n").unwrap();
    let (code, err) = run(&["fs".as_ref(), image.as_ref(), "put".as_ref(), local.as_os_str(), "/a name".as_ref()]);
    assert_eq!(code, Some(0), "{err}");
    let (code, out, err) = domos_command(&["fs", &image, "cat", "/a name"]);
    assert_eq!((code, out.as_str()), (0, "bytes from a file with a Latin-1 name\n"), "{err}");
    let latin = scratch.0.join(std::ffi::OsStr::from_bytes(b"image-\xff.img"));
    std::fs::copy(&image, &latin).unwrap();
    let (code, err) = run(&["fs".as_ref(), latin.as_os_str(), "ls".as_ref(), "/".as_ref()]);
    assert_eq!(code, Some(0), "an image with a name that is not UTF-8: {err}");
    // A reader that has gone: no panic, no message, the status a shell gives after SIGPIPE.
    for command in [&["ls", "/"][..], &["cat", "/a name"]] {
        let mut args = vec!["fs", image.as_str()];
        args.extend_from_slice(command);
        let mut child = Command::new(env!("CARGO_BIN_EXE_domos"))
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!((out.status.code(), err.as_ref()), (Some(141), ""), "{args:?}");
    }
}

fn domos_fs_mkfs_does_not_overwrite_a_file_system_without_force() {
    let scratch = Scratch::new("fs-force");
    let image = scratch.path("precious.img");
    let note = scratch.path("note.txt");
    std::fs::write(&note, "keep me\n").unwrap();
    assert_eq!(domos_command(&["fs", &image, "mkfs", "8"]).0, 0);
    assert_eq!(domos_command(&["fs", &image, "put", &note, "/note"]).0, 0);
    let refused = format!("domos fs: {image} already contains an ext2 file system; mkfs --force overwrites it");
    for args in [&["mkfs"][..], &["mkfs", "4"], &["mkfs", "--block", "1024"]] {
        let (code, _, err) = domos_command(&[&["fs", image.as_str()][..], args].concat());
        assert_eq!((code, err.trim()), (1, refused.as_str()), "{args:?}");
    }
    assert_eq!(std::fs::metadata(&image).unwrap().len(), 8 << 20, "the refused mkfs 4 did not shrink the image");
    assert_eq!(domos_command(&["fs", &image, "cat", "/note"]).1, "keep me\n");
    let (code, out, err) = domos_command(&["fs", &image, "mkfs", "4", "--force"]);
    assert!(code == 0 && out.contains("blocks 1024"), "{out}{err}");
    assert_eq!(domos_command(&["fs", &image, "cat", "/note"]).0, 1, "--force made a new, empty file system");
    // One made by mke2fs is refused the same way.
    let theirs = scratch.path("theirs.img");
    std::fs::write(&theirs, vec![0u8; 4 << 20]).unwrap();
    assert!(
        std::process::Command::new(MKE2FS.path()).args(["-q", "-F", "-t", "ext2", &theirs]).status().unwrap().success()
    );
    assert_eq!(domos_command(&["fs", &theirs, "mkfs"]).0, 1);
}

fn domos_fs_errors_name_the_path_at_fault() {
    let scratch = Scratch::new("fs-blame");
    let image = scratch.path("blame.img");
    assert_eq!(domos_command(&["fs", &image, "mkfs", "8"]).0, 0);
    assert_eq!(domos_command(&["fs", &image, "mkdir", "/a"]).0, 0);
    assert_eq!(domos_command(&["fs", &image, "ln", "/somewhere", "/file"]).0, 0);
    for (args, message) in [
        (&["mv", "/a", "/nope/b"][..], "/nope: No such file or directory"),
        (&["mv", "/gone", "/a/b"], "/gone: No such file or directory"),
        (&["mv", "/a", "/file/b"], "/file: Not a directory"),
        (&["ls", "/a/nope/deeper"], "/a/nope: No such file or directory"),
        (&["mkdir", "/nope/x/y"], "/nope: No such file or directory"),
        (&["ln", "/t", "/a/nope/l"], "/a/nope: No such file or directory"),
        (&["rm", "/a/b"], "/a/b: No such file or directory"),
    ] {
        let (code, _, err) = domos_command(&[&["fs", image.as_str()][..], args].concat());
        assert_eq!((code, err.trim()), (1, format!("domos fs: {message}").as_str()), "{args:?}");
    }
    assert!(domos_command(&["fs", &image, "ls", "/a"]).1.contains(" .."), "the failed mv left /a where it was");
}

/// `name` escaped as `domos fs ls` (and `ls -b`) writes it, for names whose bytes are ASCII or
/// not UTF-8 at all.
fn ls_b(name: &[u8]) -> String {
    name.iter()
        .map(|&byte| match byte {
            b'\\' => "\\\\".to_string(),
            b' ' => "\\ ".to_string(),
            b'\n' => "\\n".to_string(),
            b'\t' => "\\t".to_string(),
            b'\r' => "\\r".to_string(),
            0x07 => "\\a".to_string(),
            0x08 => "\\b".to_string(),
            0x0c => "\\f".to_string(),
            0x0b => "\\v".to_string(),
            0x21..=0x7e => char::from(byte).to_string(),
            _ => format!("\\{byte:03o}"),
        })
        .collect()
}

fn domos_fs_takes_every_name_ext2_allows() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let scratch = Scratch::new("fs-names");
    let image = scratch.path("names.img");
    assert_eq!(domos_command(&["fs", &image, "mkfs", "16"]).0, 0);
    let fs = |args: &[&[u8]]| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_domos"));
        command.args(["fs", &image]).args(args.iter().map(|a| OsStr::from_bytes(a)));
        let out = command.output().unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
    };
    let every_byte: Vec<u8> = (1..=255u8).filter(|&b| b != b'/').collect();
    let high: Vec<u8> = (0x80..=0xffu8).collect();
    let names: Vec<Vec<u8>> = vec![
        b"a b".to_vec(),
        b"back\\slash".to_vec(),
        b"x\"y".to_vec(),
        b"it's".to_vec(),
        b"\\u0041".to_vec(),
        b"new\nline".to_vec(),
        b"tab\there".to_vec(),
        b" leading and trailing ".to_vec(),
        b"-dash".to_vec(),
        high,
        every_byte,
        vec![b'n'; 255],
    ];
    let path = |dir: &[u8], name: &[u8]| [dir, b"/", name].concat();
    for dir in [&b"/links"[..], b"/moved"] {
        assert_eq!(fs(&[b"mkdir", dir]).0, 0);
    }
    // A directory with an awkward name holds a file too.
    let odd_dir: &[u8] = b"/dir \\ \" \n \xff";
    assert_eq!(fs(&[b"mkdir", odd_dir]), (0, String::new(), String::new()));
    for (index, name) in names.iter().enumerate() {
        let local = scratch.0.join(format!("in-{index}"));
        let content = [b"the file named ".as_slice(), name].concat();
        std::fs::write(&local, &content).unwrap();
        let file = path(b"", name);
        let (code, _, err) = fs(&[b"put", local.as_os_str().as_bytes(), &file]);
        assert_eq!(code, 0, "put {name:?}: {err}");
        let back = scratch.0.join(format!("out-{index}"));
        let (code, _, err) = fs(&[b"get", &file, back.as_os_str().as_bytes()]);
        assert_eq!(code, 0, "get {name:?}: {err}");
        assert_eq!(std::fs::read(&back).unwrap(), content, "{name:?} read back");
        let (code, out, err) = fs(&[b"stat", &file]);
        assert!(code == 0 && out.contains(&format!("size {}", content.len())), "stat {name:?}: {out}{err}");
        let link = path(b"/links", name);
        assert_eq!(fs(&[b"ln", &file, &link]).0, 0, "ln {name:?}");
        let (code, out, err) = fs(&[b"readlink", &link]);
        assert_eq!((code, out), (0, format!("{}\n", ls_b(&file))), "readlink {name:?}: {err}");
    }
    let inner = path(odd_dir, b"inner file");
    let local = scratch.0.join("in-0");
    assert_eq!(fs(&[b"put", local.as_os_str().as_bytes(), &inner]).0, 0);
    // ls shows every name escaped, one line each, sorted by bytes.
    let (code, out, err) = fs(&[b"ls", b"/"]);
    assert_eq!(code, 0, "{err}");
    let mut expected: Vec<&[u8]> = names.iter().map(Vec::as_slice).collect();
    expected.extend([&b"."[..], b"..", b"lost+found", b"links", b"moved", &odd_dir[1..]]);
    expected.sort();
    let listed: Vec<&str> = out.lines().map(|line| line[2..].trim_start().split_once(' ').unwrap().1).collect();
    assert_eq!(listed, expected.iter().map(|name| ls_b(name)).collect::<Vec<_>>());
    assert_eq!(fs(&[b"ls", odd_dir]).1.lines().last().map(|l| l.ends_with(" inner\\ file")), Some(true));
    // debugfs finds every name as it is, byte for byte (it shows a backslash and the bytes
    // that are not printable ASCII as `\xNN`).
    let listing = debugfs_says(&image, "ls -l /");
    for name in &names {
        let theirs: String = name
            .iter()
            .map(|&b| {
                if b != b'\\' && (0x20..0x7f).contains(&b) { char::from(b).to_string() } else { format!("\\x{b:02x}") }
            })
            .collect();
        assert!(
            listing.lines().any(|line| line.ends_with(&format!(" {theirs}"))),
            "debugfs ls -l lists {theirs}: {listing}"
        );
    }
    // Renamed (into another directory and to another name), then removed.
    for (index, name) in names.iter().enumerate() {
        let mut renamed = name.clone();
        renamed[0] = if renamed[0] == b'z' { b'y' } else { b'z' };
        let to = path(b"/moved", &renamed);
        assert_eq!(fs(&[b"mv", &path(b"", name), &to]).0, 0, "mv {name:?}");
        let back = scratch.0.join(format!("moved-{index}"));
        assert_eq!(fs(&[b"get", &to, back.as_os_str().as_bytes()]).0, 0, "get {renamed:?}");
        assert_eq!(std::fs::read(&back).unwrap(), [b"the file named ".as_slice(), name].concat(), "{renamed:?}");
    }
    let dump = scratch.0.join("dump");
    std::fs::create_dir_all(&dump).unwrap();
    let rdump = format!("rdump /moved {}", dump.display());
    assert!(std::process::Command::new(DEBUGFS.path()).args(["-R", &rdump, &image]).status().unwrap().success());
    let mut dumped: Vec<Vec<u8>> = std::fs::read_dir(dump.join("moved"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().as_bytes().to_vec())
        .collect();
    dumped.sort();
    assert_eq!(dumped.len(), names.len(), "debugfs rdump writes every renamed file");
    let fsck = std::process::Command::new(E2FSCK.path()).args(["-fn", &image]).output().unwrap();
    assert!(fsck.status.success(), "e2fsck -fn: {}", String::from_utf8_lossy(&fsck.stdout));
    for name in &names {
        let mut renamed = name.clone();
        renamed[0] = if renamed[0] == b'z' { b'y' } else { b'z' };
        assert!(dumped.contains(&renamed), "debugfs dumped {renamed:?}");
        assert_eq!(fs(&[b"rm", &path(b"/moved", &renamed)]).0, 0, "rm {renamed:?}");
        assert_eq!(fs(&[b"rm", &path(b"/links", name)]).0, 0, "rm the link {name:?}");
    }
    assert_eq!(fs(&[b"rm", &inner]).0, 0);
    assert_eq!(fs(&[b"rm", odd_dir]).0, 0);
    assert_eq!(fs(&[b"ls", b"/moved"]).1.lines().count(), 2, "only . and .. are left");
    // A name longer than ext2's 255 bytes is refused; so are `.` and `..` as new names.
    let (code, _, err) = fs(&[b"put", local.as_os_str().as_bytes(), &path(b"", &[b'n'; 256])]);
    assert!(code == 1 && err.contains("File name too long"), "{err}");
    let (code, _, err) = fs(&[b"mkdir", b"/moved/.."]);
    assert!(code == 1 && err.contains("Invalid argument"), "{err}");
    let listing = debugfs_says(&image, "ls -l /");
    assert!(listing.contains("links") && listing.contains("moved"), "{listing}");
    let fsck = std::process::Command::new(E2FSCK.path()).args(["-fn", &image]).output().unwrap();
    assert!(fsck.status.success(), "e2fsck -fn: {}", String::from_utf8_lossy(&fsck.stdout));
}

/// Seconds since 1970 on the host's clock.
fn host_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
}

/// The superblock's mount count and last write time, from the image's bytes.
fn mount_count_and_write_time(image: &str) -> (u16, u32) {
    let bytes = std::fs::read(image).unwrap();
    let u16_at = |at: usize| u16::from_le_bytes([bytes[at], bytes[at + 1]]);
    (u16_at(1024 + 52), u32::from_le_bytes(bytes[1024 + 48..1024 + 52].try_into().unwrap()))
}

fn domos_fs_stamps_the_hosts_time_and_counts_mounts_as_linux_does() {
    let scratch = Scratch::new("fs-clock");
    let image = scratch.path("clock.img");
    let local = scratch.path("local.txt");
    std::fs::write(&local, "some bytes\n").unwrap();
    let before = host_now();
    assert_eq!(domos_command(&["fs", &image, "mkfs", "8"]).0, 0);
    assert_eq!(mount_count_and_write_time(&image).0, 0, "mkfs, like mke2fs, has not mounted it");
    for args in [&["mkdir", "/dir"][..], &["put", &local, "/dir/file"]] {
        let (code, out, err) = domos_command(&[&["fs", image.as_str()][..], args].concat());
        assert_eq!(code, 0, "{args:?}: {out}{err}");
    }
    let after = host_now();
    // New and changed inodes, and the superblock, carry the host's time, not a constant.
    let times = |path: &str| -> Vec<u64> {
        let text = debugfs_says(&image, &format!("stat {path}"));
        ["ctime:", "atime:", "mtime:"]
            .iter()
            .map(|field| {
                let hex = text.split_whitespace().skip_while(|w| w != field).nth(1).unwrap_or_else(|| panic!("{text}"));
                u64::from_str_radix(hex.trim_start_matches("0x"), 16).unwrap()
            })
            .collect()
    };
    for path in ["/dir", "/dir/file", "/"] {
        for time in times(path) {
            assert!((before..=after).contains(&time), "{path}: {time} not in {before}..={after}");
        }
    }
    let (_, stat, _) = domos_command(&["fs", &image, "stat", "/dir/file"]);
    let mtime: u64 = stat.split_whitespace().skip_while(|w| *w != "mtime").nth(1).unwrap().parse().unwrap();
    assert!((before..=after).contains(&mtime), "{stat}");
    let (count, written) = mount_count_and_write_time(&image);
    assert_eq!(count, 2, "two commands mounted it read-write");
    assert!((before..=after).contains(&u64::from(written)), "s_wtime {written}");
    // Commands that only read mount it read-only: nothing changes.
    for args in [&["ls", "/dir"][..], &["cat", "/dir/file"], &["stat", "/"], &["df"]] {
        assert_eq!(domos_command(&[&["fs", image.as_str()][..], args].concat()).0, 0);
    }
    assert_eq!(mount_count_and_write_time(&image), (count, written), "reading changed the superblock");
    // With a maximal mount count, the mount that reaches it warns, as Linux does, and works.
    let set = std::process::Command::new(DEBUGFS.path()).args(["-w", "-R", "ssv max_mnt_count 3", &image]).status();
    assert!(set.unwrap().success());
    let (code, _, err) = domos_command(&["fs", &image, "mkdir", "/third"]);
    assert_eq!((code, err.as_str()), (0, ""));
    let (code, _, err) = domos_command(&["fs", &image, "mkdir", "/fourth"]);
    assert_eq!(
        (code, err.trim()),
        (0, "domos fs: warning: maximal mount count reached, running e2fsck is recommended")
    );
    assert_eq!(mount_count_and_write_time(&image).0, 4);
    let out = std::process::Command::new(E2FSCK.path()).args(["-fn", &image]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
}

fn two_domos_fs_writing_one_image_at_once_lose_nothing() {
    let scratch = Scratch::new("fs-lock");
    let image = scratch.path("shared.img");
    assert_eq!(domos_command(&["fs", &image, "mkfs", "32"]).0, 0);
    // Writes long enough that unlocked writers overlap: each would write back its own bitmaps
    // and directory, and the last would win.
    let local = scratch.path("local.bin");
    std::fs::write(&local, (0..3_000_000u32).map(|i| (i * 7 / 3) as u8).collect::<Vec<u8>>()).unwrap();
    let fsck = || {
        let out = std::process::Command::new(E2FSCK.path()).args(["-fn", &image]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    };
    let listing = || domos_command(&["fs", &image, "ls", "/"]).1;
    let at_once = |options: &[&str], names: &[String]| -> Vec<(String, i32, String)> {
        let children: Vec<_> = names
            .iter()
            .map(|name| {
                let mut args = vec!["fs"];
                args.extend_from_slice(options);
                args.extend([image.as_str(), "put", local.as_str(), name.as_str()]);
                std::process::Command::new(env!("CARGO_BIN_EXE_domos"))
                    .args(&args)
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        names
            .iter()
            .zip(children)
            .map(|(name, child)| {
                let out = child.wait_with_output().unwrap();
                (name.clone(), out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
            })
            .collect()
    };
    // Writers at once: each either did its work, or was refused and changed nothing.
    let names: Vec<String> = (0..4).map(|i| format!("/now{i}")).collect();
    let outcomes = at_once(&[], &names);
    let ls = listing();
    let refused = format!("domos fs: {image} is in use by another domos process (--wait waits for it)");
    for (name, code, err) in &outcomes {
        match code {
            0 => assert!(ls.contains(&name[1..]), "{name} reported done but was lost: {ls}"),
            _ => assert_eq!((*code, err.trim()), (1, refused.as_str()), "{name}"),
        }
    }
    assert!(outcomes.iter().any(|(_, code, _)| *code == 0), "{outcomes:?}");
    fsck();
    // With --wait, they take turns and every one is done.
    let names: Vec<String> = (0..4).map(|i| format!("/turn{i}")).collect();
    for (name, code, err) in at_once(&["--wait"], &names) {
        assert_eq!(code, 0, "{name}: {err}");
    }
    let ls = listing();
    assert!(names.iter().all(|name| ls.contains(&name[1..])), "{ls}");
    fsck();
}

fn a_booted_system_holds_its_disk_images_against_other_domos_processes() {
    use std::os::unix::fs::DirBuilderExt;
    let scratch = Scratch::new("boot-lock");
    let image = scratch.path("held.img");
    assert_eq!(domos_command(&["fs", &image, "mkfs", "16"]).0, 0);
    // A system that runs until its --run command ends: the echo service over a pair of cards
    // (configs/net-echo.toml without its client) and the storage stack on the image.
    let echo = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/net-echo.toml")).unwrap();
    let echo = &echo[..echo.find("[[domain]]\nname = \"Client\"").expect("net-echo.toml's client")];
    let config = format!(
        "{echo}[[disk]]\nname = \"disk0\"\nimage = {image:?}\n\
         [[domain]]\nname = \"Storage\"\nheap = \"64 MiB\"\ngrants = [\"devices\"]\n\
         [[domain.component]]\nname = \"drv-disk\"\nargs = \"disk=disk0\"\n\
         [[domain.component]]\nname = \"svc-bcache\"\nargs = \"blocks=256 block=4096\"\n\
         [[domain.component]]\nname = \"fs-ext2\"\n"
    );
    let config_path = scratch.path("hold.toml");
    std::fs::write(&config_path, config).unwrap();
    for socket_dir in ["first", "second"] {
        std::fs::DirBuilder::new().mode(0o700).create(scratch.path(socket_dir)).unwrap();
    }
    // While it runs, a domos fs and a second boot of the same configuration are refused.
    let domos = env!("CARGO_BIN_EXE_domos");
    let (said_fs, said_boot) = (scratch.path("fs.out"), scratch.path("boot.out"));
    let second = scratch.path("second/control");
    let run = format!(
        "{domos} fs {image} ls / >{said_fs} 2>&1; echo \"exit $?\" >>{said_fs}; \
         {domos} boot {config_path} --control {second} >{said_boot} 2>&1; echo \"exit $?\" >>{said_boot}"
    );
    let (code, out, err) = domos_command(&[
        "boot",
        &config_path,
        "--control",
        &scratch.path("first/control"),
        "--run",
        &run,
        "--timeout",
        "60",
    ]);
    assert_eq!(code, 0, "the first boot runs its --run command: {out}{err}");
    let said_fs = std::fs::read_to_string(said_fs).unwrap();
    assert_eq!(
        said_fs,
        format!("domos fs: {image} is in use by another domos process (--wait waits for it)\nexit 1\n")
    );
    let said_boot = std::fs::read_to_string(said_boot).unwrap();
    assert!(
        said_boot.ends_with(&format!("domos: disk disk0: {image} is in use by another domos process\nexit 1\n")),
        "{said_boot}"
    );
    // Once the system has ended, the image is free again, and unharmed.
    let (code, out, err) = domos_command(&["fs", &image, "ls", "/"]);
    assert!(code == 0 && out.contains("lost+found"), "{out}{err}");
}

fn domos_fs_keeps_sparse_files_sparse_even_larger_than_the_image() {
    use std::os::unix::fs::FileExt;
    let scratch = Scratch::new("fs-sparse");
    let image = scratch.path("small.img");
    assert_eq!(domos_command(&["fs", &image, "mkfs", "256"]).0, 0);
    let free_before = domos_command(&["fs", &image, "df"]).1;
    // A local file of 1 GiB and a little: a few bytes at the start, some at 1 GiB, holes between.
    let local = scratch.path("sparse.bin");
    let file = std::fs::File::create(&local).unwrap();
    let size = (1u64 << 30) + 4096 + 11;
    file.set_len(size).unwrap();
    file.write_all_at(b"head", 0).unwrap();
    file.write_all_at(b"tail of the file", size - 16).unwrap();
    drop(file);
    let (code, out, err) = domos_command(&["fs", &image, "put", &local, "/sparse"]);
    assert_eq!(code, 0, "{out}{err}");
    let out = std::process::Command::new(E2FSCK.path()).args(["-fn", &image]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    let stat = debugfs_says(&image, "stat /sparse");
    assert!(stat.contains(&format!("Size: {size}")), "{stat}");
    // Only the written blocks, and the indirect blocks that reach them, are allocated.
    let blocks: u64 = stat.split_whitespace().skip_while(|w| *w != "Blockcount:").nth(1).unwrap().parse().unwrap();
    assert!(blocks <= 6 * 8, "{blocks} sectors for two written blocks: {stat}");
    let used = |df: &str| -> u64 {
        let words: Vec<u64> = df.split_whitespace().filter_map(|w| w.parse().ok()).collect();
        words[1] - words[2]
    };
    assert!(used(&domos_command(&["fs", &image, "df"]).1) - used(&free_before) <= 6, "blocks used");
    // And it reads back whole, holes as zeros (and as holes in the local copy).
    let back = scratch.path("back.bin");
    let (code, _, err) = domos_command(&["fs", &image, "get", "/sparse", &back]);
    assert_eq!(code, 0, "{err}");
    let metadata = std::fs::metadata(&back).unwrap();
    assert_eq!(metadata.len(), size);
    let back = std::fs::File::open(&back).unwrap();
    let mut bytes = [0u8; 16];
    back.read_exact_at(&mut bytes, size - 16).unwrap();
    assert_eq!(&bytes, b"tail of the file");
    back.read_exact_at(&mut bytes, 1 << 29).unwrap();
    assert_eq!(bytes, [0; 16]);
    back.read_exact_at(&mut bytes[..4], 0).unwrap();
    assert_eq!(&bytes[..4], b"head");
    assert!(std::os::unix::fs::MetadataExt::blocks(&metadata) < 1 << 16, "the copy is sparse too");
}

/// Runs `domos ARGS`; returns its exit code, its peak resident memory in KiB (the high-water
/// mark Linux keeps, `VmHWM`, read every 2 ms until the process ends; `wait4`'s `ru_maxrss`
/// would count this test process's memory: a child spawned with `vfork` inherits it) and, for a
/// failure to say what grew, the resident memory by kind (`RssAnon`, `RssFile`, `RssShmem` and
/// the huge pages of `smaps_rollup`) in the sample where it was largest.
fn domos_peak_memory(args: &[&str]) -> (i32, u64, String) {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_domos")).args(args).spawn().unwrap();
    let proc = format!("/proc/{}", child.id());
    let kib = |text: &str, field: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|kib| kib.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    };
    let (mut peak, mut largest, mut kinds) = (0, 0, String::new());
    loop {
        if let Ok(status) = std::fs::read_to_string(format!("{proc}/status")) {
            peak = kib(&status, "VmHWM:").unwrap_or(0).max(peak);
            let resident = kib(&status, "VmRSS:").unwrap_or(0);
            if resident > largest {
                largest = resident;
                let rollup = std::fs::read_to_string(format!("{proc}/smaps_rollup")).unwrap_or_default();
                kinds = format!(
                    "{resident} KiB resident: anonymous {}, file {}, shared {}, anonymous huge pages {} KiB",
                    kib(&status, "RssAnon:").unwrap_or(0),
                    kib(&status, "RssFile:").unwrap_or(0),
                    kib(&status, "RssShmem:").unwrap_or(0),
                    kib(&rollup, "AnonHugePages:").unwrap_or(0),
                );
            }
        }
        if let Some(exit) = child.try_wait().unwrap() {
            return (exit.code().unwrap_or(-1), peak, kinds);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn domos_fs_moves_large_files_in_bounded_memory() {
    let scratch = Scratch::new("fs-memory");
    let image = scratch.path("large.img");
    assert_eq!(domos_command(&["fs", &image, "mkfs", "128"]).0, 0);
    // 80 MiB: more than the command's whole budget of 64 MB.
    let local = scratch.path("large.bin");
    let data: Vec<u8> = (0..80u32 << 20).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    std::fs::write(&local, &data).unwrap();
    let sum = |bytes: &[u8]| bytes.iter().fold(0u64, |sum, &b| sum.wrapping_mul(31).wrapping_add(u64::from(b)));
    let (len, expected) = (data.len() as u64, sum(&data));
    drop(data);
    let (code, put_kib, put_kinds) = domos_peak_memory(&["fs", &image, "put", &local, "/large"]);
    assert_eq!(code, 0);
    let back = scratch.path("back.bin");
    let (code, get_kib, get_kinds) = domos_peak_memory(&["fs", &image, "get", "/large", &back]);
    assert_eq!(code, 0);
    let back = std::fs::read(&back).unwrap();
    assert_eq!((back.len() as u64, sum(&back)), (len, expected), "get returns what put stored");
    assert!(
        put_kib < 64_000 && get_kib < 64_000,
        "peak memory: put {put_kib} KiB (largest sample {put_kinds}), get {get_kib} KiB (largest sample {get_kinds})"
    );
}

/// Boots `test-storage ROLE` as the client of a cache of eight 1 KiB blocks, in a domain of its
/// own, over a 1 MiB RAM disk, and waits for it to finish.
fn boot_cache_client(role: &str) -> Run {
    let (threaded, single) = domos::guest_component("test-storage").expect("built by domos/build.rs");
    let mut registry = registry();
    registry.add_pair("test-storage", &threaded, &single).expect("verifies");
    let config = format!(
        "[[disk]]\nname = \"disk0\"\nsize = \"1 MiB\"\n\
         [[domain]]\nname = \"Driver\"\ngrants = [\"devices\"]\n[[domain.component]]\nname = \"drv-disk\"\nargs = \"disk=disk0\"\n\
         [[domain]]\nname = \"Cache\"\n[[domain.component]]\nname = \"svc-bcache\"\nargs = \"blocks=8 block=1024\"\n\
         [[domain]]\nname = \"Client\"\n[[domain.component]]\nname = \"test-storage\"\nargs = \"{role}\"\n"
    );
    let (kernel, outcome) =
        domos::boot(&config, registry, Console::capture(), Some(Duration::from_secs(60))).expect("boots");
    let run = Run { kernel, outcome };
    assert!(run.outcome.finished, "{:?}", run.lines());
    run
}

/// The numbers on the client's `statistics:` line.
fn cache_statistics(run: &Run) -> Vec<u64> {
    run.lines()
        .iter()
        .find_map(|l| l.strip_prefix("[Client] statistics: ").map(str::to_string))
        .unwrap_or_else(|| panic!("no statistics: {:?}", run.lines()))
        .split_whitespace()
        .filter_map(|word| word.parse().ok())
        .collect()
}

fn a_buffer_cache_evicts_writes_back_and_syncs_to_the_disk_driver() {
    // The client's 24 KiB must evict.
    let run = boot_cache_client("cache");
    for expected in [
        "[Client] cache of 8 blocks of 1024 B over a disk of 1048576 B",
        "[Client] read back what was written: true",
        "[Client] past the end: Some(Host(InvalidArgument))",
        "[Client] too long: Some(Host(InvalidArgument))",
        "[Client] the disk holds what was synced: true",
        "[Client] a view reads the block: true; after its eviction: Some(Host(Revoked))",
        "[Client] a lent buffer gets the bytes: true; written after the loan: Some(Host(Revoked))",
        "[Client] sync_range wrote back its block alone: true",
        "[Client] cache ok",
    ] {
        assert!(run.has_line(expected), "{expected}: {:?}", run.lines());
    }
    let statistics = cache_statistics(&run);
    let [hits, misses, write_backs, capacity] = statistics[..] else { panic!("{statistics:?}") };
    assert!(hits > 0 && misses > 0 && write_backs > 0, "hits {hits} misses {misses} write-backs {write_backs}");
    assert_eq!(capacity, 8);
    for domain in &run.outcome.domains {
        assert_eq!(domain.termination_reason(), None, "{}: {:?}", domain.name, run.lines());
    }
    assert!(run.domain("Cache").calls_served() >= 40, "every read and write went through the cache's portal");
}

fn a_buffer_cache_serves_other_threads_while_one_waits_for_the_disk() {
    // Four threads over twelve blocks: every thread's misses and write-backs wait for the disk
    // while the others use the cache.
    let run = boot_cache_client("concurrent");
    for expected in [
        "[Client] every thread read back what it wrote: true",
        "[Client] the disk holds every thread's last pass: true",
        "[Client] concurrent ok",
    ] {
        assert!(run.has_line(expected), "{expected}: {:?}", run.lines());
    }
    let statistics = cache_statistics(&run);
    let [hits, misses, write_backs, beside] = statistics[..] else { panic!("{statistics:?}") };
    assert!(misses > 0 && write_backs > 0, "misses {misses} write-backs {write_backs}");
    // A cache that held its lock across a disk wait would answer none.
    assert!(beside > 0, "no hit while another call waited for the disk (of {hits} hits)");
    for domain in &run.outcome.domains {
        assert_eq!(domain.termination_reason(), None, "{}: {:?}", domain.name, run.lines());
    }
}

fn readers_of_the_file_system_see_whole_versions_while_a_writer_frees_and_reuses_blocks() {
    // Three readers of open files beside a writer that truncates them, lets a scratch file take
    // their blocks and writes them anew: a read that ran beside the truncate (or used a block
    // map it left stale) would return another version's or the scratch file's bytes.
    let dir = scratch_dir("readers");
    let image = dir.join("readers.img");
    std::fs::File::create(&image).unwrap().set_len(8 << 20).unwrap();
    let image = image.to_str().unwrap();
    let (threaded, single) = domos::guest_component("test-storage").expect("built by domos/build.rs");
    let mut registry = registry();
    registry.add_pair("test-storage", &threaded, &single).expect("verifies");
    let config = format!(
        "[system]\ncpus = 2\n[[disk]]\nname = \"disk0\"\nimage = \"{image}\"\n\
         [[domain]]\nname = \"Driver\"\ngrants = [\"devices\"]\n[[domain.component]]\nname = \"drv-disk\"\nargs = \"disk=disk0\"\n\
         [[domain]]\nname = \"Cache\"\nheap = \"16 MiB\"\n[[domain.component]]\nname = \"svc-bcache\"\nargs = \"blocks=512 block=4096\"\n\
         [[domain]]\nname = \"Fs\"\nheap = \"16 MiB\"\nmax_message = \"256 KiB\"\n[[domain.component]]\nname = \"fs-ext2\"\nargs = \"mkfs block=4096\"\n\
         [[domain]]\nname = \"Client\"\nheap = \"8 MiB\"\nmax_message = \"256 KiB\"\n[[domain.component]]\nname = \"test-storage\"\nargs = \"readers 3\"\n"
    );
    let (kernel, outcome) =
        domos::boot(&config, registry, Console::capture(), Some(Duration::from_secs(60))).expect("boots");
    let run = Run { kernel, outcome };
    assert!(run.outcome.finished, "{:?}", run.lines());
    let line = run
        .lines()
        .into_iter()
        .find(|l| l.starts_with("[Client] readers: "))
        .unwrap_or_else(|| panic!("no count: {:?}", run.lines()));
    assert!(run.has_line("[Client] readers ok"), "{:?}", run.lines());
    let figure = |key| common::figure(&line, key);
    assert!(figure("reads") > 1000 && figure("rewrites") > 50, "both sides ran: {line}");
    assert!(figure("reads") > figure("empty"), "most reads found data: {line}");
    drop(run);
    let fsck = std::process::Command::new(E2FSCK.path()).args(["-fn", image]).output().unwrap();
    assert!(fsck.status.success(), "{}", String::from_utf8_lossy(&fsck.stdout));
    let _ = std::fs::remove_dir_all(&dir);
}

fn the_storage_stack_runs_in_four_domains_or_one_without_a_code_change() {
    for (file, client) in [("storage-separate.toml", "Client"), ("storage-single.toml", "Storage")] {
        let text = std::fs::read_to_string(format!("{}/../configs/{file}", env!("CARGO_MANIFEST_DIR"))).unwrap();
        let run = Run::boot(&text, Duration::from_secs(60));
        assert!(run.outcome.finished, "{file}: {:?}", run.lines());
        assert!(
            run.has_line(&format!("[{client}] out: block size 4096 blocks 4096 free 3831")),
            "{file}: {:?}",
            run.lines()
        );
        assert!(run.has_line(&format!("[{client}] ok")), "{file}: {:?}", run.lines());
        if file == "storage-single.toml" {
            assert_eq!(run.domain("Storage").calls_made(), 0, "collocated: plain calls between the components");
        }
    }
}

fn the_file_system_by_node_serves_every_operation_and_e2fsck_accepts_the_image() {
    let (e2fsck, debugfs) = (E2FSCK.path(), DEBUGFS.path());
    let dir = scratch_dir("inode-fs");
    let image = dir.join("nodes.img");
    std::fs::File::create(&image).unwrap().set_len(8 << 20).unwrap();
    let image = image.to_str().unwrap();
    let (threaded, single) = domos::guest_component("test-inode-fs").expect("built by domos/build.rs");
    let mut registry = registry();
    registry.add_pair("test-inode-fs", &threaded, &single).expect("verifies");
    // The file system publishes InodeFileSystem under another name, and the client is bound to
    // it; the client's domain has the default 64 KiB messages, which every reply must fit.
    let config = format!(
        "[[disk]]\nname = \"disk0\"\nimage = \"{image}\"\n\
         [[domain]]\nname = \"Driver\"\ngrants = [\"devices\"]\n[[domain.component]]\nname = \"drv-disk\"\nargs = \"disk=disk0\"\n\
         [[domain]]\nname = \"Cache\"\nheap = \"16 MiB\"\n[[domain.component]]\nname = \"svc-bcache\"\nargs = \"blocks=512 block=1024\"\n\
         [[domain]]\nname = \"Fs\"\nheap = \"16 MiB\"\n[[domain.component]]\nname = \"fs-ext2\"\nargs = \"mkfs block=1024\"\n\
         register = {{ InodeFileSystem = \"nodes\" }}\n\
         [[domain]]\nname = \"Client\"\n[[domain.component]]\nname = \"test-inode-fs\"\n\
         bind = {{ InodeFileSystem = \"nodes\" }}\n"
    );
    let (kernel, outcome) =
        domos::boot(&config, registry, Console::capture(), Some(Duration::from_secs(120))).expect("boots");
    let run = Run { kernel, outcome };
    assert!(run.outcome.finished, "{:?}", run.lines());
    let failures: Vec<String> = run.lines().into_iter().filter(|l| l.contains("FAIL")).collect();
    assert!(failures.is_empty(), "{failures:#?}");
    for expected in
        ["[Client] listed 302 names in 44 pages of 7, 24 of 13 with attributes, 302 of 1", "[Client] inode-fs ok"]
    {
        assert!(run.has_line(expected), "{expected}: {:?}", run.lines());
    }
    for domain in &run.outcome.domains {
        assert_eq!(domain.termination_reason(), None, "{}: {:?}", domain.name, run.lines());
    }
    drop(run);

    let checked = std::process::Command::new(&e2fsck).args(["-fn", image]).output().unwrap();
    assert!(checked.status.success(), "e2fsck -fn: {}", String::from_utf8_lossy(&checked.stdout));
    let read = std::process::Command::new(&debugfs).args(["-R", "cat /a/keep", image]).output().unwrap();
    // Written by node and by path, then through an open file, truncated to its first four bytes.
    assert_eq!(String::from_utf8_lossy(&read.stdout), "KEPT");
    let link = debugfs_says(image, "stat /b/sym");
    assert!(link.contains("Fast link dest: \"../a/hard\""), "{link}");
    let listing = debugfs_says(image, "ls -p /many");
    assert_eq!(listing.matches("/entry-").count(), 299, "{listing}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn a_second_file_system_that_renames_only_its_file_system_still_boots() {
    // Two storage stacks; the second renames what it must (BlockIO, BufferCache, FileSystem) but
    // not its InodeFileSystem, as configurations written before it existed do.
    let stack = |n: u32, wiring: [&str; 3]| {
        format!(
            "[[disk]]\nname = \"disk{n}\"\nsize = \"4 MiB\"\n\
             [[domain]]\nname = \"Storage{n}\"\nheap = \"32 MiB\"\ngrants = [\"devices\"]\n\
             [[domain.component]]\nname = \"drv-disk\"\nargs = \"disk=disk{n}\"\n{}\
             [[domain.component]]\nname = \"svc-bcache\"\nargs = \"blocks=64 block=1024\"\n{}\
             [[domain.component]]\nname = \"fs-ext2\"\nargs = \"mkfs\"\n{}",
            wiring[0], wiring[1], wiring[2]
        )
    };
    let config = stack(1, ["", "", ""])
        + &stack(
            2,
            [
                "register = { BlockIO = \"blk2\" }\n",
                "register = { BufferCache = \"cache2\" }\nbind = { BlockIO = \"blk2\" }\n",
                "register = { FileSystem = \"fs2\" }\nbind = { BufferCache = \"cache2\" }\n",
            ],
        );
    let run = Run::boot(&config, Duration::from_secs(60));
    assert!(run.outcome.finished, "{:?}", run.lines());
    for domain in &run.outcome.domains {
        assert_eq!(domain.termination_reason(), None, "{}: {:?}", domain.name, run.lines());
    }
    assert!(
        run.has_line("[Storage2] warning: the name InodeFileSystem is taken: serving FileSystem only"),
        "{:?}",
        run.lines()
    );
    assert!(!run.has_line("[Storage1] warning"), "{:?}", run.lines());
}

fn a_file_system_killed_mid_write_leaves_an_image_e2fsck_repairs_with_synced_data_intact() {
    let (e2fsck, debugfs) = (E2FSCK.path(), DEBUGFS.path());
    let dir = std::env::temp_dir().join(format!("domos-kill-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let image = dir.join("killed.img");
    let image = image.to_str().unwrap();
    let kept = dir.join("kept.bin");
    let data: Vec<u8> = (0..100_000u32).map(|i| (i % 253) as u8).collect();
    std::fs::write(&kept, &data).unwrap();
    assert_eq!(domos_command(&["fs", image, "mkfs", "32"]).0, 0);
    assert_eq!(domos_command(&["fs", image, "put", kept.to_str().unwrap(), "/kept.bin"]).0, 0);

    // A 20 MiB write, fed through domos fs's pipe, and the file system's domain terminated
    // while it runs.
    use domos::fs::pipe::{DATA, END, Pipe, Record, SLOT};
    let text = domos::fs::storage_config(&format!("image = \"{image}\""), "", "app-fs", "put /big.bin", false);
    let config = domos_loader::SystemConfig::parse(&text).unwrap();
    let kernel =
        domos_kernel::Kernel::start(&domos_kernel::KernelOptions::default(), registry(), Console::capture()).unwrap();
    let mut pipe = Pipe::create(&kernel).unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let chunk = vec![0x33u8; SLOT];
            for offset in (0..20u64 << 20).step_by(SLOT) {
                let record = Record { offset, len: SLOT as u32, kind: DATA };
                if !pipe.send(&stop, record, &chunk).unwrap() {
                    return;
                }
            }
            pipe.send(&stop, Record { offset: 20 << 20, len: 0, kind: END }, &[]).unwrap();
        });
        let outcome = kernel.boot(&config, Some(Duration::from_millis(15))).unwrap();
        assert!(!outcome.finished, "the write was still going: {:?}", kernel.console.lines());
        let fs = kernel.domains().into_iter().find(|d| d.name == "Fs").unwrap();
        kernel.terminate(&fs, "killed by the test".into());
        assert!(kernel.scheduler.wait_idle(Some(Duration::from_secs(10))), "{:?}", kernel.console.lines());
        stop.store(true, std::sync::atomic::Ordering::Release);
    });
    kernel.shutdown();

    let repaired = std::process::Command::new(&e2fsck).args(["-p", image]).status().unwrap();
    assert!(matches!(repaired.code(), Some(0 | 1)), "e2fsck -p could not repair: {repaired:?}");
    let checked = std::process::Command::new(&e2fsck).args(["-fn", image]).output().unwrap();
    assert!(checked.status.success(), "{}", String::from_utf8_lossy(&checked.stdout));
    let read = std::process::Command::new(&debugfs).args(["-R", "cat /kept.bin", image]).output().unwrap();
    assert_eq!(read.stdout, data, "the file synced before the kill is intact");
    let _ = std::fs::remove_dir_all(&dir);
}

fn linux_mounts_and_reads_an_image_made_and_filled_by_domos() {
    let dir = std::env::temp_dir().join(format!("domos-mount-test-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("mnt")).unwrap();
    let image = dir.join("domos.img");
    let image = image.to_str().unwrap();
    let local = dir.join("data.bin");
    let data: Vec<u8> = (0..200_000u32).map(|i| (i * 31 % 255) as u8).collect();
    std::fs::write(&local, &data).unwrap();
    for args in [
        vec!["fs", image, "mkfs", "16", "--block", "1024"],
        vec!["fs", image, "mkdir", "/dir"],
        vec!["fs", image, "put", local.to_str().unwrap(), "/dir/data.bin"],
        vec!["fs", image, "ln", "dir/data.bin", "/link"],
    ] {
        assert_eq!(domos_command(&args).0, 0, "{args:?}");
    }
    let mnt = dir.join("mnt");
    // The harness ran this test only where a loop mount can work, so a refusal is Linux's verdict.
    let (mount, umount) = (domos_testing::tool("mount").unwrap(), domos_testing::tool("umount").unwrap());
    let mounted = std::process::Command::new(mount)
        .args(["-t", "ext2", "-o", "loop,ro", image, mnt.to_str().unwrap()])
        .output()
        .expect("mount runs");
    if !mounted.status.success() {
        let _ = std::fs::remove_dir_all(&dir);
        panic!("mount -o loop refused the image: {}", String::from_utf8_lossy(&mounted.stderr));
    }
    let read = std::fs::read(mnt.join("dir/data.bin"));
    let link = std::fs::read_link(mnt.join("link"));
    let _ = std::process::Command::new(umount).arg(&mnt).status();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(read.unwrap(), data, "Linux's ext2 driver reads what Domos wrote");
    assert_eq!(link.unwrap(), std::path::PathBuf::from("dir/data.bin"));
}

fn the_page_eviction_graft_plugs_into_the_buffer_cache() {
    let (threaded, single) = domos::guest_component("test-storage").expect("built by domos/build.rs");
    for (policy, survives) in [("graft", true), ("lru", false)] {
        let mut registry = registry();
        registry.add_pair("test-storage", &threaded, &single).expect("verifies");
        let config = format!(
            "[[disk]]\nname = \"disk0\"\nsize = \"1 MiB\"\n\
             [[domain]]\nname = \"Driver\"\ngrants = [\"devices\"]\n[[domain.component]]\nname = \"drv-disk\"\n\
             [[domain]]\nname = \"Cache\"\n[[domain.component]]\nname = \"svc-bcache\"\nargs = \"blocks=8 block=1024 policy={policy}\"\n\
             [[domain]]\nname = \"Client\"\n[[domain.component]]\nname = \"test-storage\"\nargs = \"hint\"\n"
        );
        let (kernel, _) =
            domos::boot(&config, registry, Console::capture(), Some(Duration::from_secs(30))).expect("boots");
        let lines = kernel.console.lines();
        kernel.shutdown();
        let expected = format!("[Client] the hinted block was still cached: {survives}");
        assert!(lines.iter().any(|l| l.contains(&expected)), "{policy}: {lines:?}");
    }
}

/// A fresh directory for one test's files.
fn scratch_dir(what: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("domos-{what}-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("build")).unwrap();
    dir
}

/// Copies both builds of the guest crate `name` into `dir/build/`, as `FILE.wasm` and
/// `FILE.single.wasm`.
fn copy_guest_builds(name: &str, dir: &std::path::Path, file: &str) {
    let (threaded, single) = domos::guest_component(name).expect("built by domos/build.rs");
    std::fs::write(dir.join(format!("build/{file}.wasm")), threaded).unwrap();
    std::fs::write(dir.join(format!("build/{file}.single.wasm")), single).unwrap();
}

fn components_load_from_files_named_relative_to_the_configuration() {
    let dir = scratch_dir("files");
    copy_guest_builds("test-bounded", &dir, "bounded");
    // One file in a compiled domain and, with its single-threaded build, in an interpreted one.
    let config_path = dir.join("system.toml");
    std::fs::write(
        &config_path,
        "[[domain]]\nname = \"Compiled\"\n[[domain.component]]\npath = \"build/bounded.wasm\"\n\
         [[domain]]\nname = \"Interpreted\"\ntranslator = \"pulley\"\n\
         [[domain.component]]\npath = \"build/bounded.wasm\"\nsingle = \"build/bounded.single.wasm\"\n",
    )
    .unwrap();
    let mut components = domos::embedded_components().unwrap();
    let config = domos::load_config(&config_path, &mut components).expect("the files load");
    assert_eq!(config.domains[0].components[0].name, "test-bounded");
    assert_eq!(config.domains[1].components[0].name, "test-bounded");
    let origin = components.origin("test-bounded").unwrap().to_string();
    assert_eq!(
        origin,
        format!(
            "file {} (single-threaded build {})",
            dir.join("build/bounded.wasm").display(),
            dir.join("build/bounded.single.wasm").display()
        ),
        "loaded once, with the single-threaded build either table gives"
    );
    let component = components.get("test-bounded").unwrap().clone();
    let (kernel, outcome) =
        domos::boot_config(&config, components, Console::capture(), Some(Duration::from_secs(30)), false)
            .expect("boots");
    let lines = kernel.console.lines();
    kernel.shutdown();
    for domain in ["Compiled", "Interpreted"] {
        assert!(
            lines.iter().any(|l| l.starts_with(&format!("[{domain}] bounded handlers ran"))),
            "{domain}: {lines:?}"
        );
    }
    assert!(outcome.domains.iter().all(|d| d.termination_reason().is_none()), "{lines:?}");

    // The command: check, boot, and a description like that of an embedded component.
    let config_arg = config_path.to_str().unwrap();
    let (code, out, err) = domos_command(&["check", config_arg]);
    assert_eq!((code, out, err), (0, format!("{config_arg}: ok; boot order: Compiled, Interpreted\n"), String::new()));
    let (code, out, err) = domos_command(&["boot", config_arg, "--timeout", "30"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("[Compiled] bounded handlers ran") && out.contains("[Interpreted] bounded handlers ran"),
        "{out}"
    );
    let threaded = dir.join("build/bounded.wasm");
    let single = dir.join("build/bounded.single.wasm");
    let (code, out, err) = domos_command(&["components", threaded.to_str().unwrap(), single.to_str().unwrap()]);
    let bounds: Vec<String> =
        component.bounded.iter().map(|(export, bound)| format!("{export} (at most {bound} instructions)")).collect();
    let expected = format!(
        "test-bounded 1.0.0: Exports handlers written as ordinary Rust loops, which the loader must prove bounded.\n    \
         provides: \n    requires: \n    host calls: {}\n    bounded: {}\n    \
         builds: threaded and single-threaded (compiled and interpreted domains)\n",
        component.host_calls().join(", "),
        bounds.join(", ")
    );
    assert_eq!((code, out, err), (0, expected, String::new()));
    let (code, out, _) = domos_command(&["components", threaded.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(out.ends_with("    builds: threaded (compiled domains)\n"), "{out}");
    // An embedded component is described in the same lines.
    let (_, embedded, _) = domos_command(&["components"]);
    assert!(embedded.contains("svc-summary 1.0.0: Word statistics over a table it is handed as a portal.\n    provides: Summarizer@1.0\n    requires: \n    host calls: "), "{embedded}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn bad_component_files_are_refused_before_anything_boots() {
    let dir = scratch_dir("bad-files");
    copy_guest_builds("test-bounded", &dir, "bounded");
    copy_guest_builds("test-hostile", &dir, "hostile");
    copy_guest_builds("svc-summary", &dir, "my-summary");
    std::fs::write(dir.join("build/notes.wasm"), "not a module\n").unwrap();
    let at = |file: &str| dir.join(file).display().to_string();
    let component = |keys: &str| format!("[[domain]]\nname = \"D\"\n[[domain.component]]\n{keys}");
    let cases = [
        (component("path = \"build/none.wasm\"\n"), format!("component file {}: cannot read it: No such file or directory", at("build/none.wasm"))),
        (component("path = \"build/notes.wasm\"\n"), format!("component file {}: is not a WebAssembly module (it does not begin with \\0asm)", at("build/notes.wasm"))),
        (
            component("path = \"build/bounded.wasm\"\nsingle = \"build/bounded.wasm\"\n"),
            "single-threaded build: is a threaded build (shared memory, atomics), but interpreted domains run the single-threaded build".into(),
        ),
        (
            component("path = \"build/bounded.single.wasm\"\n"),
            "is a single-threaded build (its env.memory is not shared), but compiled domains run the threaded build".into(),
        ),
        (
            "[[domain]]\nname = \"D\"\ntranslator = \"pulley\"\n[[domain.component]]\npath = \"build/bounded.wasm\"\n".into(),
            "domain D: the pulley translator runs a component's single-threaded build, and component file build/bounded.wasm has none (give it as `single`)".into(),
        ),
        (
            component("path = \"build/bounded.wasm\"\nsingle = \"build/hostile.single.wasm\"\n"),
            "the manifests of the two builds differ: name (test-bounded in the threaded build, test-hostile in the single-threaded one)".into(),
        ),
        (
            component("path = \"build/my-summary.wasm\"\n"),
            format!("component file {} is called svc-summary, as is component svc-summary (embedded): a system holds one component of each name (rename one in its manifest)", at("build/my-summary.wasm")),
        ),
        (component("name = \"svc-kv\"\npath = \"build/bounded.wasm\"\n"), "component svc-kv is named both by `name`".into()),
        (
            component("path = \"build/bounded.wasm\"\nsingle = \"build/bounded.single.wasm\"\n[[domain]]\nname = \"E\"\n[[domain.component]]\npath = \"build/bounded.wasm\"\nsingle = \"build/hostile.single.wasm\"\n"),
            format!("is given two single-threaded builds, {} and {}", at("build/bounded.single.wasm"), at("build/hostile.single.wasm")),
        ),
    ];
    let config_path = dir.join("bad.toml");
    let config_arg = config_path.to_str().unwrap();
    for (config, expected) in &cases {
        std::fs::write(&config_path, config).unwrap();
        let mut components = domos::embedded_components().unwrap();
        let err = domos::load_config(&config_path, &mut components).err().unwrap_or_default();
        assert!(err.starts_with(&format!("{config_arg}: ")) && err.contains(expected.as_str()), "{config}: {err}");
        for command in ["check", "boot"] {
            let (code, out, err) = domos_command(&[command, config_arg]);
            assert_eq!((code, out.as_str()), (1, ""), "{command} {config}: nothing boots");
            assert!(err.starts_with("domos: ") && err.contains(expected.as_str()), "{command} {config}: {err}");
        }
    }
    let (code, out, err) = domos_command(&["components", &at("build/notes.wasm")]);
    assert_eq!((code, out.as_str()), (1, ""));
    assert_eq!(
        err,
        format!(
            "domos: component file {}: is not a WebAssembly module (it does not begin with \\0asm)\n",
            at("build/notes.wasm")
        )
    );
    // A configuration whose files nobody loaded boots nothing either.
    let unloaded = domos::boot(&component("path = \"build/bounded.wasm\"\n"), registry(), Console::capture(), None);
    assert_eq!(
        unloaded.err().unwrap_or_default(),
        "domain D: component file build/bounded.wasm is not loaded (`domos boot FILE` and `domos check FILE` load the files a configuration names)"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Compiles the C file `source` with clang for wasm32 in both builds, with the headers of
/// `include`; returns the two modules.
fn clang_both_builds(source: &std::path::Path, include: &std::path::Path) -> (Vec<u8>, Vec<u8>) {
    let build = |flags: &[&str], suffix: &str| {
        let out = source.with_extension(suffix);
        let output = std::process::Command::new(CLANG.path())
            .args(["-O2", "-std=c11", "-Wall", "-Wextra", "-Werror"])
            .args(flags)
            .arg("-I")
            .arg(include)
            .arg(source)
            .arg("-o")
            .arg(&out)
            .output()
            .expect("clang runs");
        assert!(output.status.success(), "clang {suffix}: {}", String::from_utf8_lossy(&output.stderr));
        std::fs::read(&out).unwrap()
    };
    (build(domos_abi::CLANG_THREADED, "wasm"), build(domos_abi::CLANG_SINGLE, "single.wasm"))
}

/// `domos header` prints the header build.rs writes for the C components; a component that imports
/// every host call through it, with the C types the header gives them, passes the verifier, which
/// checks each import's wasm type against the kernel's table.
fn the_c_header_declares_every_host_call_as_the_kernel_checks_it() {
    let (code, header, err) = domos_command(&["header"]);
    assert_eq!((code, err.as_str()), (0, ""));
    let mut rendered = String::new();
    domos_abi::render_c_header(&mut rendered).unwrap();
    assert_eq!(header, rendered);
    let built = std::fs::read_to_string(std::path::Path::new(domos::C_GUEST_DIR).join("include/domos.h"))
        .expect("domos/build.rs writes the header");
    assert_eq!(built, rendered, "the C components compile against the same header");

    let dir = scratch_dir("header");
    std::fs::write(dir.join("domos.h"), &header).unwrap();
    let mut source = String::from(
        "#include \"domos.h\"\n\
         DOMOS_MANIFEST(\"name = \\\"every-call\\\"\\n\"\n               \"version = \\\"1.0.0\\\"\\n\");\n\
         static volatile int32_t never;\n\
         static void every_call(void) {\n",
    );
    for call in domos_abi::HOST_CALLS {
        let zeros = vec!["0"; call.params.len()].join(", ");
        source.push_str(&format!("    (void)domos_{}({zeros});\n", call.name));
    }
    let table = domos_abi::fnv1a(b"Table@1");
    source.push_str(&format!(
        "}}\nint32_t domos_init(void) {{ if (never) every_call(); return domos_fnv1a(\"Table@1\") == {table}u ? 0 : 7; }}\n"
    ));
    source.push_str(
        "int32_t domos_thread_entry(uint32_t arg) { return (int32_t)arg; }\n\
         int32_t domos_dispatch(uint32_t object, uint32_t method, uint32_t buffer, uint32_t len, uint32_t capacity) {\n\
         \x20   (void)object; (void)method; (void)buffer; (void)len; (void)capacity;\n\
         \x20   return DOMOS_ERROR_UNKNOWN_METHOD;\n}\n\
         void domos_release(uint32_t object) { (void)object; }\n",
    );
    let file = dir.join("every_call.c");
    std::fs::write(&file, source).unwrap();
    let (threaded, single) = clang_both_builds(&file, &dir);
    let mut registry = ComponentRegistry::default();
    let component = registry.add_pair("every_call.c", &threaded, &single).expect("the loader accepts it");
    let imported: Vec<&str> = component.host_calls().iter().map(String::as_str).collect();
    let mut every: Vec<&str> = domos_abi::HOST_CALLS.iter().map(|c| c.name).collect();
    every.sort_unstable();
    assert_eq!(imported, every, "every host call imported, each with the kernel's type");
    assert_eq!(component.manifest.name, "every-call");
    // It runs, given every grant; its init fails unless C's FNV-1a names interfaces as Rust's does.
    let config = "[[domain]]\nname = \"C\"\ngrants = [\"domains\", \"devices\", \"scheduling\"]\n\
                  [[domain.component]]\nname = \"every-call\"\n";
    let (kernel, outcome) =
        domos::boot(config, registry, Console::capture(), Some(Duration::from_secs(30))).expect("boots");
    let lines = kernel.console.lines();
    kernel.shutdown();
    assert_eq!(outcome.domains[0].termination_reason(), None, "{lines:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn a_component_in_c_serves_the_unchanged_rust_clients() {
    let c_dir = std::path::Path::new(domos::C_GUEST_DIR);
    assert!(
        c_dir.join("svc-kv-c.wasm").is_file() && c_dir.join("svc-kv-c.single.wasm").is_file(),
        "domos/build.rs builds components/svc-kv-c where clang and wasm-ld are installed (rebuild after installing them)"
    );
    let configs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs");
    let demo = std::fs::read_to_string(configs.join("demo-c.toml")).unwrap();
    let separate = Run::boot(DEMO, Duration::from_secs(60)).lines();
    // The same demo in a compiled and in an interpreted store domain; app-demo's and
    // svc-summary's lines are those they print over svc-kv.
    for text in [demo.clone(), demo.replace("name = \"Store\"\n", "name = \"Store\"\ntranslator = \"pulley\"\n")] {
        let mut components = domos::embedded_components().unwrap();
        let mut config = domos_loader::SystemConfig::parse(&text).unwrap();
        domos::load_component_files(&mut config, &configs, &mut components).expect("the C component verifies");
        let (kernel, outcome) =
            domos::boot_config(&config, components, Console::capture(), Some(Duration::from_secs(60)), false)
                .expect("boots");
        let lines = kernel.console.lines();
        let store = outcome.domains.iter().find(|d| d.name == "Store").unwrap().clone();
        kernel.shutdown();
        assert!(lines.iter().any(|l| l == "[Client] demo finished: ok"), "{lines:?}");
        let client = |lines: &[String]| lines.iter().filter(|l| l.starts_with("[Client]")).cloned().collect::<Vec<_>>();
        assert_eq!(client(&lines), client(&separate), "the client cannot tell the stores apart");
        assert_eq!(store.component_names(), ["svc-kv-c"]);
        assert!(store.calls_served() >= 30, "the C store served the writers, the reader and the summarizer");
        assert_eq!(store.termination_reason(), None);
    }

    // Every method, limit and error, through a client that prints each answer: the C store and
    // the Rust one answer alike.
    let transcript = |store: &str| {
        let mut components = registry();
        let (threaded, single) = domos::guest_component("test-kv").expect("built by domos/build.rs");
        components.add_pair("test-kv", &threaded, &single).unwrap();
        let mut config = domos_loader::SystemConfig::parse(&format!(
            "[[domain]]\nname = \"Store\"\n[[domain.component]]\n{store}\nargs = \"max_tables=3 max_entries=4\"\n\
             [[domain]]\nname = \"Client\"\n[[domain.component]]\nname = \"test-kv\"\n"
        ))
        .unwrap();
        domos::load_component_files(&mut config, &configs, &mut components).unwrap();
        let (kernel, _) =
            domos::boot_config(&config, components, Console::capture(), Some(Duration::from_secs(60)), false)
                .expect("boots");
        let lines = kernel.console.lines();
        kernel.shutdown();
        assert!(lines.iter().any(|l| l == "[Client] kv done"), "{store}: {lines:?}");
        lines.into_iter().filter(|l| l.starts_with("[Client] kv ")).collect::<Vec<_>>()
    };
    let rust = transcript("name = \"svc-kv\"");
    let c = transcript("path = \"../target/guest/c/svc-kv-c.wasm\"");
    assert_eq!(c, rust);
    for expected in [
        "[Client] kv open empty: Err(InvalidName(\"\"))",
        "[Client] kv open long accented: Err(InvalidName(\"éééééééééééééééééééééééééééééééé\"))",
        "[Client] kv open beta (a fourth): Err(Full)",
        "[Client] kv put \"a\": Ok(Some(\"1\"))",
        "[Client] kv put a fifth key: Err(Full)",
        "[Client] kv scan \"a\": Ok([Entry { key: \"a\", value: \"one\" }, Entry { key: \"ab\", value: \"3\" }])",
        "[Client] kv remove ab: Ok(Some(\"3\"))",
        "[Client] kv get big: Ok(Some(33000))",
        "[Client] kv scan beyond the quota: Err(Call(Host(MessageTooLarge)))",
    ] {
        assert!(c.iter().any(|l| l == expected), "{expected}: {c:#?}");
    }

    // Random messages: refused or answered, and the C store survives them.
    let mut components = registry();
    let mut config = domos_loader::SystemConfig::parse(
        "[[domain]]\nname = \"Store\"\n[[domain.component]]\npath = \"../target/guest/c/svc-kv-c.wasm\"\n\
         [[domain]]\nname = \"Fuzzer\"\n[[domain.component]]\nname = \"test-hostile\"\nargs = \"fuzz 20000\"\n",
    )
    .unwrap();
    domos::load_component_files(&mut config, &configs, &mut components).unwrap();
    let (kernel, outcome) =
        domos::boot_config(&config, components, Console::capture(), Some(Duration::from_secs(60)), false)
            .expect("boots");
    let lines = kernel.console.lines();
    let store = outcome.domains.iter().find(|d| d.name == "Store").unwrap().clone();
    kernel.shutdown();
    let line = lines.iter().find(|l| l.starts_with("[Fuzzer] fuzz: ")).expect("the fuzzer reports");
    let counts: Vec<u32> = line.split(' ').filter_map(|w| w.parse().ok()).collect();
    let [refused, answered] = counts[..] else { panic!("{line}") };
    assert_eq!(refused + answered, 20_000, "{line}");
    assert!(answered > 0 && refused > answered, "{line}");
    assert!(lines.iter().any(|l| l.starts_with("[Fuzzer] store still answers: Ok(")), "{lines:?}");
    assert_eq!(store.termination_reason(), None, "{lines:?}");
}

/// Held by each `domos new` test: two cargo builds and boots at once would share the machine's
/// cores with each other as well as with everything else, and slow both.
static NEWCOMER: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// `domos ARGS` run in `dir`: exit code, standard output, standard error.
fn domos_in(dir: &std::path::Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_domos"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("domos runs");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

/// Runs the build command `domos new` printed (`cd NAME && …`) in `dir`, with none of the
/// outer cargo's flags or target directory: as a newcomer's shell would.
fn run_printed_build(dir: &std::path::Path, printed: &str, name: &str) -> String {
    let build = printed
        .lines()
        .find(|l| l.trim_start().starts_with("cd "))
        .unwrap_or_else(|| panic!("no build command in: {printed}"));
    let mut sh = std::process::Command::new("sh");
    sh.args(["-c", build.trim()]).current_dir(dir).env("CARGO_TARGET_DIR", dir.join(name).join("target"));
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_BUILD_TARGET",
    ] {
        sh.env_remove(var);
    }
    let built = sh.output().expect("sh runs");
    assert!(
        built.status.success(),
        "{build}: {}{}",
        String::from_utf8_lossy(&built.stdout),
        String::from_utf8_lossy(&built.stderr)
    );
    build.trim().to_string()
}

/// Boots the configuration `domos new` printed (`domos boot NAME/domos.toml`) in `dir` with a
/// time limit and a control socket of its own; returns its standard output.
fn run_printed_boot(dir: &std::path::Path, printed: &str, name: &str) -> String {
    let boot =
        printed.lines().find(|l| l.contains("domos boot")).unwrap_or_else(|| panic!("no boot command in: {printed}"));
    let config = boot.trim().strip_prefix("domos boot ").expect("the boot line is `domos boot FILE`");
    assert_eq!(config, format!("{name}/domos.toml"));
    boot_with_own_socket(dir, config)
}

/// `domos boot CONFIG --timeout 10` in `dir` with a control socket of its own, which must
/// succeed; its standard output.
fn boot_with_own_socket(dir: &std::path::Path, config: &str) -> String {
    // The socket's directory must be the user's alone.
    use std::os::unix::fs::DirBuilderExt;
    let sockets = dir.join("control");
    if !sockets.exists() {
        std::fs::DirBuilder::new().mode(0o700).create(&sockets).unwrap();
    }
    let socket = sockets.join("socket");
    let (code, out, err) = domos_in(dir, &["boot", config, "--timeout", "10", "--control", socket.to_str().unwrap()]);
    assert_eq!(code, Some(0), "domos boot {config}: {out}{err}");
    out
}

/// What a newcomer does, in a temporary directory: `domos new hello`, the build command it
/// prints (cargo, both wasm targets), then the boot it prints, with the real binary.
fn domos_new_makes_a_crate_that_builds_and_boots_as_printed() {
    let _alone = NEWCOMER.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let scratch = Scratch::new("new");
    let dir = scratch.0.as_path();
    let (code, printed, err) = domos_in(dir, &["new", "hello"]);
    assert_eq!(code, Some(0), "domos new hello: {printed}{err}");
    for file in ["Cargo.toml", ".cargo/config.toml", "component.toml", "src/lib.rs", "domos.toml", "README.md"] {
        assert!(dir.join("hello").join(file).is_file(), "domos new wrote no {file}");
    }
    let readme = std::fs::read_to_string(dir.join("hello/README.md")).unwrap();
    assert!(readme.contains(domos::scaffold::BUILD_COMMAND), "{readme}");

    // Bad names, languages and an existing directory are refused, and nothing is written.
    for (args, says) in [
        (&["new", "hello"][..], "hello already exists"),
        (&["new", "--lang", "c", "hello"], "hello already exists"),
        (&["new", "9lives"], "cannot name a component crate"),
        (&["new", "a b"], "cannot name a component crate"),
        (&["new", "svc-kv"], "an embedded component has that name"),
        (&["new", "--lang", "cobol", "x"], "--lang takes rust or c"),
        (&["new"], "usage: domos new"),
    ] {
        let (code, out, err) = domos_in(dir, args);
        assert_eq!(code, Some(1), "domos {args:?}: {out}{err}");
        assert!(err.contains(says), "domos {args:?}: {err}");
    }
    assert!(!dir.join("9lives").exists() && !dir.join("a b").exists() && !dir.join("x").exists());

    let build = run_printed_build(dir, &printed, "hello");
    assert!(build.contains("--target wasm32-wasip1-threads") && build.contains("--target wasm32-unknown-unknown"));
    for target in ["wasm32-wasip1-threads", "wasm32-unknown-unknown"] {
        let wasm = dir.join(format!("hello/target/{target}/release/hello.wasm"));
        assert!(wasm.is_file(), "{} was not built", wasm.display());
    }
    let out = run_printed_boot(dir, &printed, "hello");
    // Compiled (threaded build) and interpreted (single-threaded build), the latter calling
    // the former through a portal; and the embedded demo beside them.
    assert!(out.contains("[hello] hello is up: add3(1, 2, 3) = 6, measure = 16 bytes"), "{out}");
    assert!(out.contains("[hello interpreted] hello is up: add3(1, 2, 3) = 6, measure = 16 bytes"), "{out}");
    assert!(out.contains("[Client] demo finished: ok"), "{out}");
    let served = out.lines().find(|l| l.trim_start().starts_with("hello ")).expect("hello's summary line");
    assert!(!served.contains("calls served       0"), "the compiled hello served no portal call: {served}");
}

/// `domos new --lang c cee`, built with the `make` it prints and booted as printed beside the
/// embedded bench-ipc, which calls it; then the Rust skeleton's client calls the C service and
/// checks its answers.
fn domos_new_lang_c_makes_a_component_that_builds_and_boots_as_printed() {
    let _alone = NEWCOMER.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let scratch = Scratch::new("new-c");
    let dir = scratch.0.as_path();
    let (code, printed, err) = domos_in(dir, &["new", "--lang", "c", "cee"]);
    assert_eq!(code, Some(0), "domos new --lang c cee: {printed}{err}");
    let header = std::fs::read_to_string(dir.join("cee/domos.h")).unwrap();
    assert_eq!(header, domos_in(dir, &["header"]).1, "the C skeleton's domos.h is not `domos header`");
    assert_eq!(run_printed_build(dir, &printed, "cee"), "cd cee && make");
    for file in ["cee.wasm", "cee.single.wasm"] {
        assert!(dir.join("cee/build").join(file).is_file(), "make did not build {file}");
    }
    let (code, out, err) = domos_in(dir, &["components", "cee/build/cee.wasm", "cee/build/cee.single.wasm"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("provides: IpcBench@1.0") && out.contains("threaded and single-threaded"), "{out}");

    let out = run_printed_boot(dir, &printed, "cee");
    assert!(out.contains("[cee] cee (C) is up: serving IpcBench"), "{out}");
    assert!(out.contains("[Client] bench portal_3int_rt"), "{out}");
    let served = out.lines().find(|l| l.trim_start().starts_with("cee ")).expect("cee's summary line");
    assert!(!served.contains("calls served       0"), "the C service served no call: {served}");

    // The Rust skeleton's main, bound to the C service (compiled and interpreted), checks its
    // answers: add3 and measure as the Rust service gives them.
    let (code, printed, err) = domos_in(dir, &["new", "hello"]);
    assert_eq!(code, Some(0), "{printed}{err}");
    run_printed_build(dir, &printed, "hello");
    let hello = "target/wasm32-wasip1-threads/release/hello.wasm";
    let hello_single = "target/wasm32-unknown-unknown/release/hello.wasm";
    let both = format!(
        "[[domain]]\nname = \"C\"\n[[domain.component]]\npath = \"cee/build/cee.wasm\"\nsingle = \"cee/build/cee.single.wasm\"\nregister = {{ IpcBench = \"c\" }}\n\n\
         [[domain]]\nname = \"C interpreted\"\ntranslator = \"pulley\"\n[[domain.component]]\npath = \"cee/build/cee.wasm\"\nsingle = \"cee/build/cee.single.wasm\"\nregister = {{ IpcBench = \"c.single\" }}\n\n\
         [[domain]]\nname = \"Rust\"\n[[domain.component]]\npath = \"hello/{hello}\"\nsingle = \"hello/{hello_single}\"\nbind = {{ IpcBench = \"c\" }}\n\n\
         [[domain]]\nname = \"Rust2\"\ntranslator = \"pulley\"\n[[domain.component]]\npath = \"hello/{hello}\"\nsingle = \"hello/{hello_single}\"\nregister = {{ IpcBench = \"rust2\" }}\nbind = {{ IpcBench = \"c.single\" }}\n"
    );
    std::fs::write(dir.join("both.toml"), both).unwrap();
    let out = boot_with_own_socket(dir, "both.toml");
    assert!(out.contains("[Rust] hello is up: add3(1, 2, 3) = 6, measure = 16 bytes"), "{out}");
    assert!(out.contains("[Rust2] hello is up: add3(1, 2, 3) = 6, measure = 16 bytes"), "{out}");
    for domain in ["C ", "C interpreted "] {
        let line = out.lines().find(|l| l.trim_start().starts_with(domain)).expect("the C domains' summary lines");
        assert!(line.contains("calls served       2"), "{line}");
    }
}
