//! How the engine runs: its memory limit and worker threads.

#[derive(Clone, Debug)]
pub struct DataflowConfig {
    /// Bytes of view state kept in memory before eviction.
    pub memory_limit: usize,
    /// Threads that propagate a batch through independent domains (parts
    /// of the graph sharing no state) in parallel; 0 = one per core.
    pub domain_threads: usize,
}

impl Default for DataflowConfig {
    fn default() -> Self {
        DataflowConfig {
            memory_limit: 1 << 30,
            domain_threads: 0,
        }
    }
}
