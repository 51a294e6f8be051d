//! The threads statements run on: a pool that grows to as many threads as
//! statements run at once, and no further.
//!
//! tokio's blocking pool (`spawn_blocking`, what statements ran on before)
//! counts a thread free only once it has delivered its task's result and
//! taken the pool's lock again. A client answered by that delivery sends
//! its next statement at once; when the CPU is contended the thread is
//! often descheduled in between, finds the next statement's spawn with no
//! free thread, and a new thread starts. So the pool grew past the
//! statements in flight: 16 connections of point reads on 2 busy cores
//! ran on 55-69 threads (4 connections on 40), each allocator thread heap
//! holding pages of the view state, about 1 MB of resident memory per
//! thread under a 256 MB `--memory-limit` (issue #17). Here a thread
//! counts itself free *before* it hands the result over, so a connection's
//! next statement always finds the thread that ran its previous one.
//!
//! Never a deadlock: a statement waits in the queue only when a free
//! thread has been counted for it; when none is, a thread is started (a
//! statement waiting on a row lock, SLEEP or a replica's read-your-writes
//! holds its thread, as before). Threads idle for [`KEEP_ALIVE`] exit.
//! Each job runs inside the tokio runtime it was submitted from (as on
//! tokio's blocking threads), with the stack statements need.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

/// How long a thread waits for a statement before it exits (tokio's
/// blocking threads wait as long).
pub const KEEP_ALIVE: Duration = Duration::from_secs(10);

/// The process's statement threads.
pub fn global() -> &'static StatementThreads {
    static POOL: OnceLock<StatementThreads> = OnceLock::new();
    POOL.get_or_init(|| StatementThreads::new(KEEP_ALIVE))
}

/// A job: runs the work and returns how to deliver its result, which
/// runs once the thread counts itself free again.
type Job = Box<dyn FnOnce() -> Box<dyn FnOnce() + Send> + Send>;

/// A pool of threads with the statement stack size (see the module docs).
pub struct StatementThreads {
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    keep_alive: Duration,
}

/// Invariant: the threads not running a job number `unclaimed` plus
/// `queue.len()` (each queued job has a free thread counted for it).
#[derive(Default)]
struct State {
    queue: VecDeque<Job>,
    threads: usize,
    unclaimed: usize,
}

/// Why a job gave no value.
#[derive(Debug, thiserror::Error)]
pub enum Aborted {
    #[error("panicked: {0}")]
    Panic(String),
    /// Its thread could not be started (logged).
    #[error("no thread could be started")]
    NoThread,
}

impl StatementThreads {
    pub fn new(keep_alive: Duration) -> StatementThreads {
        StatementThreads {
            shared: Arc::new(Shared {
                state: Mutex::new(State::default()),
                wake: Condvar::new(),
                keep_alive,
            }),
        }
    }

