//! Benchmark (ignored test).
