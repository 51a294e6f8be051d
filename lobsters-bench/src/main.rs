//! `lobsters-bench`: see the crate docs and README.md.

use clap::{Parser, Subcommand};
use lobsters_bench::{chart, lobsters, vote};

#[derive(Parser)]
#[command(
    name = "lobsters-bench",
    about = "Lobsters and vote workloads against any MySQL endpoint"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// The Lobsters page mix, open loop, optionally searching for the max rate.
    Lobsters(lobsters::LobstersArgs),
    /// The vote micro-benchmark, closed loop.
    Vote(vote::VoteArgs),
    /// SVG charts: latency and rate over time from reports, or the history
    /// of side-by-side ratios.
    Chart(chart::ChartArgs),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().cmd {
        Cmd::Lobsters(a) => runtime()?.block_on(lobsters::main(a)),
        Cmd::Vote(a) => runtime()?.block_on(vote::main(a)),
        Cmd::Chart(a) => chart::main(a),
    }
}

/// The workloads' multi-threaded runtime (the chart needs none).
fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
}
