//! Ladle's incremental view engine.
//!
//! Entry point: [`Dataflow`]. Every SELECT becomes a view: the planner turns
//! the SQL AST into a logical query graph, which is lowered into shared
//! dataflow nodes ending in a reader keyed by the query's parameters.
//!
//! ```text
//!  SQL AST --planner--> query graph (plan::LNode) --install--> dataflow nodes --> readers
//!                                                   (nodes shared by signature)
//!  write: Storage::write -> on_commit: queue (lsn, deltas) -> ack
//!         worker: snapshot at X -> merged batches <= X -> Base -> Filter/Project/Join/Aggregate/Window -> Reader
//!                                                        (deltas for holes are dropped)
//!  read:  PreparedQuery::execute -> reader hit -> rows (read_after: the reader's own rows, shared)
//!                                -> miss -> upquery: pull(key) through the ancestors,
//!                                   down to storage lookups; fills the holes on the path
//!  evict: least recently used reader keys; then aggregate or window state, clearing its descendants
//!  snapshot: under the commit lock, Arc references to the partitions changed since the
//!            last epoch -> serialized into `SnapshotStore` files after the lock is released
//!  recover:  newest verified epoch -> restore nodes by stable id -> replay the change log
//! ```
//!
//! Snapshots and warm restarts: [`Dataflow::snapshot`], [`Dataflow::recover`]
//! and [`Dataflow::compact_snapshots`] (design in `snapshot.rs`). Every
//! installed view is recorded in the catalog and reinstalled by
//! [`Dataflow::new`], so a restart rebuilds the same graph.
//! Views no query read for about [`DEFAULT_VIEW_IDLE_TIMEOUT`] are dropped
//! with their catalog records (sweeps run by the reads;
//! [`Dataflow::set_view_idle_timeout`], [`Dataflow::drop_unused_views`]); a
//! later read or prepare reinstalls them. EXPLAIN GRAPH
//! ([`Dataflow::explain_graph`]) describes a view without installing it.
//!
//! Consistency: storage calls [`ladle_storage::CommitObserver::on_commit`]
//! inside its commit lock; the batch is queued and the writers are
//! acknowledged. A propagation worker applies the queued batches in LSN
//! order, merged, against a storage snapshot taken right after them
//! (`propagation.rs`). Reads wait, bounded, for the writes they must see:
//! [`PreparedQuery::execute`] every write acknowledged before it,
//! [`PreparedQuery::execute_after`] a connection's own writes
//! (read-your-writes; other connections' writes appear eventually).
//! `Storage::exclusive` and DDL settle the backlog first (commit lock,
//! then the graph lock), so inside them storage and the graph agree.
//! A reader miss runs its upquery outside the locks on a stateless copy of
//! the view's ancestors once the graph has applied every batch of the
//! view's tables, then installs the result inside `Storage::exclusive`
//! only if no batch touching those tables committed meanwhile (per-table
//! counters); after repeated conflicts, and for views over an aggregate
//! partitioned by nothing, the upquery runs inside the locks. Either way a
//! replay never races a delta. Reader hits take no lock: readers publish
//! each batch as a new version of a persistent map (`ops/reader/`).
//!
//! Partial state: readers, aggregates and windows (rows kept in order per
//! partition: window functions, top-k) hold some keys (complete results)
//! and holes. Deltas for holes are dropped; a fill computes the key from the
//! nearest ancestor that holds it (ultimately storage index lookups/scans),
//! filling state on the way, so a filled key's dependencies are filled too.
//! Evicting an aggregate's (or a window's) state clears every node
//! downstream of it.
//!
//! Joins are maintained per join key: for each key a batch touches, both
//! inputs are looked up as they are after the batch, the rows before it are
//! those minus the batch's deltas, and the output is the difference. Storage
//! reads during propagation subtract the deltas of tables not yet
//! propagated, so self-joins and multi-table batches are exact.
//!
//! SQL: selection, projection, MySQL expressions; inner/LEFT/comma joins
//! (equi-joins by key; non-equi and cross joins with key [] and a filter;
//! LEFT JOIN ON conditions over both sides as a filtered inner join plus the
//! unmatched left rows); GROUP BY with COUNT/SUM/AVG/MIN/MAX/GROUP_CONCAT
//! (and DISTINCT forms; VAR_POP/VAR_SAMP/STDDEV_* as COUNT/SUM arithmetic,
//! `planner::stats`), HAVING; DISTINCT; ORDER BY/LIMIT/OFFSET (limit
//! applied at read over the full per-key result; LIMIT/OFFSET literals are
//! parameters, so every page reads one view); UNION [ALL], INTERSECT and
//! EXCEPT (both sides tagged, grouped by all columns); derived tables,
//! non-recursive WITH (inlined as derived tables; a top-level WITH
//! RECURSIVE is the shim's, computed per execution over hidden tables
//! whose rows a read takes as an overlay) and named views; IN/EXISTS subqueries as semi/anti-joins (`NOT IN` with
//! MySQL's NULL rules; `col = ?` inside keys the view through a DISTINCT
//! inner join; a correlated `x IN` as EXISTS); scalar subqueries as LEFT
//! joins with aggregates grouped by the correlation columns (without an
//! aggregate: MAX plus a row count checked at read time; `ORDER BY z LIMIT
//! 1`: the rows with each key's MIN/MAX z joined back). Correlations other
//! than `inner = outer` join the DISTINCT outer values they read to the
//! inner rows and filter (only NULL-rejecting conditions). Subqueries as
//! values (EXISTS, IN, scalar; in the select list, WHERE under OR, HAVING,
//! ORDER BY, or without FROM over one constant row) become such joined
//! columns: EXISTS is COUNT(*) > 0, IN is 1/0/NULL from the distinct
//! values and the row and non-NULL counts. Equality parameters (also in an inner join's ON) are reader
//! keys; other parameters and NOW()/RAND() in WHERE are read-time filters,
//! and under GROUP BY (or with `IN (?, ?)`) the view keeps the
//! pre-aggregation rows and aggregates at read time (`plan::ReadAgg`).
//! Keys compare as MySQL does: a string looked up in a number column is
//! read as a number (`'01'` finds 1); a number against a text column stays
//! a filter (no lookup by the string finds `'1abc' = 1`), also when bound
//! to a `?` at execute time; a text column never hash-joins a binary one
//! (bytewise comparison, through the filter). Binary strings (`X'..'`,
//! `_binary`, CAST/CONVERT to binary, BLOB columns) are `Value::Bytes`,
//! compared, ordered and matched by LIKE byte for byte.
//! Anything else (LIMIT other than 1 in a subquery, parameters in LEFT JOIN
//! ON, ranges inside subqueries, a subquery reading a query two levels out,
//! ...) is [`DataflowError::Unsupported`], never a wrong answer.
//!
//! Only the `planner` module reads the SQL AST; operators see Ladle's own
//! expression (`expr`) and plan types. This crate must not depend on the
//! shim or on RocksDB.

