//! Seeded random workloads for the differential transaction test
//! (`tests/random_transactions.rs`): a random schema of two tables with
//! every column type family, and a stream of statements over it on several
//! connections — writes inside random transactions, savepoints, connection
//! resets and random query shapes — each marked text or prepared.
//!
//! Nothing here knows an answer: the statements run on MariaDB and Ladle
//! and their [`Outcome`](crate::exact::Outcome)s are compared. So every
//! query is written to have one right answer: ordered comparisons only
//! where ORDER BY fully determines the order, and values a server may pick
//! among equals (a GROUP BY key or MIN of a case-insensitive, PAD SPACE
//! string) projected through a canonical form ([`Column::canonical`]).
//!
//! Writes never wait on a lock: a connection writes only while no other
//! connection's transaction has written (the workload is one thread).

use mysql::Value;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use crate::exact::{Literal, Statement};

/// A column type family with its parameters.
#[derive(Clone, Debug)]
pub enum Ty {
    Int {
        bytes: u8,
        unsigned: bool,
    },
    /// TINYINT(1)
    Bool,
    Decimal {
        precision: u8,
        scale: u8,
    },
    Double,
    /// VARCHAR(n) or CHAR(n) in utf8mb4_general_ci (`ci`) or utf8mb4_bin.
    Str {
        len: u32,
        ci: bool,
        fixed: bool,
    },
    VarBinary(u32),
    Binary(u32),
    Blob,
    DateTime(u8),
    Timestamp(u8),
    Time(u8),
    Date,
    /// ENUM('a', 'b', 'C')
    Enum,
}

impl Ty {
    fn random(rng: &mut StdRng) -> Ty {
        match rng.gen_range(0..15) {
            0 | 1 => Ty::Int {
                bytes: [1, 2, 4, 8][rng.gen_range(0..4)],
                unsigned: rng.gen_bool(0.4),
            },
            2 => Ty::Bool,
            3 => {
                let precision = rng.gen_range(3..=12);
                Ty::Decimal {
                    precision,
                    scale: rng.gen_range(0..=precision.min(4)),
                }
            }
            4 => Ty::Double,
            5 | 6 => Ty::Str {
                len: rng.gen_range(3..=6),
                ci: rng.gen_bool(0.6),
                fixed: rng.gen_bool(0.25),
            },
            7 => Ty::VarBinary(rng.gen_range(3..=6)),
            8 => Ty::Binary(rng.gen_range(2..=4)),
            9 => Ty::Blob,
            10 => Ty::DateTime(rng.gen_range(0..=6)),
            11 => Ty::Timestamp(rng.gen_range(0..=6)),
            12 => Ty::Time(rng.gen_range(0..=6)),
            13 => Ty::Date,
            _ => Ty::Enum,
        }
    }

    /// The type as written in CREATE TABLE.
    pub fn sql(&self) -> String {
        match *self {
            Ty::Int { bytes, unsigned } => format!(
                "{}{}",
                match bytes {
                    1 => "TINYINT",
                    2 => "SMALLINT",
                    4 => "INT",
                    _ => "BIGINT",
                },
                if unsigned { " UNSIGNED" } else { "" }
            ),
            Ty::Bool => "TINYINT(1)".into(),
            Ty::Decimal { precision, scale } => format!("DECIMAL({precision},{scale})"),
            Ty::Double => "DOUBLE".into(),
            Ty::Str { len, ci, fixed } => format!(
                "{}({len}) CHARACTER SET utf8mb4 COLLATE {}",
                if fixed { "CHAR" } else { "VARCHAR" },
                if ci {
                    "utf8mb4_general_ci"
                } else {
                    "utf8mb4_bin"
                }
            ),
            Ty::VarBinary(n) => format!("VARBINARY({n})"),
            Ty::Binary(n) => format!("BINARY({n})"),
            Ty::Blob => "BLOB".into(),
            Ty::DateTime(fsp) => format!("DATETIME({fsp})"),
            Ty::Timestamp(fsp) => format!("TIMESTAMP({fsp})"),
            Ty::Time(fsp) => format!("TIME({fsp})"),
            Ty::Date => "DATE".into(),
            Ty::Enum => "ENUM('b','a','C')".into(),
        }
    }

    /// SUM and AVG mean something (and are exact: doubles are dyadic).
    fn numeric(&self) -> bool {
        matches!(
            self,
            Ty::Int { .. } | Ty::Bool | Ty::Decimal { .. } | Ty::Double
        )
    }

    fn is_text(&self) -> bool {
        matches!(self, Ty::Str { .. } | Ty::Enum)
    }

    fn is_bytes(&self) -> bool {
        matches!(self, Ty::VarBinary(_) | Ty::Binary(_) | Ty::Blob)
    }

    /// Its zero value is a zero date ('0000-00-00 ...'), which Ladle cannot
    /// hold: what IGNORE stores for an invalid or missing value.
    fn zero_is_a_date(&self) -> bool {
        matches!(self, Ty::Date | Ty::DateTime(_) | Ty::Timestamp(_))
    }

    /// What INSERT IGNORE may store for a bad value of this type is a zero
    /// date (see `LADLE_TXGEN_ZERO_DATES`).
    fn ignore_needs_zero(&self) -> bool {
        self.zero_is_a_date()
    }

