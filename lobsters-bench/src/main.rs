//! `lobsters-bench`: see the crate docs and README.md.

use clap::{Parser, Subcommand};
use lobsters_bench::{lobsters, vote};

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
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        match cli.cmd {
            Cmd::Lobsters(a) => lobsters::main(a).await,
            Cmd::Vote(a) => vote::main(a).await,
        }
    })
}
