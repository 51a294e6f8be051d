//! Start-up, serving and shutdown.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use ladle_dataflow::{Dataflow, DataflowConfig};
use ladle_shim::{Frontend, FrontendConfig, Metrics, ReadConsistency, ServerFacts};
use ladle_storage::{Durability, Storage, StorageConfig, WalRecovery};
use parking_lot::RwLock;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::config::{Args, DurabilityArg, ReadConsistencyArg, WalRecoveryArg};
use crate::http::{self, HttpState};
use crate::snapshots::{self, SnapshotMetrics, Snapshots, Trigger};

/// Runs the server until SIGTERM/SIGINT.
pub async fn run(args: Args) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.data_dir)
        .with_context(|| format!("creating data directory {}", args.data_dir.display()))?;
    let data_dir = args
        .data_dir
        .canonicalize()
        .unwrap_or_else(|_| args.data_dir.clone());
    let metrics = Arc::new(Metrics::new());
    register_process_metrics(&metrics.registry)?;
    let (stop_tx, stop_rx) = watch::channel(false);

    // Health and metrics first, so /health answers 503 during recovery.
    let http_state = Arc::new(HttpState {
        metrics: metrics.clone(),
        ready: false.into(),
        dataflow: RwLock::new(None),
        cluster: RwLock::new(None),
        storage: crate::storage_health::StorageHealth::new(&metrics.registry)?,
    });
    let http_listener = TcpListener::bind(args.metrics_listen)
        .await
        .with_context(|| format!("binding metrics address {}", args.metrics_listen))?;
    let metrics_addr = http_listener
        .local_addr()
        .context("the metrics listener's address")?;
    let http_task = tokio::spawn(http::serve(
        http_listener,
        http_state.clone(),
        stop_rx.clone(),
    ));

    let (listener, mut bound) = bind_mysql(&args, metrics_addr).await?;
    let port = bound.mysql.port();

    let durability = match args.durability {
        DurabilityArg::Sync => Durability::Sync,
        DurabilityArg::Async => Durability::Async,
        DurabilityArg::Memory => Durability::Memory,
    };
    let started = Instant::now();
    let _data_dir_lock = lock_data_dir(&data_dir)?;
    if args.etcd.is_some() {
        // A checkpoint of the primary received before this process was
        // restarted (re-bootstrap) replaces the database now.
        let snapshot_dir = data_dir.join(ladle_storage::snapshot::SNAPSHOT_DIR_NAME);
        ladle_cluster::install_pending_bootstrap(&data_dir, &snapshot_dir)
            .context("installing a received bootstrap")?;
    }
    // Warm restart, first half: read and decode the newest snapshot on its
    // own thread while storage opens and views are reinstalled.
    let snapshot_store = snapshots::open_store(&data_dir, durability != Durability::Memory)?;
    let snapshot_metrics = SnapshotMetrics::new(&metrics.registry)?;
    let pending = snapshot_store
        .as_ref()
        .map(|s| (snapshots::begin_recovery(s, &snapshot_metrics), started));
    let storage = open_storage(&args, &data_dir, durability, started).await?;
    http_state.storage.watch(&storage);
    let dataflow = start_dataflow(&args, &storage).await?;
    let snapshots = Arc::new(Snapshots::new(
        snapshot_store,
        snapshot_metrics,
        pending,
        dataflow.clone(),
        storage.clone(),
        args.snapshot_interval,
    ));
    recover(&snapshots, started).await?;
    *http_state.dataflow.write() = Some(dataflow.clone());

    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => {
            let config = ladle_shim::tls::server_config(cert, key).map_err(anyhow::Error::msg)?;
            tracing::info!(cert = %cert.display(), "TLS offered to clients");
            Some(config)
        }
        _ => None,
    };
    let rsa_keys = load_rsa_keys(&data_dir, args.rsa_private_key.clone()).await?;
    let facts = server_facts(&args, port, &data_dir, tls.is_some(), &rsa_keys);
    let admin = Arc::new(crate::cluster::ClusterAdmin {
        snapshots: snapshots.clone(),
        node: std::sync::OnceLock::new(),
    });
    let frontend = Frontend::new(
        storage.clone(),
        dataflow.clone(),
        facts,
        metrics,
        admin.clone(),
        FrontendConfig {
            user: args.user.clone(),
            password: args.password.clone(),
            max_connections: args.max_connections,
            max_allowed_packet: ladle_shim::vars::MAX_ALLOWED_PACKET as usize,
            tls,
            rsa_keys: Some(rsa_keys),
        },
    )
    .context("loading user accounts")?;
    if let Some(config) = args.cluster(port).map_err(anyhow::Error::msg)? {
        let serving = Serving {
            frontend: &frontend,
            storage: &storage,
            snapshots: &snapshots,
        };
        join_cluster(config, &args, serving, &admin, &http_state, &mut bound).await?;
    } else {
        drop_leftover_temporary_tables(&frontend).await?;
    }
    let scheduler = snapshots.start_scheduler()?;
    if snapshots.enabled() {
        tracing::info!(interval = ?args.snapshot_interval, "view snapshots scheduled");
    } else {
        tracing::info!("periodic view snapshots are off (SNAPSHOT VIEWS still takes one)");
    }
    http_state.ready.store(true, Ordering::SeqCst);
    tracing::info!(
        listen = %bound.mysql,
        metrics = %bound.metrics,
        "ready; connect with: mysql -h {} -P {} -u {}{}",
        args.listen.ip(),
        port,
        args.user,
        if args.password.is_empty() { "" } else { " -p" }
    );

    let serve = tokio::spawn(frontend.clone().serve(listener, stop_rx.clone()));
    shutdown_signal().await;
    tracing::info!("shutting down: no new connections; waiting for running statements");
    http_state.ready.store(false, Ordering::SeqCst);
    let _ = stop_tx.send(true);
    let _ = serve.await;
    // Connections are drained: save view state for a warm restart.
    save_for_restart(&snapshots, &storage, scheduler).await;
    let _ = http_task.await;
    *http_state.dataflow.write() = None;
    drop(frontend);
    drop(snapshots);
    drop(dataflow);
    // Storage closes (and flushes) when the last handle drops.
    let remaining = Arc::strong_count(&storage);
    if remaining > 1 {
        tracing::debug!(handles = remaining, "storage still shared at shutdown");
    }
    drop(storage);
    tracing::info!("stopped");
    Ok(())
}

