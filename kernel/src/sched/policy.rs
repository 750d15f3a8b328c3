//! What the scheduler asks a policy that is not built in: the interface a scheduler component
//! (`runtime::scheduler_component`) implements. The scheduler trusts no answer; it checks each
//! against its run queue and replaces a policy that fails by the built-in one of the same name.

/// A domain's local scheduler: picks which of the domain's runnable threads runs.
pub trait LocalPolicy: Send {
    /// The component's name, for reports.
    fn name(&self) -> &str;
    /// The policy it implements (`fifo`, …), whose built-in version replaces it if it fails.
    fn policy(&self) -> &str;
    /// Whether it wants to hear of its threads' outgoing portal calls.
    fn hears_outgoing(&self) -> bool;
    /// Whether it wants to hear of portal calls into the domain's services.
    fn hears_incoming(&self) -> bool;
    /// Thread `thread` of priority `priority` became runnable.
    ///
    /// # Errors
    /// Why the policy failed (a trap, an overrun deadline).
    fn runnable(&mut self, thread: u32, priority: i32) -> Result<(), String>;
    /// The timer stopped `thread`.
    ///
    /// # Errors
    /// As for `runnable`.
    fn preempted(&mut self, thread: u32, priority: i32) -> Result<(), String>;
    /// The domain got CPU `cpu`: the thread to run, or 0 for none.
    ///
    /// # Errors
    /// As for `runnable`.
    fn activated(&mut self, cpu: u32) -> Result<u32, String>;
    /// The policy's own slice ended while `thread` ran: the thread to run next, or 0.
    ///
    /// # Errors
    /// As for `runnable`.
    fn interrupted(&mut self, thread: u32, priority: i32) -> Result<u32, String>;
    /// Whether `thread`'s portal call should wait until the domain's other threads ran.
    ///
    /// # Errors
    /// As for `runnable`.
    fn portal_call(&mut self, thread: u32) -> Result<bool, String>;
    /// Whether a call from domain `caller` into the domain's services should let the domain's
    /// threads run first.
    ///
    /// # Errors
    /// As for `runnable`.
    fn incoming_call(&mut self, caller: u32) -> Result<bool, String>;
}

/// The global scheduler: picks the domain whose thread runs next on a free CPU.
pub trait GlobalPolicy: Send {
    /// The component's name, for reports.
    fn name(&self) -> &str;
    /// The policy it implements, whose built-in version replaces it if it fails.
    fn policy(&self) -> &str;
    /// Domain `domain`, holding `tickets`, has threads to run.
    ///
    /// # Errors
    /// Why the policy failed.
    fn runnable(&mut self, domain: u32, tickets: u32) -> Result<(), String>;
    /// Domain `domain` has no thread to run any more.
    ///
    /// # Errors
    /// As for `runnable`.
    fn idle(&mut self, domain: u32) -> Result<(), String>;
    /// The domain to run on CPU `cpu`.
    ///
    /// # Errors
    /// As for `runnable`.
    fn pick(&mut self, cpu: u32) -> Result<u32, String>;
    /// Domain `domain` ran `ns` nanoseconds.
    ///
    /// # Errors
    /// As for `runnable`.
    fn ran(&mut self, domain: u32, ns: u64) -> Result<(), String>;
}
