//! [`ExactSum`]: the running sum behind SUM and AVG of integers and
//! DECIMALs, kept exact while rows come and go.
//!
//! A DECIMAL here holds 28 to 29 digits (rust_decimal's 96-bit mantissa),
//! MariaDB's up to 65. The sum is kept wider than that (an `i128` count of
//! `10^-scale` units), so it can pass the DECIMAL range and come back when
//! a row is deleted; a sum or average that a DECIMAL cannot hold reads as
//! the 1690 marker ("DECIMAL value is out of range"), never as a rounded,
//! wrapped or partial number.

use ladle_common::Value;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

/// rust_decimal's largest scale.
const MAX_SCALE: u32 = 28;

const OUT_OF_RANGE: &str = "DECIMAL value is out of range";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ExactSum {
    /// The sum, in units of `10^-scale`.
    units: i128,
    /// The largest scale of the inputs (at least the argument's).
    scale: u32,
    /// Non-NULL inputs.
    n: i64,
    /// An addition went past `i128` (about 10^38 units): the sum is not
    /// known while inputs are left (reads give 1690).
    lost: bool,
}

impl ExactSum {
    /// An empty sum of values of scale `scale`.
    pub fn new(scale: u32) -> ExactSum {
        ExactSum {
            units: 0,
            scale: scale.min(MAX_SCALE),
            n: 0,
            lost: false,
        }
    }

    /// A sum of `n` values whose total is `sum` (the narrower accumulator
    /// of snapshots taken before this one existed).
    pub fn of(sum: Decimal, n: i64) -> ExactSum {
        ExactSum {
            units: sum.mantissa(),
            scale: sum.scale(),
            n,
            lost: false,
        }
    }

    /// Adds `sign` times `d`.
    pub fn add(&mut self, d: Decimal, sign: i64) {
        self.n += sign;
        if self.n == 0 {
            // Nothing left: the sum is known again.
            (self.units, self.lost) = (0, false);
            return;
        }
        if self.lost {
            return;
        }
        if d.scale() > self.scale {
            match self.units.checked_mul(pow10(d.scale() - self.scale)) {
                Some(u) => (self.units, self.scale) = (u, d.scale()),
                None => {
                    self.lost = true;
                    return;
                }
            }
        }
        let units = d
            .mantissa()
            .checked_mul(pow10(self.scale - d.scale()))
            .and_then(|m| m.checked_mul(i128::from(sign)))
            .and_then(|m| self.units.checked_add(m));
        match units {
            Some(u) => self.units = u,
            None => self.lost = true,
        }
    }

    /// SUM: NULL over no values, else the sum shown with `scale` decimals.
    pub fn sum(&self, scale: u32) -> Value {
        if self.n == 0 {
            return Value::Null;
        }
        if self.lost {
            return crate::expr::out_of_range_marker(OUT_OF_RANGE);
        }
        decimal(self.units, self.scale, scale)
    }

    /// AVG: NULL over no values, else the mean rounded (half away from
    /// zero, as MariaDB) to `scale` decimals.
    pub fn avg(&self, scale: u32) -> Value {
        if self.n == 0 {
            return Value::Null;
        }
        let want = scale.min(MAX_SCALE);
        let mean = if self.lost {
            None
        } else if want >= self.scale {
            self.units
                .checked_mul(pow10(want - self.scale))
                .map(|u| div_round(u, i128::from(self.n)))
        } else {
            i128::from(self.n)
                .checked_mul(pow10(self.scale - want))
                .map(|n| div_round(self.units, n))
        };
        match mean {
            Some(m) => decimal(m, want, scale),
            None => crate::expr::out_of_range_marker(OUT_OF_RANGE),
        }
    }
}

impl ExactSum {
    /// AVG as MariaDB divides (see [`crate::expr::quotient_digits`]): the
    /// mean truncated to the digits a DECIMAL quotient keeps (9 for a sum
    /// of scale 0 to 5), which arithmetic over the AVG uses (`AVG(a) * 3`
    /// of 1, 2, 10 is 12.999999999, shown 13.0000); the planner shows it
    /// rounded to `arg_scale + 4` where it leaves arithmetic. Where those
    /// digits do not fit, the mean rounded to `arg_scale + 4`.
    pub fn avg_exact(&self, arg_scale: u32) -> Value {
        let shown = arg_scale + 4;
        if self.n == 0 || self.lost {
            return self.avg(shown);
        }
        let digits = crate::expr::quotient_digits(arg_scale, 0).min(MAX_SCALE);
        let n = i128::from(self.n);
        let mean = if digits >= self.scale {
            self.units
                .checked_mul(pow10(digits - self.scale))
                .map(|u| u / n)
        } else {
            n.checked_mul(pow10(self.scale - digits))
                .map(|d| self.units / d)
        };
        match mean.map(|m| decimal(m, digits, shown)) {
            Some(v @ Value::Decimal(_)) => v,
            _ => self.avg(shown),
        }
    }
}

fn pow10(k: u32) -> i128 {
    10i128.pow(k)
}

