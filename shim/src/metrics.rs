//! Prometheus metrics for the front end, plus view gauges read from
//! `Dataflow::view_stats` at scrape time.

use std::time::Instant;

use ladle_dataflow::Dataflow;
use prometheus::core::Collector;
use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};

pub struct Metrics {
    pub registry: Registry,
    pub queries: IntCounterVec,
    pub query_seconds: HistogramVec,
    pub errors: IntCounterVec,
    /// Connections holding a place under `max_connections`: clients,
    /// and on a cluster's primary the sessions replicas forward to
    /// (`Threads_connected`).
    pub connections: IntGauge,
    /// The most `connections` ever open at once (`Max_used_connections`).
    pub connections_max_used: IntGauge,
    /// Connection attempts, successful or not (`Connections`).
    pub connections_total: IntCounter,
    pub connections_refused: IntCounter,
    /// Attempts that failed before the connection was established (a
    /// wrong password, an unknown database, a malformed handshake, a
    /// client gone or too slow, 1040; `Aborted_connects`).
    pub connections_aborted: IntCounter,
    /// Successful logins by how the password was proven (see
    /// [`LOGIN_METHODS`]).
    pub logins: IntCounterVec,
    pub commit_seconds: Histogram,
    pub read_seconds: Histogram,
    view_memory: IntGaugeVec,
    view_rows: IntGaugeVec,
    view_hits: IntGaugeVec,
    view_misses: IntGaugeVec,
    view_upqueries: IntGaugeVec,
    view_evictions: IntGaugeVec,
    view_fills: IntGaugeVec,
    interior_evictions: IntGauge,
    variant_evictions: IntGauge,
    memory_limit: IntGauge,
    propagation_backlog: IntGauge,
    propagation_lag: IntGauge,
    views: IntGauge,
    statement_threads: IntGauge,
    started: Instant,
}

/// The `method` label of `ladle_logins_total`: a `mysql_native_password`
/// scramble, `caching_sha2_password`'s fast authentication, or its full
/// authentication with the password over TLS or RSA-encrypted.
pub const LOGIN_METHODS: [&str; 4] = ["native", "sha2_fast", "sha2_full_tls", "sha2_full_rsa"];

/// The connection metrics (see [`Metrics`]' fields of the same names).
struct ConnectionMetrics {
    open: IntGauge,
    max_used: IntGauge,
    total: IntCounter,
    refused: IntCounter,
    aborted: IntCounter,
}

/// The connection metrics, registered: `ladle_connections` (open now),
/// `_max_used` (the most at once), `_total` (attempts), `_refused_total`
/// (1040) and `_aborted_total` (failed before they were established).
fn connection_metrics(registry: &Registry) -> ConnectionMetrics {
    let gauge = |name: &str, help: &str| IntGauge::new(name, help).expect("static metric");
    let counter = |name: &str, help: &str| IntCounter::new(name, help).expect("static metric");
    let m = ConnectionMetrics {
        open: gauge(
            "ladle_connections",
            "Open connections: clients, and sessions replicas forward to this primary",
        ),
        max_used: gauge(
            "ladle_connections_max_used",
            "The most connections open at once since start (Max_used_connections)",
        ),
        total: counter(
            "ladle_connections_total",
            "Connection attempts, successful or not (Connections)",
        ),
        refused: counter(
            "ladle_connections_refused_total",
            "Connections refused (1040)",
        ),
        aborted: counter(
            "ladle_connections_aborted_total",
            "Connection attempts that failed before the connection was established \
             (Aborted_connects)",
        ),
    };
    for c in [
        Box::new(m.open.clone()) as Box<dyn Collector>,
        Box::new(m.max_used.clone()),
        Box::new(m.total.clone()),
        Box::new(m.refused.clone()),
        Box::new(m.aborted.clone()),
    ] {
        registry.register(c).expect("metric names are unique");
    }
    m
}

