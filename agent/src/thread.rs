//! The agent's threads: every one starts here, with a small stack.

/// Threads here only shuffle bytes between fds and queues; a small stack keeps a machine with
/// hundreds of processes (up to four threads each) light.
const THREAD_STACK: usize = 256 << 10;

/// Starts a named thread with the agent's stack size. Failing to start one is fatal: the agent
/// could not keep its promises (an answer, an exit frame) without it.
pub fn spawn_thread<F: FnOnce() + Send + 'static>(name: &str, f: F) {
    if let Err(e) = std::thread::Builder::new()
        .name(name.into())
        .stack_size(THREAD_STACK)
        .spawn(f)
    {
        eprintln!("kern-sandbox-agent: cannot start a {name} thread: {e}");
        std::process::exit(70);
    }
}
