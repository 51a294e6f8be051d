//! Routing and typing of the JSON functions; `expr::json` evaluates them.

use ladle_common::{SqlType, Value};

use super::Func;
use crate::expr::error::EvalResult;
use crate::expr::json;

/// The JSON functions over their evaluated arguments `vals` (`v0` the
/// first).
pub(super) fn call(f: Func, vals: &[Value], v0: Value) -> EvalResult {
    use Func::*;
    Ok(match f {
        JsonExtract => json::extract(vals)?,
        JsonUnquote => json::unquote(&v0),
        JsonContains => json::contains_fn(vals)?,
        JsonContainsPath => json::contains_path(vals)?,
        JsonType => json::type_of(&v0),
        JsonValid => json::valid(&v0),
        JsonLength => json::length(vals)?,
        JsonKeys => json::keys(vals)?,
        JsonDepth => json::depth(&v0),
        _ => unreachable!("{f:?} is not a JSON function"),
    })
}

/// The result types of the JSON functions.
pub(super) fn result_type(f: Func) -> (SqlType, bool) {
    use Func::*;
    match f {
        JsonExtract | JsonUnquote | JsonKeys => (SqlType::Text(u32::MAX), true),
        JsonContains | JsonContainsPath | JsonValid | JsonLength | JsonDepth => (
            SqlType::Int {
                bytes: 4,
                unsigned: false,
                display_width: None,
            },
            true,
        ),
        JsonType => (SqlType::VarChar(16), true),
        _ => unreachable!("{f:?} is not a JSON function"),
    }
}
