//! Linux baselines, measured in the same run as Domos.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::Instant;

/// The hidden subcommand that runs the child of the pipe ping-pong.
pub const PIPE_ECHO: &str = "__pipe-echo";

/// The pipe ping-pong child: echoes every byte on stdin to stdout until stdin closes.
///
/// # Errors
/// When stdin or stdout fail.
pub fn pipe_echo() -> Result<(), String> {
    let mut input = std::io::stdin().lock();
    let mut output = std::io::stdout().lock();
    let mut byte = [0u8; 1];
    while input.read(&mut byte).map_err(|e| e.to_string())? == 1 {
        output.write_all(&byte).and_then(|()| output.flush()).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Round trip of one byte between this process and a child through two pipes, in ns.
///
/// # Errors
/// When the child cannot be started or the pipes fail.
pub fn pipe_round_trip(iterations: u32) -> Result<f64, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut child = Command::new(exe)
        .arg(PIPE_ECHO)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start the pipe child: {e}"))?;
    let (Some(mut to_child), Some(mut from_child)) = (child.stdin.take(), child.stdout.take()) else {
        return Err("the pipe child has no pipes".into());
    };
    let mut byte = [7u8; 1];
    let mut ping = |byte: &mut [u8; 1]| -> Result<(), String> {
        to_child.write_all(byte.as_slice()).map_err(|e| e.to_string())?;
        from_child.read_exact(byte).map_err(|e| e.to_string())
    };
    for _ in 0..iterations / 10 {
        ping(&mut byte)?;
    }
    let start = Instant::now();
    for _ in 0..iterations {
        ping(&mut byte)?;
    }
    let elapsed = start.elapsed().as_nanos() as f64 / f64::from(iterations);
    drop(to_child);
    let _ = child.wait();
    Ok(elapsed)
}

#[inline(never)]
fn add_one(x: u64) -> u64 {
    x.wrapping_add(1)
}

/// A plain native function call through a pointer the compiler cannot see through, in ns.
pub fn function_call(iterations: u64) -> f64 {
    let f: fn(u64) -> u64 = std::hint::black_box(add_one);
    let mut x = 0;
    let start = Instant::now();
    for _ in 0..iterations {
        x = f(std::hint::black_box(x));
    }
    std::hint::black_box(x);
    start.elapsed().as_nanos() as f64 / iterations as f64
}

/// `fork` + `exec` + `wait` of `/bin/true`, in ns.
///
/// # Errors
/// When `/bin/true` cannot be run.
pub fn fork_exec_wait(iterations: u32) -> Result<f64, String> {
    let start = Instant::now();
    for _ in 0..iterations {
        Command::new("/bin/true").status().map_err(|e| format!("cannot run /bin/true: {e}"))?;
    }
    Ok(start.elapsed().as_nanos() as f64 / f64::from(iterations))
}

/// `len` bytes copied to another host buffer and back, as `memobj_copy_1m` moves them, in ns.
pub fn memcpy_round_trip(len: usize, rounds: u32) -> f64 {
    let mut a = vec![7u8; len];
    let mut b = vec![0u8; len];
    let start = Instant::now();
    for _ in 0..rounds {
        b.copy_from_slice(std::hint::black_box(&a));
        a.copy_from_slice(std::hint::black_box(&b));
    }
    std::hint::black_box((&a, &b));
    start.elapsed().as_nanos() as f64 / f64::from(rounds)
}

/// A round trip between two Linux threads handing a turn back and forth through a mutex and
/// two condition variables, in ns (the baseline of `wait_notify_rt`).
pub fn condvar_round_trip(rounds: u32) -> f64 {
    use std::sync::{Arc, Condvar, Mutex};
    let turn = Arc::new((Mutex::new(0u32), Condvar::new(), Condvar::new()));
    let other = {
        let turn = turn.clone();
        std::thread::spawn(move || {
            let (value, ping, pong) = &*turn;
            for i in 1..=rounds {
                let mut v = value.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                while *v != 2 * i - 1 {
                    v = ping.wait(v).unwrap_or_else(std::sync::PoisonError::into_inner);
                }
                *v = 2 * i;
                pong.notify_one();
            }
        })
    };
    let (value, ping, pong) = &*turn;
    let start = Instant::now();
    for i in 1..=rounds {
        let mut v = value.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *v = 2 * i - 1;
        ping.notify_one();
        while *v != 2 * i {
            v = pong.wait(v).unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }
    let elapsed = start.elapsed().as_nanos() as f64 / f64::from(rounds);
    let _ = other.join();
    elapsed
}

/// `pthread_create` + `pthread_join` of a thread that does nothing (through `std::thread`),
/// median in ns (the baseline of `thread_start`).
pub fn thread_create_join(iterations: u32) -> f64 {
    let mut samples: Vec<f64> = (0..iterations)
        .map(|_| {
            let start = Instant::now();
            let _ = std::thread::spawn(|| {}).join();
            start.elapsed().as_nanos() as f64
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}