/// `ladle_logins_total`, every method listed from the start (at 0).
fn login_counter() -> IntCounterVec {
    let logins = IntCounterVec::new(
        Opts::new(
            "ladle_logins_total",
            "Successful logins, by how the password was proven",
        ),
        &["method"],
    )
    .expect("static metric definition");
    for method in LOGIN_METHODS {
        logins.with_label_values(&[method]);
    }
    logins
}

fn buckets() -> Vec<f64> {
    vec![
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
        5.0, 10.0,
    ]
}

impl Metrics {
    pub fn new() -> Metrics {
        let registry = Registry::new();
        let queries = IntCounterVec::new(
            Opts::new("ladle_queries_total", "Statements executed"),
            &["kind", "outcome"],
        )
        .expect("static metric definition");
        let query_seconds = HistogramVec::new(
            HistogramOpts::new("ladle_query_duration_seconds", "Statement latency")
                .buckets(buckets()),
            &["kind"],
        )
        .expect("static metric definition");
        let errors = IntCounterVec::new(
            Opts::new(
                "ladle_errors_total",
                "Errors sent to clients, by MySQL code",
            ),
            &["code"],
        )
        .expect("static metric definition");
        let connection = connection_metrics(&registry);
        let logins = login_counter();
        let commit_seconds = Histogram::with_opts(
            HistogramOpts::new(
                "ladle_commit_duration_seconds",
                "Latency of Storage::write (durable commit)",
            )
            .buckets(buckets()),
        )
        .expect("static metric definition");
        let read_seconds = Histogram::with_opts(
            HistogramOpts::new("ladle_read_duration_seconds", "Latency of dataflow reads")
                .buckets(buckets()),
        )
        .expect("static metric definition");
        let gv = |name: &str, help: &str| {
            IntGaugeVec::new(Opts::new(name, help), &["view"]).expect("static metric definition")
        };
        let view_memory = gv(
            "ladle_view_memory_bytes",
            "Bytes of state held by each view",
        );
        let view_rows = gv("ladle_view_cached_rows", "Rows cached by each view");
        let view_hits = gv("ladle_view_hits", "Reader hits per view");
        let view_misses = gv("ladle_view_misses", "Reader misses per view");
        let view_upqueries = gv("ladle_view_upqueries", "Upqueries issued per view");
        let view_evictions = gv(
            "ladle_view_evicted_keys",
            "Keys evicted from each view to stay under --memory-limit",
        );
        // The plain gauges, registered as they are made.
        let gauge = |name: &str, help: &str| {
            let g = IntGauge::new(name, help).expect("static metric definition");
            registry
                .register(Box::new(g.clone()))
                .expect("metric names are unique");
            g
        };
        let interior_evictions = gauge(
            "ladle_interior_evictions",
            "Times --memory-limit cleared an interior node's state (and its dependents)",
        );
        let variant_evictions = gauge(
            "ladle_view_variant_evictions",
            "Views dropped because their query shape had too many others installed for other literal values",
        );
        let memory_limit = gauge(
            "ladle_memory_limit_bytes",
            "--memory-limit: view state is evicted past it, and one statement may hold half of it",
        );
        let view_fills = IntGaugeVec::new(
            Opts::new(
                "ladle_view_fills",
                "Reader misses filled since start, by path: unlocked, conflict (discarded: a write \
                 raced it), locked, held (of unlocked: a retry that held the view's writers), \
                 stopped (of conflict: stopped when the write came, not at the install)",
            ),
            &["path"],
        )
        .expect("static metric definition");
        let views = gauge("ladle_views", "Installed views");
        let statement_threads = gauge(
            "ladle_statement_threads",
            "Threads statements run on, busy or idle (as many as statements ran at once lately)",
        );
        let propagation_backlog = gauge(
            "ladle_propagation_backlog_batches",
            "Committed write batches not yet propagated into the views",
        );
        let propagation_lag = gauge(
            "ladle_propagation_lag_lsn",
            "LSNs between the newest commit and what every view reflects",
        );
        for c in [
            Box::new(queries.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(query_seconds.clone()),
            Box::new(errors.clone()),
            Box::new(logins.clone()),
            Box::new(commit_seconds.clone()),
            Box::new(read_seconds.clone()),
            Box::new(view_memory.clone()),
            Box::new(view_rows.clone()),
            Box::new(view_hits.clone()),
            Box::new(view_misses.clone()),
            Box::new(view_upqueries.clone()),
            Box::new(view_evictions.clone()),
            Box::new(view_fills.clone()),
        ] {
            registry.register(c).expect("metric names are unique");
        }
        Metrics {
            registry,
            queries,
            query_seconds,
            errors,
            connections: connection.open,
            connections_max_used: connection.max_used,
            connections_total: connection.total,
            connections_refused: connection.refused,
            connections_aborted: connection.aborted,
            logins,
            commit_seconds,
            read_seconds,
            view_memory,
            view_rows,
            view_hits,
            view_misses,
            view_upqueries,
            view_evictions,
            view_fills,
            interior_evictions,
            variant_evictions,
            memory_limit,
            propagation_backlog,
            propagation_lag,
            views,
            statement_threads,
            started: Instant::now(),
        }
    }

    /// Total statements executed (SHOW STATUS `Queries`).
    pub fn queries_count(&self) -> u64 {
        let mut n = 0;
        for mf in self.queries.collect() {
            for m in mf.get_metric() {
                n += m.get_counter().get_value() as u64;
            }
        }
        n
    }

    pub fn uptime_seconds(&self) -> u64 {
        self.started.elapsed().as_secs()
    }

    /// The Prometheus text exposition, with view gauges refreshed.
    pub fn render(&self, dataflow: Option<&Dataflow>) -> String {
        self.statement_threads
            .set(i64::try_from(crate::statement_threads::global().threads()).unwrap_or(i64::MAX));
        if let Some(df) = dataflow {
            let stats = df.view_stats();
            self.view_memory.reset();
            self.view_rows.reset();
            self.view_hits.reset();
            self.view_misses.reset();
            self.view_upqueries.reset();
            self.view_evictions.reset();
            self.views.set(stats.len() as i64);
            self.interior_evictions
                .set(i64::try_from(df.interior_evictions()).unwrap_or(i64::MAX));
            self.variant_evictions
                .set(i64::try_from(df.variant_evictions()).unwrap_or(i64::MAX));
            self.memory_limit
                .set(i64::try_from(df.memory_limit()).unwrap_or(i64::MAX));
            let fills = df.fill_stats();
            for (path, n) in [
                ("unlocked", fills.unlocked),
                ("conflict", fills.conflicts),
                ("locked", fills.locked),
                ("held", fills.held),
                ("stopped", fills.stopped),
            ] {
                self.view_fills.with_label_values(&[path]).set(n as i64);
            }
            let (backlog, lag) = df.propagation_lag();
            self.propagation_backlog.set(backlog as i64);
            self.propagation_lag.set(lag as i64);
            for v in stats {
                let l = [v.name.as_str()];
                self.view_memory
                    .with_label_values(&l)
                    .set(v.memory_bytes as i64);
                self.view_rows
                    .with_label_values(&l)
                    .set(v.cached_rows as i64);
                self.view_hits.with_label_values(&l).set(v.hits as i64);
                self.view_misses.with_label_values(&l).set(v.misses as i64);
                self.view_upqueries
                    .with_label_values(&l)
                    .set(v.upqueries as i64);
                self.view_evictions
                    .with_label_values(&l)
                    .set(v.evicted_keys as i64);
            }
        }
        let mut buf = Vec::new();
        let enc = TextEncoder::new();
        if enc.encode(&self.registry.gather(), &mut buf).is_err() {
            return String::new();
        }
        String::from_utf8(buf).unwrap_or_default()
    }
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}
