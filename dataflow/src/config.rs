//! How the engine runs: its memory limit and worker threads.

#[derive(Clone, Debug)]
pub struct DataflowConfig {
    /// Bytes of view state kept in memory before eviction.
    pub memory_limit: usize,
    /// Threads that propagate a batch through independent domains (parts
    /// of the graph sharing no state) in parallel; 0 = one per core.
    pub domain_threads: usize,
    /// Batches with fewer row deltas than this propagate on one thread:
    /// waking the domain workers (and their spinning before they sleep
    /// again, rayon's `sched_yield` loop) costs more CPU than a few rows
    /// take through every domain. With sysbench `oltp_read_write` (one to
    /// four rows a commit) 7% of the server's CPU was the pool yielding.
    pub parallel_min_deltas: usize,
}

impl Default for DataflowConfig {
    fn default() -> Self {
        DataflowConfig {
            memory_limit: 1 << 30,
            domain_threads: 0,
            parallel_min_deltas: 64,
        }
    }
}