pub mod clock;
mod config;
mod engine;
mod error;
mod expr;
mod graph;
mod hash;
pub mod interrupt;
mod meta;
mod ops;
mod plan;
mod planner;
mod prepared;
mod propagation;
mod read;
mod rows;
mod scalar;
mod snapshot;
mod sql_ast;
mod variants;

pub use config::DataflowConfig;
pub use engine::{Dataflow, FillCounts, DEFAULT_VIEW_IDLE_TIMEOUT};
pub use error::{DataflowError, FunctionName, Gap, Result, WindowError};
pub use expr::constants_warn_once;
pub use expr::take_warnings as take_eval_warnings;
pub use expr::{raised_by as eval_warnings_raised_by, EvalWarning, WARN_DIVISION_BY_ZERO};
pub use meta::{BaseColumn, OutputColumn, ViewStats};
pub use planner::depth::{
    bound_depth, parse_sql, TooDeep, MAX_EXPR_DEPTH, MAX_PARSE_DEPTH, MAX_SET_DEPTH,
    THREAD_STACK_BYTES,
};
pub use prepared::PreparedQuery;
pub use rows::{ResultRows, RowRef};
pub use scalar::{
    compare_values, compile_row_expr, like_text, mark_where_is_null, value_truth, RowExpr,
};
pub use snapshot::{
    CompactionStats, DecodedSnapshot, RecoveryProgress, RecoveryStats, SnapshotConfig,
    SnapshotStats, SnapshotStore,
};
pub use sql_ast::{expr_column_name, value_expr};
pub use variants::MAX_LITERAL_VARIANTS;
