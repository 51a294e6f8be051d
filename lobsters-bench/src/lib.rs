//! Lobsters and vote workload generators for any MySQL endpoint.
//!
//! Entry points: [`lobsters::main`] (the Lobsters page mix, open loop, with
//! a max-rate search) and [`vote::main`] (the vote micro-benchmark, closed
//! loop); both can measure the server's and their own CPU per page/op
//! ([`cpu`]) and report latency per 10 s window ([`windows`]), which
//! [`chart`] draws. They speak only the MySQL wire protocol through `mysql_async`;
//! this crate depends on no Ladle crate, so it measures Ladle and MariaDB
//! the same way.

pub mod chart;
pub mod cpu;
pub mod db;
pub mod dist;
pub mod lobsters;
pub mod stats;
pub mod vote;
pub mod windows;
