//! CPU time of the server under test and of the load generator itself,
//! sampled at the edges of a measured interval so that a report can say
//! how many milliseconds of CPU each page (or operation) cost.
//!
//! The server's CPU comes from `/proc/PID/stat` (`--server-pid`, when the
//! server runs on this machine) or from the standard Prometheus
//! `process_cpu_seconds_total` counter (`--metrics-url`, Ladle's /metrics).
//! The client's is always `/proc/self/stat`.

use anyhow::{anyhow, bail, Context, Result};
use procfs::process::Process;
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// `--server-pid` / `--metrics-url`, shared by every workload.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct CpuArgs {
    /// Process id of the server under test (same machine): its CPU time per
    /// page/op over the measured interval is reported.
    #[arg(long, conflicts_with = "metrics_url")]
    pub server_pid: Option<i32>,
    /// URL of the server's Prometheus metrics (e.g.
    /// http://127.0.0.1:6034/metrics): reads `process_cpu_seconds_total`.
    #[arg(long)]
    pub metrics_url: Option<String>,
}

/// Where the server's CPU seconds are read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerCpuSource {
    /// utime + stime of this process, from /proc.
    Pid(i32),
    /// `process_cpu_seconds_total` from this plain-HTTP metrics URL.
    Metrics(String),
}

/// Samples CPU seconds of the server (when a source is known) and of this
/// process.
#[derive(Debug, Clone, Default)]
pub struct CpuMeter {
    server: Option<ServerCpuSource>,
}

/// Cumulative CPU seconds at one instant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuSample {
    pub server_s: Option<f64>,
    pub client_s: f64,
}

/// CPU seconds spent between two samples.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CpuUsage {
    /// None when the server's CPU is not visible (no source, or a sample
    /// failed).
    pub server_s: Option<f64>,
    pub client_s: f64,
}

impl CpuUsage {
    /// Server milliseconds per unit of work (None without a server figure
    /// or without work done).
    pub fn server_ms_per(&self, units: u64) -> Option<f64> {
        self.server_s.and_then(|s| ms_per(s, units))
    }

    /// Client milliseconds per unit of work.
    pub fn client_ms_per(&self, units: u64) -> Option<f64> {
        ms_per(self.client_s, units)
    }
}

fn ms_per(seconds: f64, units: u64) -> Option<f64> {
    (units > 0).then(|| crate::stats::round3(seconds * 1000.0 / units as f64))
}

impl CpuMeter {
    /// A meter for the source named on the command line (client only when
    /// none is).
    pub fn from_args(args: &CpuArgs) -> CpuMeter {
        let server = match (args.server_pid, &args.metrics_url) {
            (Some(pid), _) => Some(ServerCpuSource::Pid(pid)),
            (None, Some(url)) => Some(ServerCpuSource::Metrics(url.clone())),
            (None, None) => None,
        };
        CpuMeter { server }
    }

    /// Checks that the server's CPU can be read, so that a wrong pid or URL
    /// fails the run at once rather than leaving the figure out.
    pub async fn check(&self) -> Result<()> {
        if let Some(src) = &self.server {
            server_cpu_seconds(src)
                .await
                .with_context(|| format!("reading the server's CPU time from {src:?}"))?;
        }
        Ok(())
    }

    /// Current cumulative CPU seconds. A failed server read (the server
    /// exited) leaves `server_s` empty rather than failing the run.
    pub async fn sample(&self) -> CpuSample {
        let server_s = match &self.server {
            Some(src) => server_cpu_seconds(src).await.ok(),
            None => None,
        };
        CpuSample {
            server_s,
            client_s: own_cpu_seconds().unwrap_or(0.0),
        }
    }

    /// CPU spent between `from` and `to` (waits for both instants).
    pub async fn measure_between(&self, from: Instant, to: Instant) -> CpuUsage {
        tokio::time::sleep_until(from.into()).await;
        let before = self.sample().await;
        tokio::time::sleep_until(to.into()).await;
        let after = self.sample().await;
        usage(before, after)
    }
}

/// The difference of two samples.
pub fn usage(before: CpuSample, after: CpuSample) -> CpuUsage {
    CpuUsage {
        server_s: match (before.server_s, after.server_s) {
            (Some(b), Some(a)) => Some((a - b).max(0.0)),
            _ => None,
        },
        client_s: (after.client_s - before.client_s).max(0.0),
    }
}

async fn server_cpu_seconds(src: &ServerCpuSource) -> Result<f64> {
    match src {
        ServerCpuSource::Pid(pid) => process_cpu_seconds(Process::new(*pid)?),
        ServerCpuSource::Metrics(url) => {
            let body = http_get(url).await?;
            metric_value(&body, "process_cpu_seconds_total")
                .ok_or_else(|| anyhow!("no process_cpu_seconds_total in {url}"))
        }
    }
}