    /// Runs `f` on a pool thread and waits for its value; a panic in `f`
    /// is returned as [`Aborted`]. Called from inside a tokio runtime,
    /// whose context `f` runs in.
    pub async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Aborted> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let runtime = tokio::runtime::Handle::try_current().ok();
        let job: Job = Box::new(move || {
            let value = {
                let _entered = runtime.as_ref().map(|h| h.enter());
                catch_unwind(AssertUnwindSafe(f)).map_err(|p| Aborted::Panic(panic_message(&*p)))
            };
            Box::new(move || drop(tx.send(value)))
        });
        self.submit(job);
        rx.await.unwrap_or(Err(Aborted::NoThread))
    }

    /// Threads now, busy or idle (for tests and figures).
    pub fn threads(&self) -> usize {
        self.shared.lock().threads
    }

    fn submit(&self, job: Job) {
        let mut st = self.shared.lock();
        if st.unclaimed > 0 {
            st.unclaimed -= 1;
            st.queue.push_back(job);
            drop(st);
            self.shared.wake.notify_one();
            return;
        }
        st.threads += 1;
        drop(st);
        let shared = Arc::clone(&self.shared);
        let spawned = std::thread::Builder::new()
            .name("ladle-statement".into())
            .stack_size(ladle_dataflow::THREAD_STACK_BYTES)
            .spawn(move || shared.work(job));
        if let Err(e) = spawned {
            // The job went with the closure and was dropped, so its
            // caller gets `Aborted::NoThread` (error 1105).
            tracing::error!("cannot start a statement thread: {e}");
            self.shared.lock().threads -= 1;
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Jobs run outside the lock and catch their panics: it is never
        // poisoned by one; a poisoned lock's counts are still whole.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A thread's life: `first`, then queued jobs until idle for
    /// `keep_alive`.
    fn work(&self, first: Job) {
        let mut job = first;
        loop {
            let deliver = job();
            self.lock().unclaimed += 1;
            deliver();
            let mut st = self.lock();
            loop {
                if let Some(next) = st.queue.pop_front() {
                    job = next;
                    break;
                }
                let (guard, wait) = self
                    .wake
                    .wait_timeout(st, self.keep_alive)
                    .unwrap_or_else(|e| e.into_inner());
                st = guard;
                if wait.timed_out() && st.queue.is_empty() {
                    // Free with nothing queued: counted in `unclaimed`.
                    st.unclaimed -= 1;
                    st.threads -= 1;
                    return;
                }
            }
        }
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Barrier;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    }

    /// A connection's statements one after another reuse one thread,
    /// however the threads are scheduled, here with both cores spinning
    /// (the case that grew tokio's blocking pool).
    #[test]
    fn statements_one_after_another_run_on_one_thread() {
        let pool = StatementThreads::new(KEEP_ALIVE);
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let spinners: Vec<_> = (0..2)
            .map(|_| {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        rt().block_on(async {
            for i in 0..500u64 {
                assert_eq!(pool.run(move || i * 2).await.unwrap(), i * 2);
            }
        });
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        spinners.into_iter().for_each(|s| s.join().unwrap());
        assert_eq!(pool.threads(), 1);
    }

    /// Statements that wait for each other (locks, SLEEP) each get a
    /// thread: eight jobs meeting at a barrier of eight all finish.
    #[test]
    fn statements_that_wait_for_each_other_each_get_a_thread() {
        let pool = Arc::new(StatementThreads::new(KEEP_ALIVE));
        let barrier = Arc::new(Barrier::new(8));
        rt().block_on(async {
            let runs: Vec<_> = (0..8)
                .map(|i| {
                    let (pool, barrier) = (Arc::clone(&pool), Arc::clone(&barrier));
                    tokio::spawn(async move {
                        pool.run(move || {
                            barrier.wait();
                            i
                        })
                        .await
                    })
                })
                .collect();
            let mut done = Vec::new();
            for r in runs {
                done.push(r.await.unwrap().unwrap());
            }
            assert_eq!(done, (0..8).collect::<Vec<_>>());
        });
        assert_eq!(pool.threads(), 8);
        // Then one after another: the queue takes free threads, no more.
        rt().block_on(async {
            for i in 0..100 {
                assert_eq!(pool.run(move || i).await.unwrap(), i);
            }
        });
        assert_eq!(pool.threads(), 8);
    }

    #[test]
    fn a_panic_is_returned_and_the_thread_goes_on() {
        let pool = StatementThreads::new(KEEP_ALIVE);
        rt().block_on(async {
            let err = pool.run(|| -> u8 { panic!("boom") }).await.unwrap_err();
            assert!(matches!(err, Aborted::Panic(m) if m == "boom"));
            assert_eq!(pool.run(|| 7).await.unwrap(), 7);
        });
        assert_eq!(pool.threads(), 1);
    }

    #[test]
    fn jobs_run_in_the_submitting_runtime() {
        let pool = StatementThreads::new(KEEP_ALIVE);
        rt().block_on(async {
            let inside = pool
                .run(|| tokio::runtime::Handle::try_current().is_ok())
                .await
                .unwrap();
            assert!(inside);
        });
    }

    #[test]
    fn idle_threads_exit() {
        let pool = StatementThreads::new(Duration::from_millis(50));
        rt().block_on(async {
            assert_eq!(pool.run(|| 1).await.unwrap(), 1);
        });
        let start = std::time::Instant::now();
        while pool.threads() > 0 {
            assert!(start.elapsed() < Duration::from_secs(10), "thread kept");
            std::thread::sleep(Duration::from_millis(10));
        }
        rt().block_on(async {
            assert_eq!(pool.run(|| 2).await.unwrap(), 2);
        });
        assert_eq!(pool.threads(), 1);
    }
}