/// Binds the MySQL listener (`--listen`); what is bound so far, with the
/// metrics listener's address, which a single node publishes now (its
/// listeners are all bound; a cluster node does once it has joined).
async fn bind_mysql(
    args: &Args,
    metrics: std::net::SocketAddr,
) -> anyhow::Result<(TcpListener, crate::ports::Bound)> {
    let listener = TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    let bound = crate::ports::Bound {
        mysql: listener
            .local_addr()
            .context("the MySQL listener's address")?,
        metrics,
        replication: None,
    };
    if args.etcd.is_none() {
        bound.publish(args.ports_file.as_deref())?;
    }
    Ok((listener, bound))
}

/// The key pair for `caching_sha2_password` logins over plaintext:
/// `--rsa-private-key`, else the data directory's (generated at first
/// start, off the async workers: 2048-bit generation takes a moment).
async fn load_rsa_keys(
    data_dir: &std::path::Path,
    configured: Option<std::path::PathBuf>,
) -> anyhow::Result<Arc<ladle_shim::rsa_keys::RsaKeyPair>> {
    let dir = data_dir.to_path_buf();
    let keys = tokio::task::spawn_blocking(move || {
        ladle_shim::rsa_keys::RsaKeyPair::load_or_generate(&dir, configured.as_deref())
    })
    .await?
    .map_err(anyhow::Error::msg)?;
    tracing::info!(
        private_key = %keys.private_key_path().display(),
        "RSA key pair for caching_sha2_password over plaintext"
    );
    Ok(Arc::new(keys))
}

/// TEMPORARY tables went with the connections of the last run (a cluster
/// node holds its own: see [`hold_leftover_temporary_tables`]).
async fn drop_leftover_temporary_tables(frontend: &Arc<Frontend>) -> anyhow::Result<()> {
    let engine = frontend.engine().clone();
    let dropped = tokio::task::spawn_blocking(move || engine.drop_leftover_temporary_tables())
        .await?
        .context("dropping TEMPORARY tables of the last run")?;
    if dropped > 0 {
        tracing::info!(dropped, "dropped TEMPORARY tables left by the last run");
    }
    Ok(())
}

/// A cluster node leaves the TEMPORARY tables of the last run hidden
/// until it or another node, elected, drops them through the schema log
/// (see `Engine::temporary_tables_follow_role`).
async fn hold_leftover_temporary_tables(frontend: &Frontend) -> anyhow::Result<()> {
    let engine = frontend.engine().clone();
    let held = tokio::task::spawn_blocking(move || engine.hold_leftover_temporary_tables())
        .await?
        .context("reading the TEMPORARY tables of the last run")?;
    if held > 0 {
        tracing::info!(
            held,
            "TEMPORARY tables of the last run wait for an elected node to drop them"
        );
    }
    Ok(())
}

