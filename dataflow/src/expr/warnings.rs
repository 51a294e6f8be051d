//! The warnings and notes evaluation raises (what SHOW WARNINGS lists),
//! kept per thread until the statement takes them.

/// MySQL's ER_WARN_ALLOWED_PACKET_OVERFLOWED: a string function's result
/// past `max_allowed_packet` is NULL with this warning.
pub const WARN_ALLOWED_PACKET_OVERFLOWED: u16 = 1301;
/// MySQL's ER_DATETIME_FUNCTION_OVERFLOW: DATE_ADD past the calendar's range.
pub const WARN_DATETIME_FUNCTION_OVERFLOW: u16 = 1441;

/// How many warnings one thread keeps until [`take_warnings`] (MySQL's
/// default `max_error_count` is 64); evaluation on threads nobody drains
/// (view maintenance) cannot grow it past this.
const MAX_WARNINGS: usize = 64;

/// MySQL's ER_WRONG_VALUE_FOR_TYPE: STR_TO_DATE of a string its format
/// does not read.
pub const WARN_WRONG_VALUE_FOR_FUNCTION: u16 = 1411;

/// MySQL's ER_TRUNCATED_WRONG_VALUE: a string read as a number, a date or
/// a time only in part (`'1abc' = 1`, `'2020-01-01x'`).
pub const WARN_TRUNCATED_WRONG_VALUE: u16 = 1292;

/// MySQL's ER_DIVISION_BY_ZERO: `/`, DIV or MOD by zero is NULL with this
/// warning (reported only under `sql_mode` ERROR_FOR_DIVISION_BY_ZERO).
pub const WARN_DIVISION_BY_ZERO: u16 = 1365;

/// MySQL's ER_INVALID_CHARACTER_STRING: bytes cast to a character set
/// they are not valid in (each bad byte became `?`).
pub const WARN_INVALID_CHARACTER_STRING: u16 = 1300;

/// One condition raised by evaluation: level (`Warning` or `Note`), MySQL
/// code, message, as SHOW WARNINGS lists it.
pub type EvalWarning = (&'static str, u16, String);

thread_local! {
    static WARNINGS: std::cell::RefCell<Vec<EvalWarning>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

thread_local! {
    /// Inside [`constants_warn_once`]: the constant operands (by address)
    /// whose comparison has warned already.
    static WARNED_CONSTANTS: std::cell::RefCell<Option<Vec<usize>>> =
        const { std::cell::RefCell::new(None) };
}

/// Runs `f`, a statement's evaluation of expressions it compiled once
/// over many rows (an UPDATE's or DELETE's WHERE), so that comparing a
/// constant with each row's value warns about the constant's conversion
/// once ([`once_per_constant`]): MariaDB converts the constant when it
/// first compares it and keeps the result (`UPDATE IGNORE t ... WHERE n =
/// 'x'` warns once, not once per row).
pub fn constants_warn_once<T>(f: impl FnOnce() -> T) -> T {
    /// Restores the enclosing scope also when `f` panics (a caught panic
    /// must not leave stale constant addresses on this thread).
    struct Restore(Option<Vec<usize>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let outer = self.0.take();
            WARNED_CONSTANTS.with(|w| *w.borrow_mut() = outer);
        }
    }
    let _restore = Restore(WARNED_CONSTANTS.with(|w| w.replace(Some(Vec::new()))));
    f()
}

/// Runs `f`, a comparison with the constant at address `constant`: inside
/// [`constants_warn_once`], the warnings it raises are kept only the first
/// time one does for that constant.
pub(crate) fn once_per_constant<T>(constant: usize, f: impl FnOnce() -> T) -> T {
    let scoped =
        WARNED_CONSTANTS.with(|w| w.borrow().as_ref().map(|seen| seen.contains(&constant)));
    let Some(warned) = scoped else {
        return f();
    };
    let before = WARNINGS.with(|w| w.borrow().len());
    let out = f();
    WARNINGS.with(|w| {
        let mut w = w.borrow_mut();
        if w.len() > before {
            if warned {
                w.truncate(before);
            } else {
                WARNED_CONSTANTS.with(|c| {
                    if let Some(seen) = c.borrow_mut().as_mut() {
                        seen.push(constant);
                    }
                });
            }
        }
    });
    out
}

/// Records a warning raised while evaluating on this thread.
pub(crate) fn warn(code: u16, message: String) {
    raise("Warning", code, message);
}

/// Records a note (a lesser warning: `'1 ' = 1` ignores only spaces).
pub(crate) fn note(code: u16, message: String) {
    raise("Note", code, message);
}

fn raise(level: &'static str, code: u16, message: String) {
    WARNINGS.with(|w| {
        let mut w = w.borrow_mut();
        if w.len() < MAX_WARNINGS {
            w.push((level, code, message));
        }
    });
}

/// The warnings (MySQL code, message) raised by evaluation on this thread
/// since the last call. A statement runs evaluation on its own thread when
/// it needs no view (SELECT without FROM, UPDATE/INSERT expressions, a
/// read's parameters); a view's rows are computed when it is written, so
/// their warnings are not reported (see [`without_warnings`]).
pub fn take_warnings() -> Vec<EvalWarning> {
    WARNINGS.with(|w| std::mem::take(&mut *w.borrow_mut()))
}

/// Runs `f`, dropping the warnings its evaluation raises on this thread
/// (those raised before are kept). For computing a view's rows on a
/// reading statement's thread (a cold fill, a transaction's overlay read):
/// a warm read of the same view computes nothing and so raises nothing,
/// and a statement's warnings must not depend on whether its view was
/// cached. (MariaDB evaluates every row per statement and warns each
/// time; matching that would need every view to keep, per row and group,
/// the warnings computing it raised, including for rows its filters
/// dropped.)
pub(crate) fn without_warnings<T>(f: impl FnOnce() -> T) -> T {
    let before = take_warnings();
    let out = f();
    WARNINGS.with(|w| *w.borrow_mut() = before);
    out
}

/// Runs `f`, returning beside its result the warnings its evaluation
/// raised on this thread. They stay listed for the statement, after those
/// raised before. (A strict INSERT's RETURNING fails on one, as MariaDB's
/// does, though its evaluation may run on the write's thread.)
pub fn raised_by<T>(f: impl FnOnce() -> T) -> (T, Vec<EvalWarning>) {
    let before = take_warnings();
    let out = f();
    let raised = take_warnings();
    WARNINGS.with(|w| {
        let mut w = w.borrow_mut();
        *w = before;
        w.extend(raised.iter().cloned());
        w.truncate(MAX_WARNINGS);
    });
    (out, raised)
}
