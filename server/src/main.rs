//! The `ladle` binary: parses flags, sets up logging and the tokio runtime,
//! and hands over to [`run::run`]. Start-up, recovery, `/metrics` and
//! `/health`, and graceful shutdown live in the modules; the MySQL front end
//! is `ladle_shim`.

mod cluster;
mod config;
mod http;
mod ports;
mod run;
mod snapshots;
mod storage_health;

use clap::Parser;

/// See the workspace Cargo.toml for why.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    // Transparent huge pages off for this process, before the heap grows.
    // mimalloc advises huge pages on its arenas and returns freed memory
    // to the kernel in 64 KiB pieces; touching such a piece again faulted
    // in and zeroed a whole 2 MiB page: 16% of the server's CPU in the
    // first 20 s after a Lobsters `--prime` (kernel `clear_page_erms`).
    // (`MIMALLOC_ALLOW_THP=0` does the same.) Not fatal where prctl is
    // refused.
    let thp = rustix::thread::disable_transparent_huge_pages(true);
    let args = config::Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("LADLE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .init();
    if config::password_on_command_line(std::env::args()) {
        tracing::warn!(
            "the password was given with --password: every local user can read it in \
             /proc/{}/cmdline; set LADLE_PASSWORD in the environment instead",
            std::process::id()
        );
    }
    if let Err(e) = thp {
        tracing::warn!("could not turn transparent huge pages off: {e}");
    }
    if let Err(msg) = args.validate() {
        tracing::error!("{msg}");
        eprintln!("ladle: {msg}");
        return std::process::ExitCode::from(2);
    }
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    // Statements are planned and evaluated on these threads (blocking ones):
    // room for the deepest expression the parser lets through.
    rt.enable_all()
        .thread_name("ladle-worker")
        .thread_stack_size(ladle_dataflow::THREAD_STACK_BYTES);
    if let Some(n) = args.threads {
        rt.worker_threads(n);
    }
    let rt = match rt.build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ladle: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match rt.block_on(run::run(args)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("ladle: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