/// `a / b` rounded half away from zero.
fn div_round(a: i128, b: i128) -> i128 {
    let (q, r) = (a / b, a % b);
    if r.unsigned_abs() * 2 >= b.unsigned_abs() {
        q + a.signum() * b.signum()
    } else {
        q
    }
}

/// `units * 10^-scale` as a DECIMAL shown with (at least) `want` decimals,
/// or the 1690 marker if a DECIMAL cannot hold it. If the value fits only
/// with fewer than `want` decimals it keeps as many as fit, as a DECIMAL
/// column does.
fn decimal(mut units: i128, mut scale: u32, want: u32) -> Value {
    while scale > 0 && units % 10 == 0 {
        units /= 10;
        scale -= 1;
    }
    match Decimal::try_from_i128_with_scale(units, scale) {
        Ok(mut d) => {
            if d.scale() < want {
                d.rescale(want);
            }
            Value::Decimal(d)
        }
        Err(_) => crate::expr::out_of_range_marker(OUT_OF_RANGE),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    fn shown(v: Value) -> String {
        match crate::expr::out_of_range_in(&v) {
            Some(m) => format!("error: {m}"),
            None => match v {
                Value::Decimal(d) => d.to_string(),
                Value::Null => "NULL".into(),
                other => panic!("not a sum: {other:?}"),
            },
        }
    }

    #[test]
    fn a_sum_past_the_decimal_range_is_an_error_until_it_comes_back() {
        let big = dec("50000000000000000000000000000");
        let mut s = ExactSum::new(0);
        s.add(big, 1);
        assert_eq!(shown(s.sum(0)), "50000000000000000000000000000");
        s.add(big, 1);
        s.add(dec("7"), 1);
        assert_eq!(shown(s.sum(0)), "error: DECIMAL value is out of range");
        assert_eq!(shown(s.avg(4)), "error: DECIMAL value is out of range");
        s.add(big, -1);
        assert_eq!(shown(s.sum(0)), "50000000000000000000000000007");
        // Its mean has 29 digits and a half: a DECIMAL cannot hold it.
        assert_eq!(shown(s.avg(4)), "error: DECIMAL value is out of range");
        s.add(big, -1);
        assert_eq!(shown(s.sum(0)), "7");
        assert_eq!(shown(s.avg(4)), "7.0000");
    }

    #[test]
    fn exact_avg_keeps_the_quotient_digits() {
        let mut s = ExactSum::new(0);
        for v in ["1", "2", "10"] {
            s.add(dec(v), 1);
        }
        assert_eq!(shown(s.avg_exact(0)), "4.333333333");
        let mut d = ExactSum::new(3);
        for v in ["1.500", "2.250", "3.125"] {
            d.add(dec(v), 1);
        }
        assert_eq!(shown(d.avg_exact(3)), "2.291666666");
        // A whole mean still shows the AVG's decimals.
        let mut w = ExactSum::new(0);
        w.add(dec("2"), 2);
        assert_eq!(shown(w.avg_exact(0)), "2.0000");
        assert_eq!(shown(ExactSum::new(0).avg_exact(0)), "NULL");
    }

    #[test]
    fn avg_rounds_half_away_from_zero() {
        let mut s = ExactSum::new(0);
        s.add(dec("2"), 1);
        s.add(dec("0"), 1);
        s.add(dec("0"), 1);
        assert_eq!(shown(s.avg(4)), "0.6667");
        s.add(dec("2"), -1);
        s.add(dec("-2"), 1);
        assert_eq!(shown(s.avg(4)), "-0.6667");
        let mut h = ExactSum::new(1);
        h.add(dec("0.1"), 1);
        h.add(dec("0.0"), 1);
        assert_eq!(shown(h.avg(1)), "0.1");
        assert_eq!(shown(h.avg(5)), "0.05000");
    }

    #[test]
    fn inputs_of_a_larger_scale_widen_the_sum() {
        let mut s = ExactSum::new(2);
        s.add(dec("1.25"), 1);
        s.add(dec("0.0001"), 1);
        assert_eq!(shown(s.sum(2)), "1.2501");
        s.add(dec("0.0001"), -1);
        assert_eq!(shown(s.sum(2)), "1.25");
    }

    #[test]
    fn a_sum_that_fits_only_with_fewer_decimals_keeps_its_digits() {
        let mut s = ExactSum::new(10);
        s.add(dec("100000000000000000000"), 1);
        s.add(dec("100000000000000000000"), 1);
        let Value::Decimal(d) = s.sum(10) else {
            panic!("a DECIMAL")
        };
        assert_eq!(d, dec("200000000000000000000"));
    }

    #[test]
    fn past_i128_the_sum_is_lost_until_no_input_is_left() {
        let max = Decimal::MAX;
        // At scale 28, MAX is 7.9e56 units.
        let mut wide = ExactSum::new(28);
        wide.add(max, 1);
        assert_eq!(shown(wide.sum(0)), "error: DECIMAL value is out of range");
        wide.add(max, -1);
        assert_eq!(shown(wide.sum(0)), "NULL");
        wide.add(dec("1"), 1);
        assert_eq!(shown(wide.sum(0)), "1");
    }
}