/// Opens storage in `data_dir` on a blocking thread.
async fn open_storage(
    args: &Args,
    data_dir: &std::path::Path,
    durability: Durability,
    started: Instant,
) -> anyhow::Result<Arc<Storage>> {
    tracing::info!(data_dir = %data_dir.display(), durability = ?args.durability, "opening storage");
    let cfg = StorageConfig {
        data_dir: data_dir.to_path_buf(),
        durability,
        block_cache_bytes: usize::try_from(args.block_cache).unwrap_or(usize::MAX),
        wal_dir: None,
        async_flush_interval: Duration::from_millis(5),
        disk_reserve: args.disk_reserve,
        wal_recovery: match args.wal_recovery {
            WalRecoveryArg::AbsoluteConsistency => WalRecovery::AbsoluteConsistency,
            WalRecoveryArg::PointInTime => WalRecovery::PointInTime,
        },
    };
    let storage = tokio::task::spawn_blocking(move || Storage::open(cfg))
        .await
        .context("storage open task")?
        .context("opening storage")?;
    tracing::info!(
        elapsed_ms = started.elapsed().as_millis() as u64,
        "storage opened"
    );
    Ok(storage)
}

/// Starts the dataflow over `storage` on a blocking thread.
async fn start_dataflow(args: &Args, storage: &Arc<Storage>) -> anyhow::Result<Arc<Dataflow>> {
    let memory_limit = usize::try_from(args.memory_limit).unwrap_or(usize::MAX);
    let domain_threads = args.dataflow_threads;
    let st = storage.clone();
    let dataflow = tokio::task::spawn_blocking(move || {
        Dataflow::new(
            st,
            DataflowConfig {
                memory_limit,
                domain_threads,
                ..Default::default()
            },
        )
    })
    .await
    .context("dataflow start task")?
    .context("starting the dataflow")?;
    dataflow.set_view_idle_timeout(
        (!args.view_idle_timeout.is_zero()).then_some(args.view_idle_timeout),
    );
    Ok(dataflow)
}

/// Warm restart, second half: install the decoded state and replay the
/// change log after it, on a blocking thread while /health says 503.
/// Returns when it is done, or earlier when it says the views can answer
/// (interior state still being installed; writes wait for it).
async fn recover(snapshots: &Arc<Snapshots>, started: Instant) -> anyhow::Result<()> {
    let snaps = snapshots.clone();
    let (servable_tx, servable_rx) = tokio::sync::oneshot::channel::<()>();
    let mut recovery = tokio::task::spawn_blocking(move || {
        let mut servable_tx = Some(servable_tx);
        snaps.recover(&mut || {
            if let Some(tx) = servable_tx.take() {
                let _ = tx.send(());
            }
        })
    });
    tokio::select! {
        done = &mut recovery => {
            done.context("recovery task")??;
            tracing::info!(elapsed_ms = started.elapsed().as_millis() as u64, "recovered");
        }
        Ok(()) = servable_rx => {
            tracing::info!(
                elapsed_ms = started.elapsed().as_millis() as u64,
                "views can answer; interior state is still being restored"
            );
            tokio::spawn(async move {
                match recovery.await {
                    Ok(Ok(_)) => tracing::info!(
                        elapsed_ms = started.elapsed().as_millis() as u64,
                        "recovered"
                    ),
                    // The server is already answering; its views cannot be
                    // trusted after this, so stop (storage is durable).
                    Ok(Err(e)) => {
                        tracing::error!("recovery failed after serving began: {e:#}");
                        std::process::exit(1);
                    }
                    Err(e) => {
                        tracing::error!("recovery task failed after serving began: {e}");
                        std::process::exit(1);
                    }
                }
            });
        }
    }
    Ok(())
}

/// What the server tells clients about itself (system variables).
fn server_facts(
    args: &Args,
    port: u16,
    data_dir: &std::path::Path,
    tls: bool,
    rsa_keys: &ladle_shim::rsa_keys::RsaKeyPair,
) -> ServerFacts {
    ServerFacts {
        max_connections: args.max_connections,
        port,
        datadir: data_dir.display().to_string(),
        tls,
        read_consistency: match args.read_consistency {
            ReadConsistencyArg::Session => ReadConsistency::Session,
            ReadConsistencyArg::Strong => ReadConsistency::Strong,
        },
        timeouts: args.timeouts(),
        security: Arc::new(ladle_shim::vars::SecurityGlobals {
            require_secure_transport: args.require_secure_transport.into(),
            max_connect_errors: args.max_connect_errors.into(),
            ..Default::default()
        }),
        globals: Default::default(),
        rsa_key_paths: (
            rsa_keys.private_key_path().display().to_string(),
            rsa_keys
                .public_key_path()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
        ),
        named_locks: Default::default(),
    }
}

