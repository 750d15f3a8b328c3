//! `sched-round-robin`: a local scheduler that runs a domain's threads in turn.
//!
//! Threads run in the order they became runnable; a preempted or interrupted thread goes to
//! the back ([`domos_schedulers::local::RoundRobin`]). It opts into no notification, so the
//! domain's portal calls are invisible to it (JX's "invisible portals"). It serves and uses no
//! portal and reads no configuration.
#![no_std]
#![deny(unsafe_code)]

use domos_schedulers::local::RoundRobin;

static POLICY: RoundRobin = RoundRobin::new();

domos_sdk::local_scheduler! { policy: POLICY, interrupted }
