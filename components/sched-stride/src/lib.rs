//! `sched-stride`: a global scheduler giving domains CPU time in proportion to their tickets.
//!
//! Stride scheduling, as in Waldspurger and Weihl and in GVM ([`domos_schedulers::global::Stride`]):
//! the runnable domain with the least pass runs; a domain's pass grows by
//! `ns · 2^20 / tickets` as it runs; a domain that becomes runnable again rejoins at the global
//! virtual time, so it cannot bank CPU time while idle. It serves and uses no portal and reads
//! no configuration.
#![no_std]
#![deny(unsafe_code)]

use domos_schedulers::global::Stride;

static POLICY: Stride = Stride::new();

domos_sdk::global_scheduler! { policy: POLICY }
