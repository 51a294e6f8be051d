//! A bound on a test server's resident memory. A hostile statement that
//! makes the server allocate without end once grew it to 22 GB and froze
//! the machine for an hour; under a [`MemoryWatch`] the server is killed
//! as soon as its RSS passes the bound, and the test fails naming the
//! statement instead.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// The bound hostile tests put on a server (a correct server stays far
/// below it: about 0.1-0.5 GB in those tests).
pub const HOSTILE_RSS_BOUND: u64 = 3 << 30;

/// How often the RSS is read: growth at the ~1.2 GB/s once measured
/// passes the bound by at most a few tens of MB before the kill.
const EVERY: Duration = Duration::from_millis(20);

/// The resident memory of process `pid` in bytes (`VmRSS` in
/// `/proc/PID/status`); `None` once the process is gone.
pub fn rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Watches a process's RSS on its own thread until dropped; past the
/// bound, kills the process (SIGKILL) and remembers it.
pub struct MemoryWatch {
    bound: u64,
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    killed: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MemoryWatch {
    /// Starts watching `pid` (a child not yet waited for, so its id is
    /// not reused while watched) against `bound` bytes.
    pub fn start(pid: u32, bound: u64) -> MemoryWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(0));
        let killed = Arc::new(AtomicBool::new(false));
        let thread = {
            let (stop, peak, killed) = (stop.clone(), peak.clone(), killed.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let Some(rss) = rss_bytes(pid) else { return };
                    peak.fetch_max(rss, Ordering::Relaxed);
                    if rss > bound {
                        killed.store(true, Ordering::Relaxed);
                        // (std has no signal API; `kill` is in every image.)
                        let _ = std::process::Command::new("kill")
                            .args(["-KILL", &pid.to_string()])
                            .status();
                        return;
                    }
                    std::thread::sleep(EVERY);
                }
            })
        };
        MemoryWatch {
            bound,
            stop,
            peak,
            killed,
            thread: Some(thread),
        }
    }

    /// Whether the RSS passed the bound (and the process was killed).
    pub fn breached(&self) -> bool {
        self.killed.load(Ordering::Relaxed)
    }

    /// The highest RSS read so far, in bytes.
    pub fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }

    /// Panics if the bound was passed, naming `what` (the statement that
    /// was running).
    pub fn assert_within(&self, what: &str) {
        assert!(
            !self.breached(),
            "the server's RSS passed {} MB (peak read {} MB) during {what}: it was killed",
            self.bound >> 20,
            self.peak() >> 20
        );
    }
}

impl Drop for MemoryWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
