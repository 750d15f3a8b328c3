//! `sched-fifo`: a local scheduler that runs a domain's threads first in, first out, without
//! preempting them in favour of each other.
//!
//! A preempted or interrupted thread resumes before any other thread of the domain; a thread
//! that yields or is woken goes to the back ([`domos_schedulers::local::Fifo`]). It opts into
//! no notification. It serves and uses no portal and reads no configuration.
#![no_std]
#![deny(unsafe_code)]

use domos_schedulers::local::Fifo;

static POLICY: Fifo = Fifo::new();

domos_sdk::local_scheduler! { policy: POLICY, interrupted }