    /// Whether the column takes `lit` as a valid date (always, for types
    /// whose [`Ty::zero_is_a_date`] is false): a real date, and for a
    /// TIMESTAMP within its range.
    fn holds(&self, lit: &Literal) -> bool {
        if !self.zero_is_a_date() {
            return true;
        }
        let text = lit.sql.trim_matches('\'');
        if parse_temporal(text).is_none() {
            return false;
        }
        match self {
            // Fixed-width text compares as time; no zero month or day.
            Ty::Timestamp(_) => {
                ("1970-01-01 00:00:01"..="2038-01-19 03:14:07.999999").contains(&text)
                    && !text[..10].contains("-00")
            }
            _ => true,
        }
    }

    /// Usable in a UNIQUE key without a prefix length.
    fn keyable(&self) -> bool {
        !matches!(self, Ty::Blob)
    }

    /// A literal of this type. `write` allows values the column refuses or
    /// changes (out of range, too long, invalid dates, extra fraction
    /// digits): errors in strict mode, warnings under IGNORE.
    pub fn literal(&self, rng: &mut StdRng, write: bool) -> Literal {
        let edge = write && rng.gen_ratio(1, 25);
        match *self {
            Ty::Int { bytes, unsigned } => {
                let bits = u32::from(bytes) * 8;
                if edge {
                    let (min, max): (i128, i128) = if unsigned {
                        (0, (1i128 << bits) - 1)
                    } else {
                        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
                    };
                    let v = [min, max, min - 1, max + 1][rng.gen_range(0..4)];
                    int_literal(rng, v)
                } else {
                    let v = if unsigned {
                        rng.gen_range(0..=6)
                    } else {
                        rng.gen_range(-3..=6)
                    };
                    int_literal(rng, v)
                }
            }
            Ty::Bool => match rng.gen_range(0..6) {
                0 => keyword("TRUE", Value::Int(1)),
                1 => keyword("FALSE", Value::Int(0)),
                2 if write => {
                    let v = [2, -1, 127][rng.gen_range(0..3)];
                    int_literal(rng, v)
                }
                _ => {
                    let v = rng.gen_range(0..=1);
                    int_literal(rng, v)
                }
            },
            Ty::Decimal { precision, scale } => {
                let int_digits = u32::from(precision - scale);
                let mut text = if edge {
                    // One digit too many: out of range.
                    format!("1{}", "0".repeat(int_digits as usize))
                } else {
                    let ints = ["0", "1", "2", "12", "99", "-1", "-12"];
                    let i = ints[rng.gen_range(0..ints.len())];
                    if i.trim_start_matches('-').len() as u32 > int_digits {
                        "0".to_string()
                    } else {
                        i.to_string()
                    }
                };
                let digits = if write && rng.gen_ratio(1, 8) {
                    // Extra fraction digits: rounded, with a note.
                    usize::from(scale) + 1
                } else {
                    rng.gen_range(0..=usize::from(scale))
                };
                if digits > 0 {
                    text.push('.');
                    for _ in 0..digits {
                        text.push(['0', '5', '9', '1'][rng.gen_range(0..4)]);
                    }
                }
                numeric_text(rng, text)
            }
            Ty::Double => {
                let (text, v) = [
                    ("0", 0.0),
                    ("0.5", 0.5),
                    ("-1.25", -1.25),
                    ("3", 3.0),
                    ("1e15", 1e15),
                    ("0.125", 0.125),
                    ("2.5", 2.5),
                    ("-0.0", -0.0),
                ][rng.gen_range(0..8)];
                Literal {
                    sql: text.to_string(),
                    param: if rng.gen_bool(0.7) {
                        Value::Double(v)
                    } else {
                        Value::Bytes(text.as_bytes().to_vec())
                    },
                }
            }
            Ty::Str { len, .. } => {
                const WORDS: [&str; 15] = [
                    "a", "A", "a ", "b", "B", "ab", "aB", "Ab ", "ü", "Ü", "日本", "", " ", "it's",
                    "b\\",
                ];
                let word = if edge {
                    // Longer than any column: 1406, or truncated under IGNORE.
                    if rng.gen_bool(0.5) {
                        "abcdefgh"
                    } else {
                        "ab      "
                    }
                } else {
                    WORDS[rng.gen_range(0..WORDS.len())]
                };
                let _ = len;
                string_literal(word)
            }
            Ty::Enum => {
                let words = if edge {
                    &["z", ""][..]
                } else {
                    &["a", "b", "C", "c", "B"][..]
                };
                string_literal(words[rng.gen_range(0..words.len())])
            }
            Ty::VarBinary(n) | Ty::Binary(n) => {
                let max = if edge { n + 1 } else { n };
                let bytes = random_bytes(rng, max as usize);
                bytes_literal(rng, bytes)
            }
            Ty::Blob => {
                let bytes = random_bytes(rng, 6);
                bytes_literal(rng, bytes)
            }
            Ty::DateTime(_) | Ty::Timestamp(_) => {
                let timestamp = matches!(self, Ty::Timestamp(_));
                // A zero month or day ('2020-00-15'): a DATETIME holds it,
                // a TIMESTAMP refuses it.
                let dates: &[&str] = if edge {
                    &["2021-02-29", "2020-13-01", "1970-01-01", "2020-00-15"]
                } else if timestamp {
                    &["2020-01-01", "2020-01-02", "1999-12-31", "2038-01-19"]
                } else {
                    &[
                        "2020-01-01",
                        "2020-01-02",
                        "1999-12-31",
                        "1000-01-01",
                        "2020-02-00",
                    ]
                };
                let date = dates[rng.gen_range(0..dates.len())];
                let time = ["00:00:00", "12:34:56", "23:59:59", "03:14:07"][rng.gen_range(0..4)];
                let frac = fraction(rng, write);
                let text = format!("{date} {time}{frac}");
                temporal_literal(rng, text)
            }
            Ty::Time(_) => {
                let times: &[&str] = if edge {
                    &["839:00:00", "12:61:00"]
                } else {
                    &[
                        "00:00:00",
                        "12:34:56",
                        "-01:02:03",
                        "838:59:59",
                        "100:00:00",
                    ]
                };
                let text = format!(
                    "{}{}",
                    times[rng.gen_range(0..times.len())],
                    fraction(rng, write)
                );
                temporal_literal(rng, text)
            }
            Ty::Date => {
                let dates: &[&str] = if edge {
                    &["2021-02-29", "2020-02-30"]
                } else {
                    &[
                        "2020-01-01",
                        "1999-12-31",
                        "2020-02-29",
                        "2000-01-01",
                        "2020-00-15",
                        "2020-02-00",
                    ]
                };
                let date = dates[rng.gen_range(0..dates.len())].to_string();
                temporal_literal(rng, date)
            }
        }
    }
}