/// utime + stime of this process (the load generator), in seconds.
pub fn own_cpu_seconds() -> Result<f64> {
    process_cpu_seconds(Process::myself()?)
}

fn process_cpu_seconds(p: Process) -> Result<f64> {
    let stat = p.stat()?;
    Ok((stat.utime + stat.stime) as f64 / procfs::ticks_per_second() as f64)
}

/// The value of an unlabelled metric in Prometheus' text format.
pub fn metric_value(exposition: &str, name: &str) -> Option<f64> {
    exposition.lines().find_map(|line| {
        let rest = line.strip_prefix(name)?.strip_prefix(' ')?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// A plain `GET` over HTTP/1.0 (the body ends when the server closes).
/// Hand-written rather than an HTTP client crate: it reads one small text
/// page from a loopback metrics port, twice per run.
async fn http_get(url: &str) -> Result<String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| anyhow!("--metrics-url must be http://HOST:PORT/PATH, got {url:?}"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/metrics"),
    };
    let mut stream = tokio::net::TcpStream::connect(authority)
        .await
        .with_context(|| format!("connecting to {authority}"))?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: {authority}\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut response = String::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(5),
        stream.read_to_string(&mut response),
    )
    .await
    .with_context(|| format!("{url} did not answer within 5 s"))??;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow!("malformed HTTP response from {url}"))?;
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        bail!("{url} answered {}", head.lines().next().unwrap_or_default());
    }
    Ok(body.to_owned())
}

/// `  CPU per page: server 1.234 ms, client 0.456 ms` (or nothing when
/// neither figure is known).
pub fn cpu_line(unit: &str, server_ms: Option<f64>, client_ms: Option<f64>) -> String {
    let fmt = |v: Option<f64>| v.map_or("n/a".to_owned(), |v| format!("{v:.3} ms"));
    if server_ms.is_none() && client_ms.is_none() {
        return String::new();
    }
    format!(
        "  CPU per {unit} (measured interval): server {}, client {}\n",
        fmt(server_ms),
        fmt(client_ms)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_unlabelled_metrics_only() {
        let text = "# HELP process_cpu_seconds_total CPU\n\
                    process_cpu_seconds_total_extra 9\n\
                    process_cpu_seconds_total 12.5\n\
                    ladle_queries_total{kind=\"select\"} 3\n";
        assert_eq!(metric_value(text, "process_cpu_seconds_total"), Some(12.5));
        assert_eq!(metric_value(text, "ladle_queries_total"), None);
        assert_eq!(metric_value(text, "missing"), None);
    }

    #[test]
    fn own_cpu_grows_with_work() {
        let before = own_cpu_seconds().unwrap();
        // Spin for a quarter of a second of wall time: CPU time must not
        // shrink, and usage divides by the units of work.
        let t = Instant::now();
        let mut x = 0u64;
        while t.elapsed().as_millis() < 250 {
            x = x.wrapping_mul(31).wrapping_add(7);
        }
        std::hint::black_box(x);
        let after = own_cpu_seconds().unwrap();
        assert!(after >= before);
        let u = usage(
            CpuSample {
                server_s: Some(1.0),
                client_s: before,
            },
            CpuSample {
                server_s: Some(3.0),
                client_s: after,
            },
        );
        assert_eq!(u.server_ms_per(1000), Some(2.0));
        assert_eq!(u.server_ms_per(0), None);
        assert!(u.client_ms_per(1).is_some());
    }

    #[tokio::test]
    async fn server_pid_reads_proc() {
        let me = std::process::id() as i32;
        let meter = CpuMeter::from_args(&CpuArgs {
            server_pid: Some(me),
            metrics_url: None,
        });
        meter.check().await.unwrap();
        assert!(meter.sample().await.server_s.is_some());
        let gone = CpuMeter::from_args(&CpuArgs {
            server_pid: Some(i32::MAX),
            metrics_url: None,
        });
        assert!(gone.check().await.is_err());
    }

    #[tokio::test]
    async fn metrics_url_reads_process_cpu_seconds() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf).await.unwrap();
            s.write_all(b"HTTP/1.1 200 OK\r\n\r\nprocess_cpu_seconds_total 4.25\n")
                .await
                .unwrap();
        });
        let src = ServerCpuSource::Metrics(format!("http://{addr}/metrics"));
        assert_eq!(server_cpu_seconds(&src).await.unwrap(), 4.25);
    }
}
