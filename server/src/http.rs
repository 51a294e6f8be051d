//! A tiny HTTP/1.1 responder for `/metrics` (Prometheus text format) and
//! `/health` (200 when ready, 503 while starting or recovering, or while
//! storage refuses every write after a background error).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use ladle_dataflow::Dataflow;
use ladle_shim::Metrics;
use parking_lot::RwLock;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the endpoints report.
pub struct HttpState {
    pub metrics: Arc<Metrics>,
    pub ready: AtomicBool,
    pub dataflow: RwLock<Option<Arc<Dataflow>>>,
    /// Set on a cluster node: `/health` names its role.
    pub cluster: RwLock<Option<Arc<ladle_cluster::Node>>>,
    /// Whether storage takes writes (see [`StorageHealth`]).
    pub storage: crate::storage_health::StorageHealth,
}

pub async fn serve(
    listener: TcpListener,
    state: Arc<HttpState>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                if let Ok((stream, _)) = accepted {
                    let st = state.clone();
                    tokio::spawn(async move {
                        let _ = respond(stream, st).await;
                    });
                }
            }
            _ = ladle_shim::stopped(&mut shutdown) => return,
        }
    }
}

/// A cluster node's `/health`: its role, term and applied position; 200
/// for a primary or an up-to-date replica, 503 otherwise (catching up,
/// electing, diverged), so a load balancer routes only to the former.
fn cluster_health(node: &ladle_cluster::Node) -> (&'static str, &'static str, String) {
    let mut role = node.role();
    if role == ladle_cluster::Role::Primary && node.check_writable().is_err() {
        // Its lease may have expired (etcd unreachable, or it was paused
        // or cut off): it takes no writes and another node may lead now.
        role = ladle_cluster::Role::Candidate;
    }
    let body = format!(
        "{} term={} applied={}\n",
        role.as_str(),
        node.term(),
        node.applied()
    );
    match role {
        ladle_cluster::Role::Primary | ladle_cluster::Role::Replica => {
            ("200 OK", "text/plain", body)
        }
        _ => ("503 Service Unavailable", "text/plain", body),
    }
}

async fn respond(mut stream: TcpStream, state: Arc<HttpState>) -> std::io::Result<()> {
    let mut buf = vec![0u8; 4096];
    let mut n = 0;
    // Read the request head (we ignore any body).
    loop {
        let r = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            stream.read(&mut buf[n..]),
        )
        .await;
        let Ok(Ok(k)) = r else { return Ok(()) };
        if k == 0 {
            break;
        }
        n += k;
        if buf[..n].windows(4).any(|w| w == b"\r\n\r\n") || n == buf.len() {
            break;
        }
    }
    let head = String::from_utf8_lossy(&buf[..n]);
    let mut parts = head.split_whitespace();
    let method = parts.next().unwrap_or("");
    let path = parts.next().unwrap_or("").split('?').next().unwrap_or("");
    let (status, ctype, body) = match (method, path) {
        ("GET" | "HEAD", "/metrics") => {
            // Refreshes ladle_storage_background_error.
            state.storage.writes_stopped().await;
            let df = state.dataflow.read().clone();
            (
                "200 OK",
                "text/plain; version=0.0.4",
                state.metrics.render(df.as_deref()),
            )
        }
        ("GET" | "HEAD", "/health") => {
            let node = state.cluster.read().clone();
            let stopped = if state.ready.load(Ordering::SeqCst) {
                state.storage.writes_stopped().await
            } else {
                None
            };
            if let Some(reason) = stopped {
                (
                    "503 Service Unavailable",
                    "text/plain",
                    format!("storage refuses writes: {reason}\n"),
                )
            } else if let (true, Some(node)) = (state.ready.load(Ordering::SeqCst), node) {
                cluster_health(&node)
            } else if state.ready.load(Ordering::SeqCst) {
                ("200 OK", "text/plain", "ok\n".to_string())
            } else {
                (
                    "503 Service Unavailable",
                    "text/plain",
                    "starting\n".to_string(),
                )
            }
        }
        ("GET" | "HEAD", _) => ("404 Not Found", "text/plain", "not found\n".to_string()),
        _ => (
            "405 Method Not Allowed",
            "text/plain",
            "method not allowed\n".to_string(),
        ),
    };
    let mut resp = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    if method != "HEAD" {
        resp.push_str(&body);
    }
    stream.write_all(resp.as_bytes()).await?;
    stream.shutdown().await
}
