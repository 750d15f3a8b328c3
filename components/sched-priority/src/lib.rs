//! `sched-priority`: a local scheduler with fixed priorities.
//!
//! The runnable thread of highest priority runs, first come first served among equals
//! ([`domos_schedulers::local::FixedPriority`]). It opts into both notifications: a thread
//! about to make a portal call first lets runnable threads of higher priority run, and calls
//! into the domain's services wait while a thread of priority above 0 is runnable. It serves
//! and uses no portal and reads no configuration.
#![no_std]
#![deny(unsafe_code)]

use domos_schedulers::local::FixedPriority;

static POLICY: FixedPriority = FixedPriority::new();

domos_sdk::local_scheduler! { policy: POLICY, interrupted, portal_call, incoming_call }
