//! Network tests: emulated network cards, their driver and the IP stack, booted as whole
//! systems. Two stacks talk over a pair of cards inside one system; over a TAP card, Linux's own
//! `ping` and a UDP client (run in a network namespace the test makes) are the judges; over a
//! passt card, the test itself talks to the guest through a port passt forwards from 127.0.0.1.

use std::time::Duration;

use domos_kernel::Console;
use domos_loader::ComponentRegistry;
use domos_testing::{IP, NC, PASST, PING, TAP};

domos_testing::main! {
    a_nic_driver_moves_frames_between_a_pair_of_cards_woken_by_its_receive_interrupt,
    bad_rings_forged_handles_and_bad_frames_get_clear_errors,
    two_stacks_over_a_pair_of_cards_ping_echo_udp_and_move_a_mebibyte_over_tcp,
    a_stack_drops_malformed_frames_and_headers_and_keeps_serving,
    an_answer_only_stack_answers_but_opens_no_conversation,
    a_stack_out_of_heap_or_sockets_refuses_sockets_and_keeps_serving,
    a_stack_refuses_a_tcp_buffer_out_of_range,
    a_paced_link_is_shared_three_to_one_and_three_to_one_to_one_when_a_third_joins,
    tcp_streams_share_a_paced_link_three_to_one_and_three_to_one_to_one,
    linux_pings_and_talks_udp_and_tcp_to_domos_over_a_tap_card: [TAP, IP, PING, NC],
    a_host_client_talks_udp_and_tcp_to_domos_through_127_0_0_1_over_a_passt_card: [PASST],
}

mod common;
use common::{Run, output_within, registry_with};

fn registry() -> ComponentRegistry {
    registry_with(&["test-net", "test-nic-bad"])
}