fn keyword(sql: &str, param: Value) -> Literal {
    Literal {
        sql: sql.into(),
        param,
    }
}

/// An integer, as a number parameter or (as drivers that bind everything
/// as strings do) a string parameter.
fn int_literal(rng: &mut StdRng, v: i128) -> Literal {
    let param = if rng.gen_ratio(1, 5) {
        Value::Bytes(v.to_string().into_bytes())
    } else if let Ok(i) = i64::try_from(v) {
        Value::Int(i)
    } else if let Ok(u) = u64::try_from(v) {
        Value::UInt(u)
    } else {
        Value::Bytes(v.to_string().into_bytes())
    };
    Literal {
        sql: v.to_string(),
        param,
    }
}

/// A decimal number: text parameter mostly (exact), sometimes a double.
fn numeric_text(rng: &mut StdRng, text: String) -> Literal {
    let param = match text.parse::<f64>() {
        Ok(d) if rng.gen_ratio(1, 6) => Value::Double(d),
        _ => Value::Bytes(text.clone().into_bytes()),
    };
    Literal { sql: text, param }
}

/// A string literal, quotes and backslashes escaped.
pub fn string_literal(s: &str) -> Literal {
    let escaped = s.replace('\\', "\\\\").replace('\'', "''");
    Literal {
        sql: format!("'{escaped}'"),
        param: Value::Bytes(s.as_bytes().to_vec()),
    }
}

/// `X'..'` (or `_binary'..'` with escapes) for any bytes.
fn bytes_literal(rng: &mut StdRng, bytes: Vec<u8>) -> Literal {
    let sql = if rng.gen_bool(0.7) {
        let digits: String = bytes.iter().map(|b| format!("{b:02X}")).collect();
        format!("X'{digits}'")
    } else {
        // _binary'...' with every byte as it is except the ones a string
        // literal must escape.
        let mut s = String::from("_binary'");
        for &b in &bytes {
            match b {
                b'\'' => s.push_str("''"),
                b'\\' => s.push_str("\\\\"),
                0 => s.push_str("\\0"),
                // Kept printable so the statement is valid UTF-8 text;
                // other bytes go as hex (the raw-bytes path of COM_QUERY
                // is covered by the prepared form, which sends any byte).
                0x20..=0x7E => s.push(char::from(b)),
                _ => return bytes_literal_hex(bytes),
            }
        }
        s.push('\'');
        s
    };
    Literal {
        sql,
        param: Value::Bytes(bytes),
    }
}

fn bytes_literal_hex(bytes: Vec<u8>) -> Literal {
    let digits: String = bytes.iter().map(|b| format!("{b:02X}")).collect();
    Literal {
        sql: format!("X'{digits}'"),
        param: Value::Bytes(bytes),
    }
}

/// Up to `max` bytes, mostly from values where bytewise and text
/// comparison disagree (0x00, case pairs, a trailing space, invalid UTF-8).
fn random_bytes(rng: &mut StdRng, max: usize) -> Vec<u8> {
    interesting_bytes(
        rng,
        max,
        &[0x00, 0x20, 0x41, 0x61, 0x5C, 0x27, 0x7F, 0x80, 0xC3, 0xFF],
    )
}

/// Up to `max` bytes, seven in ten drawn from `interesting`, the rest any.
pub fn interesting_bytes(rng: &mut StdRng, max: usize, interesting: &[u8]) -> Vec<u8> {
    let n = rng.gen_range(0..=max);
    (0..n)
        .map(|_| {
            if rng.gen_bool(0.7) {
                interesting[rng.gen_range(0..interesting.len())]
            } else {
                rng.gen()
            }
        })
        .collect()
}

/// A fractional-seconds suffix: none mostly, else 1 to 6 digits (more
/// than a column keeps are truncated).
fn fraction(rng: &mut StdRng, write: bool) -> String {
    let options = if write {
        &["", "", ".5", ".123456", ".999999", ".1", ".000001"][..]
    } else {
        &["", "", ".5", ".123"][..]
    };
    options[rng.gen_range(0..options.len())].to_string()
}

/// A date/time literal: a string in SQL; as a parameter the string, or
/// the binary protocol's DATETIME/TIME value when it parses.
fn temporal_literal(rng: &mut StdRng, text: String) -> Literal {
    let param = if rng.gen_bool(0.5) {
        parse_temporal(&text).unwrap_or_else(|| Value::Bytes(text.clone().into_bytes()))
    } else {
        Value::Bytes(text.clone().into_bytes())
    };
    Literal {
        sql: format!("'{text}'"),
        param,
    }
}