/// The parts of a started server a cluster node is wired to.
struct Serving<'a> {
    frontend: &'a Frontend,
    storage: &'a Arc<Storage>,
    snapshots: &'a Arc<Snapshots>,
}

/// Joins the cluster before serving (writes are refused until this node
/// is elected) and wires the node to the engine: schema changes through
/// its schema log, a replica's writes forwarded, snapshots for bootstrap.
async fn join_cluster(
    config: ladle_cluster::ClusterConfig,
    args: &Args,
    serving: Serving<'_>,
    admin: &crate::cluster::ClusterAdmin,
    http_state: &HttpState,
    bound: &mut crate::ports::Bound,
) -> anyhow::Result<()> {
    let Serving {
        frontend,
        storage,
        snapshots,
    } = serving;
    hold_leftover_temporary_tables(frontend).await?;
    // Connection ids carry the node's id from the first client on.
    frontend
        .engine()
        .set_connection_node(config.node_id)
        .map_err(anyhow::Error::msg)?;
    let applier = Arc::new(crate::cluster::EngineDdlApplier(frontend.engine().clone()));
    let registry = frontend.engine().metrics.registry.clone();
    let node = ladle_cluster::Node::start(config, storage.clone(), applier, &registry)
        .await
        .context("joining the cluster")?;
    bound.replication = Some(node.replication_listen());
    bound.publish(args.ports_file.as_deref())?;
    let hook = Arc::new(crate::cluster::NodeSchemaLog(node.clone()));
    if frontend.engine().schema_log.set(hook).is_err() {
        anyhow::bail!("the schema-change hook was already set");
    }
    let target = Arc::new(crate::cluster::EngineForwardTarget(
        frontend.engine().clone(),
    ));
    node.set_forward_target(target);
    if snapshots.durable() {
        node.set_view_snapshots(Arc::new(crate::cluster::SnapshotSource(snapshots.clone())));
    }
    let forwarder = Arc::new(crate::cluster::NodeForwarder {
        node: node.clone(),
        ryw_timeout: std::time::Duration::from_millis(args.ryw_timeout_ms),
    });
    frontend.engine().set_forwarder(forwarder);
    let _ = admin.node.set(node.clone());
    *http_state.cluster.write() = Some(node);
    Ok(())
}

/// At shutdown, once connections are drained: stops the snapshot
/// scheduler, takes a final snapshot of view state and flushes table data,
/// so that the next start is warm and quick.
async fn save_for_restart(
    snapshots: &Arc<Snapshots>,
    storage: &Arc<Storage>,
    scheduler: snapshots::Scheduler,
) {
    let snaps = snapshots.clone();
    let storage_for_flush = storage.clone();
    let final_snapshot = tokio::task::spawn_blocking(move || {
        scheduler.stop();
        if snaps.enabled() {
            tracing::info!("taking a final snapshot");
            // A failure is logged inside; the previous snapshot stays usable.
            let _ = snaps.take(Trigger::Shutdown);
        }
        // Without this the next start replays the whole write-ahead log
        // (seconds after a bulk load) before it can serve.
        let flushed = Instant::now();
        match storage_for_flush.flush() {
            Ok(()) => tracing::info!(
                elapsed_ms = flushed.elapsed().as_millis() as u64,
                "table data flushed"
            ),
            Err(e) => tracing::warn!("flushing table data at shutdown failed: {e}"),
        }
    });
    let _ = final_snapshot.await;
}

/// Registers the standard `process_*` metrics (`process_cpu_seconds_total`,
/// `process_resident_memory_bytes`, open fds, ...), read from /proc at each
/// scrape: benchmarks divide the CPU seconds by pages served.
fn register_process_metrics(registry: &prometheus::Registry) -> anyhow::Result<()> {
    let collector = prometheus::process_collector::ProcessCollector::for_self();
    registry
        .register(Box::new(collector))
        .context("registering process metrics")
}

/// Holds `<data-dir>/ladle.lock` for the life of the process: one server
/// per data directory. RocksDB locks its files too, but only once storage
/// is open, and recovery opens (and cleans) the snapshot directory before.
fn lock_data_dir(dir: &std::path::Path) -> anyhow::Result<std::fs::File> {
    let path = dir.join("ladle.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => anyhow::bail!(
            "another ladle process is using the data directory {}",
            dir.display()
        ),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("locking {}", path.display()))
        }
    }
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
