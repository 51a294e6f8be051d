//! A one-node test harness with a compact text fixture: each line is a sign
//! (`+`/`-`) followed by space-separated values (`NULL`, integers, or text).

use ladle_common::{Row, RowDelta, Value};

pub(crate) struct Harness<F: FnMut(usize, Vec<RowDelta>) -> Vec<RowDelta>> {
    f: F,
    /// The input (parent index) the next deltas arrive on.
    pub from: usize,
}

impl<F: FnMut(usize, Vec<RowDelta>) -> Vec<RowDelta>> Harness<F> {
    pub fn new(f: F) -> Harness<F> {
        Harness { f, from: 0 }
    }
}

pub(crate) fn parse_value(s: &str) -> Value {
    if s == "NULL" {
        Value::Null
    } else if let Ok(i) = s.parse::<i64>() {
        Value::Int(i)
    } else if let Ok(d) = s.parse::<rust_decimal::Decimal>() {
        Value::Decimal(d)
    } else {
        Value::text(s)
    }
}

pub(crate) fn parse_row(s: &str) -> Row {
    s.split_whitespace().map(parse_value).collect()
}

/// Parses the fixture into deltas.
pub(crate) fn parse(fixture: &str) -> Vec<RowDelta> {
    fixture
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (sign, rest) = l.split_at(1);
            let row = parse_row(rest);
            if sign == "-" {
                RowDelta::Delete(row)
            } else {
                RowDelta::Insert(row)
            }
        })
        .collect()
}

pub(crate) fn render(deltas: &[RowDelta]) -> Vec<String> {
    let mut v: Vec<String> = deltas
        .iter()
        .map(|d| {
            let vals: Vec<String> = d.row().iter().map(|v| v.to_string()).collect();
            format!(
                "{} {}",
                if d.sign() > 0 { "+" } else { "-" },
                vals.join(" ")
            )
        })
        .collect();
    v.sort();
    v
}

/// Feeds `input` to the node and checks its output (order-insensitive).
pub(crate) fn assert_emits<F: FnMut(usize, Vec<RowDelta>) -> Vec<RowDelta>>(
    h: &mut Harness<F>,
    input: &str,
    expected: &str,
) {
    let out = (h.f)(h.from, parse(input));
    assert_eq!(render(&out), render(&parse(expected)), "input:\n{input}");
}