/// `YYYY-MM-DD[ HH:MM:SS[.f]]` as `Value::Date`, `[-]H:MM:SS[.f]` as
/// `Value::Time`; None for values the binary form cannot carry (invalid
/// dates, hours past 838).
fn parse_temporal(text: &str) -> Option<Value> {
    let micros = |frac: Option<&str>| -> Option<u32> {
        match frac {
            None => Some(0),
            Some(f) => format!("{f:0<6}").parse().ok(),
        }
    };
    if text.len() >= 10 && text.as_bytes()[4] == b'-' {
        let (date, time) = text.split_once(' ').unwrap_or((text, "00:00:00"));
        let mut d = date.split('-').map(|p| p.parse::<u32>().ok());
        let (y, mo, da) = (d.next()??, d.next()??, d.next()??);
        let leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
        // A zero month or day is a date MySQL stores as given.
        let days = match mo {
            0 | 1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
            4 | 6 | 9 | 11 => 30,
            2 if leap => 29,
            2 => 28,
            _ => return None,
        };
        if da > days {
            return None;
        }
        let (hms, frac) = match time.split_once('.') {
            Some((a, b)) => (a, Some(b)),
            None => (time, None),
        };
        let mut t = hms.split(':').map(|p| p.parse::<u8>().ok());
        let (h, mi, s) = (t.next()??, t.next()??, t.next()??);
        Some(Value::Date(
            u16::try_from(y).ok()?,
            u8::try_from(mo).ok()?,
            u8::try_from(da).ok()?,
            h,
            mi,
            s,
            micros(frac)?,
        ))
    } else {
        let (neg, rest) = match text.strip_prefix('-') {
            Some(r) => (true, r),
            None => (false, text),
        };
        let (hms, frac) = match rest.split_once('.') {
            Some((a, b)) => (a, Some(b)),
            None => (rest, None),
        };
        let mut t = hms.split(':').map(|p| p.parse::<u32>().ok());
        let (h, mi, s) = (t.next()??, t.next()??, t.next()??);
        if h > 838 || mi > 59 || s > 59 {
            return None;
        }
        Some(Value::Time(
            neg,
            h / 24,
            u8::try_from(h % 24).ok()?,
            u8::try_from(mi).ok()?,
            u8::try_from(s).ok()?,
            micros(frac)?,
        ))
    }
}

/// A column of a generated table.
#[derive(Clone, Debug)]
pub struct Column {
    pub name: String,
    pub ty: Ty,
    pub not_null: bool,
}

impl Column {
    /// An expression over `qualified` (the column, maybe with a table
    /// prefix) with one right answer whichever of several equal values a
    /// server picks: case-insensitive strings upper-cased, PAD SPACE strings
    /// without trailing spaces.
    pub fn canonical(&self, qualified: &str) -> String {
        match self.ty {
            Ty::Str { ci: true, .. } => format!("UPPER(RTRIM({qualified}))"),
            Ty::Str { ci: false, .. } => format!("RTRIM({qualified})"),
            Ty::Enum => format!("UPPER({qualified})"),
            _ => qualified.to_string(),
        }
    }
}

/// A generated table: `id INT PRIMARY KEY` first, then its columns.
#[derive(Clone, Debug)]
pub struct Table {
    pub name: &'static str,
    pub columns: Vec<Column>,
    /// Range of ids the workload writes (collisions are the point).
    pub ids: std::ops::RangeInclusive<i64>,
    pub ddl: String,
}

impl Table {
    fn other_columns(&self) -> impl Iterator<Item = &Column> {
        self.columns.iter().skip(1)
    }
}

/// The parent table `p` and the child `c` (with `pid` referencing `p.id`).
#[derive(Clone, Debug)]
pub struct Schema {
    pub tables: Vec<Table>,
}

impl Schema {
    /// A random schema: every column family appears across seeds; each
    /// table has UNIQUE keys, `p` a CHECK and `c` a FOREIGN KEY to `p`.
    pub fn random(rng: &mut StdRng) -> Schema {
        let mut tables = Vec::new();
        for (name, ids, extra) in [("p", 1..=10, rng.gen_range(3..=6)), ("c", 1..=16, 3)] {
            let mut columns = vec![Column {
                name: "id".into(),
                ty: Ty::Int {
                    bytes: 4,
                    unsigned: false,
                },
                not_null: true,
            }];
            if name == "c" {
                columns.push(Column {
                    name: "pid".into(),
                    ty: Ty::Int {
                        bytes: 4,
                        unsigned: false,
                    },
                    not_null: false,
                });
            }
            for i in 0..extra {
                let ty = Ty::random(rng);
                let not_null = rng.gen_ratio(1, 4)
                    // NULL into a TIMESTAMP NOT NULL is the current time in
                    // MariaDB: no fixed answer to compare.
                    && !matches!(ty, Ty::Timestamp(_));
                columns.push(Column {
                    name: format!("{name}{i}"),
                    ty,
                    not_null,
                });
            }
            let mut defs: Vec<String> = columns
                .iter()
                .map(|c| {
                    format!(
                        "{} {}{}",
                        c.name,
                        c.ty.sql(),
                        if c.not_null { " NOT NULL" } else { " NULL" }
                    )
                })
                .collect();
            defs[0].push_str(" PRIMARY KEY");
            let keyable: Vec<&Column> = columns[1..]
                .iter()
                .filter(|c| c.ty.keyable() && c.name != "pid")
                .collect();
            for k in 0..rng.gen_range(1..=2) {
                let Some(first) = keyable.choose(rng) else {
                    break;
                };
                let mut key = vec![first.name.clone()];
                if rng.gen_ratio(1, 3) {
                    if let Some(second) = keyable.choose(rng) {
                        if second.name != first.name {
                            key.push(second.name.clone());
                        }
                    }
                }
                defs.push(format!("UNIQUE KEY {name}_u{k} ({})", key.join(", ")));
            }
            if name == "p" {
                // A CHECK a value of the column's own domain can fail.
                if let Some(c) = columns[1..]
                    .iter()
                    .find(|c| c.ty.numeric() || matches!(c.ty, Ty::Str { .. }))
                {
                    let cond = if c.ty.numeric() {
                        format!("{} <> 3", c.name)
                    } else {
                        format!("{} <> 'b'", c.name)
                    };
                    defs.push(format!("CONSTRAINT p_check CHECK ({cond})"));
                }
            } else {
                let on_delete = ["CASCADE", "SET NULL", "RESTRICT"][rng.gen_range(0..3)];
                let on_update = ["CASCADE", "RESTRICT"][rng.gen_range(0..2)];
                defs.push(format!(
                    "CONSTRAINT c_p FOREIGN KEY (pid) REFERENCES p (id) ON DELETE {on_delete} ON UPDATE {on_update}"
                ));
            }
            let ddl = format!("CREATE TABLE {name} ({})", defs.join(", "));
            tables.push(Table {
                name,
                columns,
                ids,
                ddl,
            });
        }
        Schema { tables }
    }

