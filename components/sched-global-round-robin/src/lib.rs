//! `sched-global-round-robin`: a global scheduler that runs the runnable domains in turn.
//!
//! The runnable domain that has waited longest since it was last picked, or since it became
//! runnable, runs next; tickets are ignored ([`domos_schedulers::global::RoundRobin`]). It
//! serves and uses no portal and reads no configuration.
#![no_std]
#![deny(unsafe_code)]

use domos_schedulers::global::RoundRobin;

static POLICY: RoundRobin = RoundRobin::new();

domos_sdk::global_scheduler! { policy: POLICY }