impl Run {
    /// Boots a system that runs for good (a network stack serves until shutdown) and waits
    /// until the console shows every line of `done`, a domain is terminated, or `timeout` passes.
    fn until(config: &str, done: &[&str], timeout: Duration) -> Run {
        let (kernel, outcome) =
            domos::boot(config, registry(), Console::capture(), Some(Duration::from_millis(1))).expect("boots");
        let run = Run { kernel, outcome };
        let start = std::time::Instant::now();
        while start.elapsed() < timeout {
            let failed = run.has_line("main failed") || run.outcome.domains.iter().any(|d| d.is_terminated());
            if failed || done.iter().all(|line| run.has_line(line)) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        run
    }
    fn expect(&self, expected: &[&str]) {
        for line in expected {
            assert!(self.has_line(line), "missing {line:?} in {:#?}", self.lines());
        }
    }
}

/// Two cards wired to each other, each with a driver in a domain of its own.
const PAIR_DRIVERS: &str = r#"
[[nic]]
name = "nic0"
pair = "nic1"
mac = "02:00:00:00:00:01"
[[nic]]
name = "nic1"
pair = "nic0"
mac = "02:00:00:00:00:02"
[[domain]]
name = "DriverA"
grants = ["devices"]
[[domain.component]]
name = "drv-nic"
args = "nic=nic0"
register = { NetworkDevice = "netA" }
[[domain]]
name = "DriverB"
grants = ["devices"]
[[domain.component]]
name = "drv-nic"
args = "nic=nic1"
register = { NetworkDevice = "netB" }
"#;

fn a_nic_driver_moves_frames_between_a_pair_of_cards_woken_by_its_receive_interrupt() {
    let config = format!(
        "{PAIR_DRIVERS}[[domain]]\nname = \"Client\"\n[[domain.component]]\nname = \"test-net\"\nargs = \"frames\"\n"
    );
    let run = Run::boot(&config, Duration::from_secs(30));
    assert!(run.outcome.finished, "the drivers' interrupt threads do not keep the system running: {:?}", run.lines());
    run.expect(&[
        "[Client] netA: mtu 1500 slot 1536 slots 8",
        "[Client] sent: Ok(3)",
        "[Client] netB received 3 frames intact: true",
        "[Client] a checksum the card filled in: Some(true)",
        "[Client] a checksum outside its frame: Some(Host(InvalidArgument))",
        "[Client] a frame over the MTU: Some(Host(MessageTooLarge))",
        "[Client] a frame shorter than its header: Some(Host(InvalidArgument))",
        "[Client] more frames than slots: Some(Host(InvalidArgument))",
        "[Client] netB after 200 more frames: received 132 dropped 72",
        "[Client] netB drained 128 frames",
    ]);
    // Without the grant, the driver is refused before anything runs.
    let rogue = "[[nic]]\nname = \"nic0\"\npair = \"nic1\"\n[[nic]]\nname = \"nic1\"\npair = \"nic0\"\n\
                 [[domain]]\nname = \"Rogue\"\n[[domain.component]]\nname = \"drv-nic\"\n";
    let refused = domos::boot(rogue, registry(), Console::capture(), None).err().unwrap_or_default();
    assert!(refused.contains("component drv-nic imports nic_"), "no card without the grant: {refused}");
}

fn bad_rings_forged_handles_and_bad_frames_get_clear_errors() {
    let config = "[[nic]]\nname = \"spare0\"\npair = \"spare1\"\n[[nic]]\nname = \"spare1\"\npair = \"spare0\"\n\
                  [[domain]]\nname = \"Hostile\"\ngrants = [\"devices\"]\n[[domain.component]]\nname = \"test-nic-bad\"\n";
    let run = Run::boot(config, Duration::from_secs(30));
    assert!(run.outcome.finished, "{:?}", run.lines());
    run.expect(&[
        "[Hostile] open a card that does not exist: NotFound",
        "[Hostile] a forged handle: InvalidHandle",
        "[Hostile] a memory object's handle: InvalidHandle",
        "[Hostile] an unknown info item: InvalidArgument",
        "[Hostile] frames before rings: NotFound",
        "[Hostile] a ring too small: InvalidArgument",
        "[Hostile] a read-only receive ring: ReadOnly",
        "[Hostile] a revoked ring: Revoked",
        "[Hostile] a forged ring: InvalidHandle",
        "[Hostile] slots shorter than a frame: InvalidArgument",
        "[Hostile] good rings: ok 42",
        "[Hostile] a frame over the MTU: MessageTooLarge",
        "[Hostile] more frames than the ring: InvalidArgument",
        "[Hostile] releasing slots without frames: InvalidArgument",
        "[Hostile] rings again: ok 42",
        "[Hostile] sending from a revoked ring: Revoked",
    ]);
}

/// A domain running an IP stack at `ip` over the driver registered as `device`, publishing its
/// `Network` as `network`.
fn stack_domain(name: &str, ip: &str, device: &str, network: &str) -> String {
    format!(
        "[[domain]]\nname = \"{name}\"\nservice_threads = 16\n[[domain.component]]\nname = \"net-ip\"\n\
         args = \"ip={ip}\"\nbind = {{ NetworkDevice = \"{device}\" }}\nregister = {{ Network = \"{network}\" }}\n"
    )
}

/// The echo service over the stack published as `network`.
fn echo_domain(network: &str) -> String {
    format!(
        "[[domain]]\nname = \"Echo\"\n[[domain.component]]\nname = \"svc-echo\"\nbind = {{ Network = \"{network}\" }}\n"
    )
}

/// Two IP stacks, each over its own driver and card of a pair, an echo service on one and the
/// domains `clients` (of the other, say), every one in a domain of its own.
fn two_stacks(clients: &str) -> String {
    format!(
        "{PAIR_DRIVERS}{}{}{}{clients}",
        stack_domain("StackA", "10.0.0.1/24", "netA", "ipA"),
        stack_domain("StackB", "10.0.0.2/24", "netB", "ipB"),
        echo_domain("ipB")
    )
}

fn two_stacks_over_a_pair_of_cards_ping_echo_udp_and_move_a_mebibyte_over_tcp() {
    let clients = "[[domain]]\nname = \"Client1\"\n[[domain.component]]\nname = \"app-net\"\n\
                   args = \"peer=10.0.0.2 port=7 tcp=1048576\"\nbind = { Network = \"ipA\" }\n\
                   [[domain]]\nname = \"Client2\"\n[[domain.component]]\nname = \"app-net\"\n\
                   args = \"peer=10.0.0.2 port=7 tcp=262144\"\nbind = { Network = \"ipA\" }\n";
    // StackA, whose clients send, with send buffers of 256 KiB (the NFS server's); StackB's echo
    // answers through 64 KiB ones. Both receive into 256 KiB, windows with a scale of 3 that
    // must not shrink: a smoltcp sender facing one that did stalled for good (decision 0007).
    let config = two_stacks(clients)
        .replacen("args = \"ip=10.0.0.1/24\"", "args = \"ip=10.0.0.1/24 send_buffer=256 receive_buffer=256\"", 1)
        .replacen("args = \"ip=10.0.0.2/24\"", "args = \"ip=10.0.0.2/24 receive_buffer=256\"", 1);
    assert!(config.contains("send_buffer=256 receive_buffer=256") && config.contains("10.0.0.2/24 receive_buffer"));
    let run = Run::until(&config, &["[Client1] client done", "[Client2] client done"], Duration::from_secs(120));
    run.expect(&[
        "[Echo] echo on UDP and TCP port 7",
        "[Client1] 3 of 3 pings answered",
        "[Client1] udp echo of 100 and 8192 bytes intact: true",
        "[Client1] tcp echo of 1048576 bytes intact: true",
        "[Client2] 3 of 3 pings answered",
        "[Client2] udp echo of 100 and 8192 bytes intact: true",
        "[Client2] tcp echo of 262144 bytes intact: true",
    ]);
    let lines = run.lines();
    for line in lines.iter().filter(|l| l.contains("took") || l.contains("round trip")) {
        eprintln!("{line}");
    }
}

fn an_answer_only_stack_answers_but_opens_no_conversation() {
    // StackB answers: its echo service serves StackA's client whole. A client behind StackB
    // itself may not ping, send a datagram to a peer that never wrote to it, or connect.
    let config = format!(
        "{PAIR_DRIVERS}{}{}{}\
         [[domain]]\nname = \"Client\"\n[[domain.component]]\nname = \"app-net\"\n\
         args = \"peer=10.0.0.2 port=7 tcp=65536 rounds=10\"\nbind = {{ Network = \"ipA\" }}\n\
         [[domain]]\nname = \"Inside\"\n[[domain.component]]\nname = \"app-net\"\n\
         args = \"peer=10.0.0.1 port=7 tcp=65536 rounds=10\"\nbind = {{ Network = \"ipB\" }}\n",
        stack_domain("StackA", "10.0.0.1/24", "netA", "ipA"),
        stack_domain("StackB", "10.0.0.2/24 answer-only", "netB", "ipB"),
        echo_domain("ipB")
    );
    let run = Run::until(&config, &["[Client] client done", "[Inside] client done"], Duration::from_secs(60));
    run.expect(&[
        "[Client] 3 of 3 pings answered",
        "[Client] udp echo of 100 and 8192 bytes intact: true",
        "[Client] tcp echo of 65536 bytes intact: true",
        "[Inside] ping: operation not granted to this component",
        "[Inside] udp: operation not granted to this component",
        "[Inside] tcp: operation not granted to this component",
    ]);
}

fn a_stack_refuses_a_tcp_buffer_out_of_range() {
    for key in ["send_buffer", "receive_buffer"] {
        for value in ["0", "1025", "64KiB"] {
            let stack = stack_domain("StackA", "10.0.0.1/24", "netA", "ipA").replacen(
                "args = \"ip=10.0.0.1/24\"",
                &format!("args = \"ip=10.0.0.1/24 {key}={value}\""),
                1,
            );
            let run = Run::boot(&format!("{PAIR_DRIVERS}{stack}"), Duration::from_secs(5));
            assert!(run.has_line("domain StackA terminated: net-ip init failed"), "{key}={value}: {:#?}", run.lines());
        }
    }
}

fn a_stack_out_of_heap_or_sockets_refuses_sockets_and_keeps_serving() {
    // A client opens sockets on StackA until it refuses one: with 8 MiB of heap the heap runs
    // out first (a TCP or UDP socket's buffers take 128 KiB), with 48 MiB the table of 256.
    let mut opened = Vec::new();
    for heap in ["8 MiB", "48 MiB"] {
        let stack_a = stack_domain("StackA", "10.0.0.1/24", "netA", "ipA").replacen(
            "service_threads",
            &format!("heap = \"{heap}\"\nservice_threads"),
            1,
        );
        let config = format!(
            "{PAIR_DRIVERS}{stack_a}{}{}[[domain]]\nname = \"Client\"\n[[domain.component]]\nname = \"test-net\"\n\
             args = \"sockets\"\nbind = {{ Network = \"ipA\" }}\n",
            stack_domain("StackB", "10.0.0.2/24", "netB", "ipB"),
            echo_domain("ipB")
        );
        let run = Run::until(&config, &["[Client] sockets done"], Duration::from_secs(60));
        run.expect(&["[Client] udp echo with the stack full: true", "[Client] sockets open again once let go: true"]);
        assert!(!run.outcome.domains.iter().any(|d| d.is_terminated()), "{heap}: a domain ended: {:#?}", run.lines());
        let lines = run.lines();
        let refused = lines.iter().find(|l| l.starts_with("[Client] refused after")).expect("a socket refused");
        assert!(refused.contains("QuotaExceeded"), "{heap}: {refused}");
        let count = |word: &str| -> usize {
            let before = refused.split(word).next().and_then(|s| s.split_whitespace().last());
            before.and_then(|n| n.parse().ok()).unwrap_or(0)
        };
        // The stack's sockets: the client's first, its UDP ones, one per listener (a backlog's
        // others are made as connections are requested).
        opened.push(1 + count(" UDP") + count(" listeners"));
        eprintln!("{heap}: {refused}");
    }
    assert!(opened[0] > 10 && opened[0] < opened[1], "8 MiB holds some sockets, fewer than 48 MiB: {opened:?}");
    assert_eq!(opened[1], 256, "48 MiB holds the table of 256 whole: {opened:?}");
}

fn a_stack_drops_malformed_frames_and_headers_and_keeps_serving() {
    // netA has no stack: the test component speaks raw Ethernet on it as 10.0.0.1.
    let config = format!(
        "{PAIR_DRIVERS}{}{}[[domain]]\nname = \"Injector\"\n[[domain.component]]\nname = \"test-net\"\nargs = \"inject\"\n",
        stack_domain("StackB", "10.0.0.2/24", "netB", "ipB"),
        echo_domain("ipB")
    );
    let run = Run::until(&config, &["[Injector] inject done"], Duration::from_secs(60));
    run.expect(&[
        "[Injector] ARP answered: true",
        "[Injector] sent 40 malformed frames (0 refused by the driver)",
        "[Injector] ping answered after the malformed frames: true",
        "[Injector] udp echo answered after the malformed frames: true",
        "[Injector] tcp syn answered with syn-ack after the malformed frames: true",
    ]);
    assert!(run.outcome.domains.iter().all(|d| !d.is_terminated()), "{:?}", run.lines());
}

fn linux_pings_and_talks_udp_and_tcp_to_domos_over_a_tap_card() {
    // Everything stays on a link inside a namespace of the test's own: Linux is 10.99.0.1 on the
    // TAP interface there, Domos 10.99.0.2 behind it.
    let pid = std::process::id();
    let namespace = domos::host::Namespace::new(format!("domos-test-{pid}")).expect("a network namespace");
    let judge = |program: &std::path::Path, args: &[&str], input: &[u8], limit| {
        let mut command = namespace.command(program);
        command.args(args);
        output_within(command, input, limit)
    };
    let tap = format!("dtap{}", pid % 100_000);
    let config = format!(
        "[[nic]]\nname = \"tap0\"\ntap = \"{tap}\"\nmac = \"02:00:00:00:99:02\"\n\
         [[domain]]\nname = \"Driver\"\ngrants = [\"devices\"]\n[[domain.component]]\nname = \"drv-nic\"\nargs = \"nic=tap0\"\n{}{}",
        stack_domain("Stack", "10.99.0.2/24", "NetworkDevice", "Network"),
        echo_domain("Network")
    );
    let run = Run::until(&config, &["[Echo] echo on UDP and TCP port 7"], Duration::from_secs(30));
    run.expect(&["[Echo] echo on UDP and TCP port 7"]);
    // The kernel made the interface in the host's namespace, down and without addresses.
    namespace.adopt(&tap, "10.99.0.1/24", 1500).expect("the TAP card moves into the namespace");
    let ping = judge(&PING.path(), &["-c", "3", "-W", "1", "10.99.0.2"], b"", Duration::from_secs(10));
    let ping_out = String::from_utf8_lossy(&ping.stdout).into_owned();
    assert!(ping.status.success() && ping_out.contains("3 received"), "ping: {ping_out}");
    // 8,000 bytes of ICMP payload: fragmented by Linux, reassembled, answered and fragmented by
    // Domos, reassembled by Linux.
    let big = judge(&PING.path(), &["-c", "1", "-W", "2", "-s", "8000", "10.99.0.2"], b"", Duration::from_secs(10));
    let big_out = String::from_utf8_lossy(&big.stdout).into_owned();
    assert!(big.status.success() && big_out.contains("1 received"), "ping -s 8000: {big_out}");
    let udp = judge(&NC.path(), &["-u", "-w", "1", "10.99.0.2", "7"], b"hello over udp\n", Duration::from_secs(10));
    assert_eq!(
        String::from_utf8_lossy(&udp.stdout),
        "hello over udp\n",
        "nc -u: {}",
        String::from_utf8_lossy(&udp.stderr)
    );
    let text: String = (0..2000).map(|i| format!("line {i} of the tcp echo\n")).collect();
    // The echo is read back by count through bash's /dev/tcp: `nc -N` now and then ended with
    // the tail of what it had received unwritten (Linux's counters showed every byte and the
    // FIN delivered, the connection closed cleanly).
    let script = format!("exec 3<>/dev/tcp/10.99.0.2/7; head -c {} <&3 & cat >&3; wait", text.len());
    let tcp = judge(std::path::Path::new("/bin/bash"), &["-c", &script], text.as_bytes(), Duration::from_secs(15));
    assert_eq!(tcp.stdout.len(), text.len(), "nc (tcp): {}", String::from_utf8_lossy(&tcp.stderr));
    assert!(tcp.stdout == text.as_bytes(), "the TCP echo came back intact");
    eprintln!("{}", ping_out.lines().last().unwrap_or(""));
    drop(run);
    drop(namespace);
}

/// A port free for both UDP and TCP on 127.0.0.1, as far as one can tell before using it.
fn free_port() -> u16 {
    for _ in 0..100 {
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").expect("a TCP port");
        let port = tcp.local_addr().expect("its address").port();
        if std::net::UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no port free for both UDP and TCP");
}

fn a_host_client_talks_udp_and_tcp_to_domos_through_127_0_0_1_over_a_passt_card() {
    use std::io::{Read, Write};
    // The echo service listens on port 7 in the guest; passt forwards a high port of the host's
    // 127.0.0.1 to it (binding port 7 on the host would need root).
    let port = free_port();
    let text = format!(
        "[[nic]]\nname = \"eth0\"\npasst = {{ tcp = [\"{port}:7\"], udp = [\"{port}:7\"] }}\n\
         [[domain]]\nname = \"Driver\"\ngrants = [\"devices\"]\n[[domain.component]]\nname = \"drv-nic\"\nargs = \"nic=eth0\"\n{}{}",
        stack_domain("Stack", domos_loader::nic::PASST_ADDRESS, "NetworkDevice", "Network"),
        echo_domain("Network")
    );
    let mut config = domos_loader::SystemConfig::parse(&text).expect("parses");
    let passts = domos::passt::start(&mut config).expect("passt starts");
    let (kernel, outcome) =
        domos::boot_config(&config, registry(), Console::capture(), Some(Duration::from_millis(1)), false)
            .expect("boots");
    let run = Run { kernel, outcome };
    let start = std::time::Instant::now();
    while !run.has_line("[Echo] echo on UDP and TCP port 7") && start.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
    }
    run.expect(&["[Echo] echo on UDP and TCP port 7"]);
    // UDP: datagrams may be lost (the first one while the guest's stack resolves the gateway's
    // Ethernet address), so each is sent again until its echo comes, at most ten times.
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").expect("a UDP socket");
    udp.set_read_timeout(Some(Duration::from_millis(500))).expect("a timeout");
    udp.connect(("127.0.0.1", port)).expect("connects");
    for (i, size) in [1usize, 100, 1400].into_iter().enumerate() {
        let datagram: Vec<u8> = (0..size).map(|j| (i * 31 + j) as u8).collect();
        let mut echo = vec![0u8; 2048];
        let received = (0..10).find_map(|_| {
            udp.send(&datagram).expect("sends");
            udp.recv(&mut echo).ok()
        });
        assert_eq!(received.map(|len| &echo[..len]), Some(&datagram[..]), "the UDP echo of {size} bytes");
    }
    // TCP: 256 KiB through passt and back, written and read at once by two threads.
    let data: Vec<u8> = (0..256 * 1024u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connects");
    stream.set_read_timeout(Some(Duration::from_secs(10))).expect("a timeout");
    stream.set_write_timeout(Some(Duration::from_secs(10))).expect("a timeout");
    let mut writer = stream.try_clone().expect("clones");
    let sent = data.clone();
    let writing = std::thread::spawn(move || {
        writer.write_all(&sent).expect("writes");
        writer.shutdown(std::net::Shutdown::Write).expect("shuts down");
    });
    let mut echoed = Vec::new();
    // Kept for the message: a reset or the read timeout explains a short echo.
    let read = stream.read_to_end(&mut echoed);
    writing.join().expect("the writer ends");
    assert_eq!(echoed.len(), data.len(), "the whole TCP echo came back (the read ended with {read:?})");
    assert!(echoed == data, "the TCP echo came back intact");
    assert!(run.outcome.domains.iter().all(|d| !d.is_terminated()), "{:?}", run.lines());
    drop(run);
    drop(passts);
}

/// The sink's figures: per interval, the bytes of gold, bronze and iron.
fn sink_intervals(lines: &[String]) -> Vec<[u64; 3]> {
    lines
        .iter()
        .filter_map(|line| line.strip_prefix("[Sink] interval "))
        .map(|rest| {
            let words: Vec<&str> = rest.split_whitespace().collect();
            let bytes = |name: &str| {
                words.iter().position(|w| *w == name).and_then(|i| words.get(i + 1)?.parse().ok()).unwrap_or(0)
            };
            [bytes("gold"), bytes("bronze"), bytes("iron")]
        })
        .collect()
}

/// The sums over the intervals in which exactly the senders `sending` sent, without the first
/// and last such interval (each may hold a sender's start or end).
fn phase(intervals: &[[u64; 3]], sending: [bool; 3]) -> [u64; 3] {
    let chosen: Vec<&[u64; 3]> = intervals.iter().filter(|i| (0..3).all(|s| (i[s] > 0) == sending[s])).collect();
    assert!(chosen.len() >= 4, "too few intervals with senders {sending:?}: {intervals:?}");
    let mut sum = [0; 3];
    for interval in &chosen[1..chosen.len() - 1] {
        (0..3).for_each(|s| sum[s] += interval[s]);
    }
    sum
}

fn a_paced_link_is_shared_three_to_one_and_three_to_one_to_one_when_a_third_joins() {
    link_shares("UDP");
}

fn tcp_streams_share_a_paced_link_three_to_one_and_three_to_one_to_one() {
    link_shares("TCP");
}

/// Runs configs/net-shares.toml with its senders and sink on `protocol` (UDP as written, or
/// TCP) and checks the shares the sink saw ([`assert_shares`]).
fn link_shares(protocol: &str) {
    let mut config = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/net-shares.toml"))
        .expect("configs/net-shares.toml");
    if protocol == "TCP" {
        config = config.replace("args = \"send ", "args = \"send tcp ").replace("args = \"sink ", "args = \"sink tcp ");
    }
    let run = Run::until(&config, &["[Sink] sink done"], Duration::from_secs(60));
    run.expect(&[&format!("[Sink] sink on {protocol} port 9"), "[Sink] sink done"]);
    let intervals = sink_intervals(&run.lines());
    let two = phase(&intervals, [true, true, false]);
    let three = phase(&intervals, [true, true, true]);
    eprintln!(
        "over {protocol}: gold : bronze = {} : {}; gold : bronze : iron = {} : {} : {}",
        two[0], two[1], three[0], three[1], three[2]
    );
    assert_shares(&intervals, two, three);
}

/// Gold : bronze 3 : 1 while two send and 3 : 1 : 1 with iron, each within 15 %, and the link
/// saturated at its rate.
fn assert_shares(intervals: &[[u64; 3]], two: [u64; 3], three: [u64; 3]) {
    let near = |a: u64, b: u64, ratio: f64| {
        let measured = a as f64 / b.max(1) as f64;
        (measured / ratio - 1.0).abs() <= 0.15
    };
    assert!(near(two[0], two[1], 3.0), "gold : bronze not 3 : 1 within 15 %: {two:?} in {intervals:?}");
    assert!(near(three[0], three[1], 3.0), "gold : bronze not 3 : 1 with iron: {three:?} in {intervals:?}");
    assert!(near(three[0], three[2], 3.0), "gold : iron not 3 : 1: {three:?} in {intervals:?}");
    assert!(near(three[1], three[2], 1.0), "bronze : iron not 1 : 1: {three:?} in {intervals:?}");
    // The link is saturated: the senders together get close to 100 Mbit/s (12.5 MB/s) of
    // payload, 3.125 MB per 250 ms interval, and no more.
    let per_interval = three.iter().sum::<u64>() as f64 / (phase_len(intervals, [true, true, true])) as f64;
    assert!(
        (2_500_000.0..=3_300_000.0).contains(&per_interval),
        "not saturated at the rate: {per_interval} bytes per interval"
    );
}

/// How many intervals [`phase`] sums.
fn phase_len(intervals: &[[u64; 3]], sending: [bool; 3]) -> usize {
    intervals.iter().filter(|i| (0..3).all(|s| (i[s] > 0) == sending[s])).count() - 2
}