    /// CREATE TABLE statements, parent first.
    pub fn ddl(&self) -> Vec<String> {
        self.tables.iter().map(|t| t.ddl.clone()).collect()
    }
}

/// What kind of statement a [`Step`] is, which says how to compare it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// BEGIN, COMMIT, SAVEPOINT, SET ...: always text protocol.
    Control,
    /// COM_RESET_CONNECTION (the statement text is a comment).
    Reset,
    Write,
    /// A SELECT; `ordered` when its ORDER BY fully determines row order.
    Query {
        ordered: bool,
    },
}

/// One statement of the workload.
#[derive(Clone, Debug)]
pub struct Step {
    /// Which of the workload's connections runs it.
    pub conn: usize,
    /// Prepared (binary protocol) rather than text.
    pub prepared: bool,
    pub kind: Kind,
    pub stmt: Statement,
}

impl Step {
    /// One line of a reproduction script.
    pub fn script_line(&self) -> String {
        let how = match self.kind {
            Kind::Reset => return format!("-- conn {}: COM_RESET_CONNECTION", self.conn),
            _ if self.prepared => {
                let (sql, params) = self.stmt.prepared();
                let params: Vec<String> = params.iter().map(crate::exact::show).collect();
                format!("prepared [{sql}] params [{}]", params.join(", "))
            }
            _ => "text".to_string(),
        };
        format!("/* conn {} {how} */ {};", self.conn, self.stmt.text())
    }
}

#[derive(Clone, Debug, Default)]
struct Session {
    /// Inside BEGIN ... COMMIT, or autocommit off after a statement.
    in_transaction: bool,
    /// The open transaction has written (and may hold row locks).
    wrote: bool,
    autocommit_off: bool,
    savepoints: Vec<String>,
}

/// The statement stream of one seed (an iterator of [`Step`]s).
pub struct Workload {
    rng: StdRng,
    pub schema: Schema,
    sessions: Vec<Session>,
    current: usize,
    next_savepoint: usize,
    /// INSERT IGNORE may store zero dates (and zero timestamps for values
    /// past TIMESTAMP's range); `LADLE_TXGEN_ZERO_DATES=0` avoids them.
    zero_dates: bool,
    /// Set while an INSERT IGNORE's values are drawn without zero dates.
    avoid_zero_dates: bool,
}

/// Session settings applied on every connection at start and after each
/// reset: the isolation level by seed, UTC for TIMESTAMP.
pub fn session_setup(seed: u64) -> Vec<String> {
    // Odd seeds at REPEATABLE READ, even ones at READ COMMITTED.
    let level = if seed % 2 == 1 {
        "REPEATABLE READ"
    } else {
        "READ COMMITTED"
    };
    vec![
        format!("SET SESSION TRANSACTION ISOLATION LEVEL {level}"),
        "SET time_zone = '+00:00'".to_string(),
    ]
}

impl Workload {
    /// The workload of `seed` over `connections` connections.
    pub fn new(seed: u64, connections: usize) -> Workload {
        let mut rng = StdRng::seed_from_u64(seed);
        let schema = Schema::random(&mut rng);
        Workload {
            rng,
            schema,
            sessions: vec![Session::default(); connections.max(1)],
            current: 0,
            next_savepoint: 0,
            // Ladle has no zero dates ('0000-00-00'), which INSERT IGNORE
            // stores for an invalid or missing date: a known gap, left out
            // unless asked for, so runs find the rest.
            zero_dates: std::env::var("LADLE_TXGEN_ZERO_DATES").as_deref() != Ok("0"),
            avoid_zero_dates: false,
        }
    }

