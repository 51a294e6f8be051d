//! Connection set-up and typed access to result values.

use anyhow::{anyhow, bail, Context, Result};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder, Row, Value};

/// Statement cache per connection: the Lobsters pages use a few dozen
/// distinct statements plus IN lists of varying length.
const STMT_CACHE: usize = 1024;

/// Parses a `mysql://` URL and returns its options (with a large prepared
/// statement cache) and the database it names.
pub fn parse_url(url: &str) -> Result<(Opts, String)> {
    let opts = Opts::from_url(url).with_context(|| format!("bad MySQL URL {url:?}"))?;
    let db = opts.db_name().map(str::to_owned).ok_or_else(|| {
        anyhow!("the URL must name a database, e.g. mysql://root@127.0.0.1:3307/lobsters")
    })?;
    if !db.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        bail!("database name {db:?} must be letters, digits and underscores");
    }
    let opts: Opts = OptsBuilder::from_opts(opts)
        .stmt_cache_size(STMT_CACHE)
        .into();
    Ok((opts, db))
}

/// Options for the same server with another database selected (or none).
pub fn with_db(opts: &Opts, db: Option<&str>) -> Opts {
    OptsBuilder::from_opts(opts.clone())
        .db_name(db.map(str::to_owned))
        .into()
}

/// Connects without selecting a database and creates `db` if missing;
/// with `fresh`, drops it first.
pub async fn ensure_database(opts: &Opts, db: &str, fresh: bool) -> Result<()> {
    let mut conn = Conn::new(with_db(opts, None))
        .await
        .context("connecting to create the database")?;
    if fresh {
        conn.query_drop(format!("DROP DATABASE IF EXISTS {db}"))
            .await?;
    }
    conn.query_drop(format!("CREATE DATABASE IF NOT EXISTS {db}"))
        .await?;
    conn.disconnect().await?;
    Ok(())
}

/// Opens a connection to the database named in `opts`.
pub async fn connect(opts: &Opts) -> Result<Conn> {
    Conn::new(opts.clone()).await.with_context(|| {
        format!(
            "connecting to {}:{}",
            opts.ip_or_hostname(),
            opts.tcp_port()
        )
    })
}

/// Column `i` of `row` as an integer; NULL is `None`. Accepts integers,
/// decimals and numeric strings (SUM() returns DECIMAL), and whole floats.
pub fn opt_i64(row: &Row, i: usize) -> Result<Option<i64>> {
    match row.as_ref(i) {
        None => bail!("result has no column {i}"),
        Some(Value::NULL) => Ok(None),
        Some(Value::Int(v)) => Ok(Some(*v)),
        Some(Value::UInt(v)) => Ok(Some(i64::try_from(*v)?)),
        Some(Value::Float(v)) => Ok(Some(*v as i64)),
        Some(Value::Double(v)) => Ok(Some(*v as i64)),
        Some(Value::Bytes(b)) => {
            let s = std::str::from_utf8(b)?;
            let s = s.strip_suffix(".0000").unwrap_or(s);
            match s.parse::<i64>() {
                Ok(v) => Ok(Some(v)),
                Err(_) => Ok(Some(
                    s.parse::<f64>()
                        .with_context(|| format!("not a number: {s:?}"))?
                        as i64,
                )),
            }
        }
        Some(other) => bail!("column {i}: expected a number, got {other:?}"),
    }
}

/// Column `i` as an integer, NULL read as 0.
pub fn i64_or0(row: &Row, i: usize) -> Result<i64> {
    Ok(opt_i64(row, i)?.unwrap_or(0))
}

/// Column `i` as a non-NULL integer.
pub fn get_i64(row: &Row, i: usize) -> Result<i64> {
    opt_i64(row, i)?.ok_or_else(|| anyhow!("column {i} is NULL"))
}

/// Column `i` rendered as text (NULL as `NULL`).
pub fn text(row: &Row, i: usize) -> Result<String> {
    match row.as_ref(i) {
        None => bail!("result has no column {i}"),
        Some(Value::NULL) => Ok("NULL".into()),
        Some(Value::Bytes(b)) => Ok(String::from_utf8_lossy(b).into_owned()),
        Some(Value::Int(v)) => Ok(v.to_string()),
        Some(Value::UInt(v)) => Ok(v.to_string()),
        Some(Value::Float(v)) => Ok(v.to_string()),
        Some(Value::Double(v)) => Ok(v.to_string()),
        Some(v @ (Value::Date(..) | Value::Time(..))) => {
            Ok(v.as_sql(true).trim_matches('\'').to_owned())
        }
    }
}

/// `?, ?, ?` with `n` placeholders (at least one, so an empty list still
/// parses; callers skip the query when they have no keys).
pub fn placeholders(n: usize) -> String {
    vec!["?"; n.max(1)].join(", ")
}

/// Quotes a string as an SQL literal.
pub fn sql_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        match c {
            '\'' => out.push_str("''"),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_parsing_and_literals() {
        let (opts, db) = parse_url("mysql://root@127.0.0.1:3307/lobsters").unwrap();
        assert_eq!(db, "lobsters");
        assert_eq!(opts.tcp_port(), 3307);
        assert_eq!(opts.stmt_cache_size(), STMT_CACHE);
        assert!(parse_url("mysql://root@127.0.0.1:3307").is_err());
        assert_eq!(sql_str("it's \\"), "'it''s \\\\'");
        assert_eq!(placeholders(3), "?, ?, ?");
    }
}
