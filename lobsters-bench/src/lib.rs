//! Lobsters and vote workload generators for any MySQL endpoint.
//!
//! Entry points: [`lobsters::main`] (the Lobsters page mix, open loop, with
//! a max-rate search) and [`vote::main`] (the vote micro-benchmark, closed
//! loop). Both speak only the MySQL wire protocol through `mysql_async`;
//! this crate depends on no Ladle crate, so it measures Ladle and MariaDB
//! the same way.

pub mod db;
pub mod dist;
pub mod lobsters;
pub mod stats;
pub mod vote;