    /// The next statement.
    pub fn next_step(&mut self) -> Step {
        if self.sessions.len() > 1 && self.rng.gen_ratio(1, 8) {
            self.current = self.rng.gen_range(0..self.sessions.len());
        }
        let conn = self.current;
        let prepared = self.rng.gen_bool(0.5);
        let r = self.rng.gen_range(0..100);
        let step = |kind: Kind, stmt: Statement, prepared: bool| Step {
            conn,
            prepared: prepared && kind != Kind::Control && kind != Kind::Reset,
            kind,
            stmt,
        };
        let s = &self.sessions[conn];
        match r {
            0..=4 if !s.in_transaction => {
                let s = &mut self.sessions[conn];
                s.in_transaction = true;
                s.wrote = false;
                s.savepoints.clear();
                let begin = ["BEGIN", "START TRANSACTION"][self.rng.gen_range(0..2)];
                step(Kind::Control, Statement::sql(begin), false)
            }
            0..=4 => {
                let s = &mut self.sessions[conn];
                s.in_transaction = false;
                s.wrote = false;
                s.savepoints.clear();
                let end = if self.rng.gen_bool(0.7) {
                    "COMMIT"
                } else {
                    "ROLLBACK"
                };
                step(Kind::Control, Statement::sql(end), false)
            }
            5..=6 if s.in_transaction => {
                self.next_savepoint += 1;
                let name = format!("sp{}", self.next_savepoint);
                self.sessions[conn].savepoints.push(name.clone());
                step(
                    Kind::Control,
                    Statement::sql(format!("SAVEPOINT {name}")),
                    false,
                )
            }
            7..=8 if !s.savepoints.is_empty() => {
                let i = self.rng.gen_range(0..s.savepoints.len());
                let name = s.savepoints[i].clone();
                let sql = if self.rng.gen_bool(0.7) {
                    self.sessions[conn].savepoints.truncate(i + 1);
                    format!("ROLLBACK TO SAVEPOINT {name}")
                } else {
                    self.sessions[conn].savepoints.truncate(i);
                    format!("RELEASE SAVEPOINT {name}")
                };
                step(Kind::Control, Statement::sql(sql), false)
            }
            9 => {
                // A pool hands the connection to its next borrower: an
                // open transaction is rolled back, settings start over.
                self.sessions[conn] = Session::default();
                step(
                    Kind::Reset,
                    Statement::sql("/* COM_RESET_CONNECTION */"),
                    false,
                )
            }
            10 => {
                let off = !s.autocommit_off;
                let s = &mut self.sessions[conn];
                s.autocommit_off = off;
                if !off {
                    // SET autocommit = 1 commits an open transaction.
                    s.in_transaction = false;
                    s.wrote = false;
                    s.savepoints.clear();
                }
                step(
                    Kind::Control,
                    Statement::sql(format!("SET autocommit = {}", u8::from(!off))),
                    false,
                )
            }
            11..=55 => {
                // Write only where no lock of another transaction can
                // block: on the connection whose transaction has written,
                // if any.
                let writer = self
                    .sessions
                    .iter()
                    .position(|s| s.in_transaction && s.wrote)
                    .unwrap_or(conn);
                let stmt = self.write();
                let s = &mut self.sessions[writer];
                if s.autocommit_off {
                    s.in_transaction = true;
                }
                if s.in_transaction {
                    s.wrote = true;
                }
                Step {
                    conn: writer,
                    prepared,
                    kind: Kind::Write,
                    stmt,
                }
            }
            _ => {
                let s = &mut self.sessions[conn];
                if s.autocommit_off {
                    s.in_transaction = true;
                }
                let (stmt, ordered) = self.query();
                step(Kind::Query { ordered }, stmt, prepared)
            }
        }
    }

    fn table(&mut self) -> Table {
        let i = if self.rng.gen_bool(0.6) { 0 } else { 1 };
        self.schema.tables[i].clone()
    }

    fn id_literal(&mut self, t: &Table) -> Literal {
        let id = self.rng.gen_range(t.ids.clone());
        int_literal(&mut self.rng, i128::from(id))
    }

    /// A value for column `c` of table `t` in a write (NULL sometimes, even
    /// for NOT NULL columns: 1048, or the default under IGNORE).
    fn value(&mut self, t: &Table, c: &Column) -> Literal {
        if c.name == "id" {
            return self.id_literal(t);
        }
        if c.name == "pid" {
            // Sometimes a parent that does not exist: 1452.
            let id = self.rng.gen_range(1..=12);
            return int_literal(&mut self.rng, id);
        }
        let avoid = self.avoid_zero_dates && c.ty.ignore_needs_zero();
        let null_odds = if c.not_null { 40 } else { 6 };
        if self.rng.gen_ratio(1, null_odds) && !(avoid && c.not_null) {
            return keyword("NULL", Value::NULL);
        }
        loop {
            let lit = c.ty.literal(&mut self.rng, true);
            if !avoid || c.ty.holds(&lit) {
                return lit;
            }
        }
    }

    fn write(&mut self) -> Statement {
        let t = self.table();
        let mut stmt = Statement::default();
        match self.rng.gen_range(0..12) {
            0..=5 => {
                // INSERT, INSERT IGNORE, REPLACE or ON DUPLICATE KEY UPDATE
                // of 1 to 3 rows: the id, every NOT NULL column (nearly
                // always) and some others.
                let verb = match self.rng.gen_range(0..8) {
                    0..=2 => "INSERT INTO",
                    3..=4 => "INSERT IGNORE INTO",
                    5 => "REPLACE INTO",
                    _ => "INSERT INTO",
                };
                self.avoid_zero_dates = verb == "INSERT IGNORE INTO" && !self.zero_dates;
                let cols: Vec<Column> = t
                    .columns
                    .iter()
                    .filter(|c| {
                        c.name == "id"
                            || (c.not_null && self.avoid_zero_dates && c.ty.ignore_needs_zero())
                            || (c.not_null && !self.rng.gen_ratio(1, 30))
                            || self.rng.gen_bool(0.6)
                    })
                    .cloned()
                    .collect();
                let names: Vec<&str> = cols.iter().map(|c| c.name.as_str()).collect();
                stmt.push(format!("{verb} {} ({}) VALUES ", t.name, names.join(", ")));
                for r in 0..self.rng.gen_range(1..=3) {
                    stmt.push(if r == 0 { "(" } else { ", (" });
                    for (i, c) in cols.iter().enumerate() {
                        if i > 0 {
                            stmt.push(", ");
                        }
                        let v = self.value(&t, c);
                        stmt.lit(v);
                    }
                    stmt.push(")");
                }
                self.avoid_zero_dates = false;
                if verb == "INSERT INTO" && self.rng.gen_bool(0.4) {
                    stmt.push(" ON DUPLICATE KEY UPDATE ");
                    let c = t.other_columns().cloned().collect::<Vec<_>>();
                    let c = c.choose(&mut self.rng).expect("columns").clone();
                    match self.rng.gen_range(0..3) {
                        0 => {
                            stmt.push(format!("{0} = VALUES({0})", c.name));
                        }
                        1 if c.ty.numeric() => {
                            stmt.push(format!("{0} = {0} + 1", c.name));
                        }
                        _ => {
                            stmt.push(format!("{} = ", c.name));
                            let v = self.value(&t, &c);
                            stmt.lit(v);
                        }
                    }
                }
            }
            6..=8 => {
                stmt.push(format!("UPDATE {} SET ", t.name));
                let c = t.columns.choose(&mut self.rng).expect("columns").clone();
                match self.rng.gen_range(0..4) {
                    0 if c.ty.numeric() => {
                        stmt.push(format!("{0} = {0} + 1", c.name));
                    }
                    1 if c.name == "id" && t.name == "p" => {
                        // Moves parents: ON UPDATE of the foreign key.
                        stmt.push("id = id + 10");
                    }
                    _ => {
                        stmt.push(format!("{} = ", c.name));
                        let v = self.value(&t, &c);
                        stmt.lit(v);
                    }
                }
                stmt.push(" WHERE ");
                let p = self.predicate(&t, "");
                stmt.append(&p);
            }
            9..=10 => {
                stmt.push(format!("DELETE FROM {} WHERE ", t.name));
                let p = self.predicate(&t, "");
                stmt.append(&p);
            }
            _ => {
                // A row by primary key, the shape ORMs use most.
                stmt.push(format!("DELETE FROM {} WHERE id = ", t.name));
                let id = self.id_literal(&t);
                stmt.lit(id);
            }
        }
        stmt
    }

    /// A condition on `t`'s columns (qualified with `prefix`, e.g. `p.`).
    fn predicate(&mut self, t: &Table, prefix: &str) -> Statement {
        let mut stmt = self.comparison(t, prefix);
        match self.rng.gen_range(0..8) {
            0 => {
                stmt.push(" AND ");
                let other = self.comparison(t, prefix);
                stmt.append(&other);
            }
            1 => {
                let mut wrapped = Statement::sql("(");
                wrapped.append(&stmt);
                wrapped.push(" OR ");
                let other = self.comparison(t, prefix);
                wrapped.append(&other);
                wrapped.push(")");
                stmt = wrapped;
            }
            2 => {
                let mut wrapped = Statement::sql("NOT (");
                wrapped.append(&stmt);
                wrapped.push(")");
                stmt = wrapped;
            }
            _ => {}
        }
        stmt
    }

    fn comparison(&mut self, t: &Table, prefix: &str) -> Statement {
        let c = if self.rng.gen_ratio(1, 4) {
            t.columns[0].clone()
        } else {
            t.columns.choose(&mut self.rng).expect("columns").clone()
        };
        let name = format!("{prefix}{}", c.name);
        let lit = |w: &mut Workload| {
            if c.name == "id" || c.name == "pid" {
                w.id_literal(t)
            } else {
                c.ty.literal(&mut w.rng, false)
            }
        };
        let mut stmt = Statement::default();
        match self.rng.gen_range(0..10) {
            0..=2 => {
                stmt.push(format!("{name} = "));
                let v = lit(self);
                stmt.lit(v);
            }
            3 => {
                let op = ["<", "<=", ">", ">=", "<>"][self.rng.gen_range(0..5)];
                stmt.push(format!("{name} {op} "));
                let v = lit(self);
                stmt.lit(v);
            }
            4 => {
                stmt.push(format!("{name} BETWEEN "));
                let v = lit(self);
                stmt.lit(v);
                stmt.push(" AND ");
                let v = lit(self);
                stmt.lit(v);
            }
            5 => {
                let not = if self.rng.gen_ratio(1, 4) { "NOT " } else { "" };
                stmt.push(format!("{name} {not}IN ("));
                for i in 0..self.rng.gen_range(1..=3) {
                    if i > 0 {
                        stmt.push(", ");
                    }
                    let v = lit(self);
                    stmt.lit(v);
                }
                stmt.push(")");
            }
            6 => {
                let not = if self.rng.gen_bool(0.5) { "NOT " } else { "" };
                stmt.push(format!("{name} IS {not}NULL"));
            }
            7 if c.ty.is_text() || c.ty.is_bytes() => {
                let pattern =
                    ["a%", "%b", "_", "A%", "%", "_b%", "%\\_%", "ü%"][self.rng.gen_range(0..8)];
                stmt.push(format!("{name} LIKE "));
                stmt.lit(string_literal(pattern));
            }
            _ => {
                stmt.push(format!("{name} = "));
                let v = lit(self);
                stmt.lit(v);
            }
        }
        stmt
    }

    /// A random query and whether its row order is determined.
    fn query(&mut self) -> (Statement, bool) {
        let p = self.schema.tables[0].clone();
        let c = self.schema.tables[1].clone();
        let t = self.table();
        let mut stmt = Statement::default();
        let all = |t: &Table, prefix: &str| -> String {
            t.columns
                .iter()
                .map(|c| format!("{prefix}{}", c.name))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self.rng.gen_range(0..12) {
            0 | 1 => {
                // The whole table, ordered by key: what the transaction sees.
                stmt.push(format!(
                    "SELECT {} FROM {} ORDER BY id",
                    all(&t, ""),
                    t.name
                ));
                (stmt, true)
            }
            2 | 3 => {
                stmt.push(format!("SELECT {} FROM {} WHERE ", all(&t, ""), t.name));
                let pred = self.predicate(&t, "");
                stmt.append(&pred);
                (stmt, false)
            }
            4 => {
                // ORDER BY a column then the key, so the order is determined.
                let col = t.columns.choose(&mut self.rng).expect("columns").clone();
                let dir = if self.rng.gen_bool(0.5) { " DESC" } else { "" };
                stmt.push(format!("SELECT {} FROM {}", all(&t, ""), t.name));
                if self.rng.gen_bool(0.5) {
                    stmt.push(" WHERE ");
                    let pred = self.predicate(&t, "");
                    stmt.append(&pred);
                }
                let limit = self.rng.gen_range(1..=4);
                stmt.push(format!(" ORDER BY {}{dir}, id LIMIT {limit}", col.name));
                if self.rng.gen_bool(0.3) {
                    stmt.push(format!(" OFFSET {}", self.rng.gen_range(0..3)));
                }
                (stmt, true)
            }
            5 => {
                let join = if self.rng.gen_bool(0.5) {
                    "JOIN"
                } else {
                    "LEFT JOIN"
                };
                let pc = p
                    .columns
                    .choose(&mut self.rng)
                    .expect("columns")
                    .name
                    .clone();
                let cc = c
                    .columns
                    .choose(&mut self.rng)
                    .expect("columns")
                    .name
                    .clone();
                stmt.push(format!(
                    "SELECT p.id, p.{pc}, c.id, c.{cc} FROM p {join} c ON c.pid = p.id"
                ));
                if self.rng.gen_bool(0.6) {
                    stmt.push(" WHERE ");
                    let (tab, prefix) = if self.rng.gen_bool(0.5) {
                        (&p, "p.")
                    } else {
                        (&c, "c.")
                    };
                    let pred = self.predicate(tab, prefix);
                    stmt.append(&pred);
                }
                (stmt, false)
            }
            6 | 7 => {
                // GROUP BY with aggregates.
                let key = t.columns[1..]
                    .choose(&mut self.rng)
                    .expect("columns")
                    .clone();
                let agg = t.columns.choose(&mut self.rng).expect("columns").clone();
                let mut select = vec![key.canonical(&key.name), "COUNT(*)".to_string()];
                select.push(format!("MIN({})", agg.canonical(&agg.name)));
                select.push(format!("MAX({})", agg.canonical(&agg.name)));
                select.push(format!("COUNT({})", agg.name));
                if agg.ty.numeric() {
                    select.push(format!("SUM({})", agg.name));
                    select.push(format!("AVG({})", agg.name));
                }
                stmt.push(format!("SELECT {} FROM {}", select.join(", "), t.name));
                if self.rng.gen_bool(0.4) {
                    stmt.push(" WHERE ");
                    let pred = self.predicate(&t, "");
                    stmt.append(&pred);
                }
                stmt.push(format!(" GROUP BY {}", key.name));
                if self.rng.gen_ratio(1, 3) {
                    stmt.push(" HAVING COUNT(*) > 1");
                }
                (stmt, false)
            }
            8 => {
                let col = t.columns[1..]
                    .choose(&mut self.rng)
                    .expect("columns")
                    .clone();
                if self.rng.gen_bool(0.5) {
                    stmt.push(format!(
                        "SELECT DISTINCT {} FROM {}",
                        col.canonical(&col.name),
                        t.name
                    ));
                } else {
                    stmt.push(format!(
                        "SELECT COUNT(DISTINCT {}), COUNT(*) FROM {}",
                        col.name, t.name
                    ));
                }
                if self.rng.gen_bool(0.4) {
                    stmt.push(" WHERE ");
                    let pred = self.predicate(&t, "");
                    stmt.append(&pred);
                }
                (stmt, false)
            }
            9 | 10 => {
                // Subqueries.
                stmt.push(format!("SELECT {} FROM p WHERE ", all(&p, "")));
                match self.rng.gen_range(0..4) {
                    0 => stmt.push("id IN (SELECT pid FROM c WHERE "),
                    1 => stmt.push("id NOT IN (SELECT pid FROM c WHERE "),
                    2 => stmt.push("EXISTS (SELECT 1 FROM c WHERE c.pid = p.id AND "),
                    _ => stmt.push("NOT EXISTS (SELECT 1 FROM c WHERE c.pid = p.id AND "),
                };
                let pred = self.predicate(&c, "c.");
                stmt.append(&pred);
                stmt.push(")");
                (stmt, false)
            }
            _ => {
                // A point read by key, the shape ORMs use most.
                stmt.push(format!(
                    "SELECT {} FROM {} WHERE id = ",
                    all(&t, ""),
                    t.name
                ));
                let id = self.id_literal(&t);
                stmt.lit(id);
                (stmt, false)
            }
        }
    }
}
