//! `SET`: session and user variables, and global variables (`SET GLOBAL`
//! changes `@@global.x` and the sessions that start after it).

use ladle_common::Value;
use sqlparser::ast::{self, Expr};

use crate::error::{Result, ShimError, WireError};
use crate::exec::Engine;
use crate::session::Session;
use crate::transaction::{isolation_level_name, set_next_isolation, set_session_isolation};
use crate::vars::ReadConsistency;

fn full_name(name: &ast::ObjectName) -> String {
    let parts: Vec<String> = name.0.iter().map(|i| i.value.clone()).collect();
    parts.join(".")
}

fn user_variable(full: &str) -> Option<&str> {
    full.strip_prefix('@').filter(|u| !u.starts_with('@'))
}

impl Engine {
    pub(crate) fn set_variable(
        &self,
        s: &mut Session,
        name: &ast::ObjectName,
        value: &Expr,
    ) -> Result<()> {
        let v = self.variable_value(s, name, value)?;
        self.assign_variable(s, name, v)
    }

    /// The value `SET name = value` assigns, evaluated now (a SET of
    /// several assignments evaluates every value before it assigns any).
    pub(crate) fn variable_value(
        &self,
        s: &Session,
        name: &ast::ObjectName,
        value: &Expr,
    ) -> Result<Value> {
        match value {
            // SET x = ON / OFF / DEFAULT / an identifier value.
            Expr::Identifier(id)
                if !id.value.starts_with('@') && user_variable(&full_name(name)).is_none() =>
            {
                Ok(Value::text(id.value.clone()))
            }
            other => self.eval_constant(s, other),
        }
    }

    /// Assigns `v` (from [`Self::variable_value`]) to variable `name`.
    pub(crate) fn assign_variable(
        &self,
        s: &mut Session,
        name: &ast::ObjectName,
        v: Value,
    ) -> Result<()> {
        let full = full_name(name);
        if let Some(u) = user_variable(&full) {
            s.user_variables.insert(u.to_ascii_lowercase(), v);
            return Ok(());
        }
        let mut var = full.trim_start_matches("@@").to_ascii_lowercase();
        for scope in ["session.", "global.", "local."] {
            if let Some(rest) = var.strip_prefix(scope) {
                var = rest.to_string();
            }
        }
        let global = full.to_ascii_lowercase().starts_with("@@global.");
        if crate::vars::SECURITY_VARIABLES.contains(&var.as_str()) {
            return self.set_security_variable(&var, &v, global);
        }
        if global && crate::vars::SESSION_ONLY_VARIABLES.contains(&var.as_str()) {
            return Err(ShimError::Wire(WireError {
                code: crate::error::ER_LOCAL_VARIABLE,
                message: format!(
                    "Variable '{var}' is a SESSION variable and can't be used with SET GLOBAL"
                ),
            }));
        }
        if var == "autocommit" {
            return self.set_autocommit(s, &v, global);
        }
        if var == "transaction_isolation" || var == "tx_isolation" {
            let level = match &v {
                Value::Text(t) if t.eq_ignore_ascii_case("DEFAULT") => "READ-COMMITTED",
                Value::Text(t) => isolation_level_name(t)?,
                other => return Err(ShimError::WrongValueForVar(var, other.to_string())),
            };
            // `SET @@transaction_isolation` without a scope is for the next
            // transaction only (MySQL's special case); the session keeps
            // its level.
            let next_only = full.starts_with("@@") && !full.contains('.');
            if global {
                let level = Some(Value::text(level));
                self.facts
                    .globals
                    .set("transaction_isolation", level.clone());
                self.facts.globals.set("tx_isolation", level);
            } else if next_only {
                set_next_isolation(s, level)?;
            } else {
                set_session_isolation(s, level);
            }
            return Ok(());
        }
        if var == ReadConsistency::VARIABLE {
            if let Value::Text(t) = &v {
                if let Some(c) = ReadConsistency::parse(t) {
                    if global {
                        self.facts.globals.set(&var, Some(Value::text(c.as_str())));
                    } else {
                        s.variables.insert(var, Value::text(c.as_str()));
                    }
                    return Ok(());
                }
            }
            if !matches!(&v, Value::Text(t) if t.eq_ignore_ascii_case("DEFAULT")) {
                let shown = v.to_string();
                return Err(ShimError::WrongValueForVar(var, shown));
            }
        }
        if var == "timestamp" && !global {
            let default = matches!(&v, Value::Text(t) if t.eq_ignore_ascii_case("DEFAULT"));
            let setting = if default {
                None
            } else {
                crate::vars::timestamp_setting(&v).ok_or_else(|| {
                    ShimError::Wire(WireError {
                        code: crate::error::ER_WRONG_TYPE_FOR_VAR,
                        message: format!("Incorrect argument type to variable '{var}'"),
                    })
                })?
            };
            match setting {
                Some(secs) => s.variables.insert(var, secs),
                None => s.variables.remove(&var),
            };
            return Ok(());
        }
        if var == "cte_max_recursion_depth" {
            return self.set_cte_max_recursion_depth(s, v, global);
        }
        let v = match v {
            Value::Text(t) if t.eq_ignore_ascii_case("DEFAULT") => {
                if global {
                    self.facts.globals.set(&var, None);
                } else {
                    s.variables.remove(&var);
                }
                return Ok(());
            }
            other => other,
        };
        if let Some(&(_, low, high)) = crate::vars::SESSION_TIMEOUTS.iter().find(|t| t.0 == var) {
            // Whole seconds, clamped to the variable's range as MySQL does.
            let secs = match &v {
                Value::Int(i) => i128::from(*i),
                Value::UInt(u) => i128::from(*u),
                other => return Err(ShimError::WrongValueForVar(var, other.to_string())),
            };
            let secs = secs.clamp(i128::from(low), i128::from(high)) as i64;
            if global {
                self.facts.globals.set(&var, Some(Value::Int(secs)));
            } else {
                s.variables.insert(var, Value::Int(secs));
            }
            return Ok(());
        }
        if var == "connect_timeout" {
            return Err(ShimError::ReadOnlyVariable(var));
        }
        let v = if var == "sql_mode" {
            crate::sql_mode::canonical_sql_mode(&v)?
        } else {
            v
        };
        if global {
            // `@@global.x` and the sessions that start from now on; this
            // one keeps its value (MySQL's).
            self.facts.globals.set(&var, Some(v));
        } else {
            s.variables.insert(var, v);
        }
        Ok(())
    }

    /// `SET [GLOBAL] autocommit = v`: enabling it commits the open
    /// transaction; disabling it opens one.
    fn set_autocommit(&self, s: &mut Session, v: &Value, global: bool) -> Result<()> {
        let var = "autocommit";
        let on = match v {
            Value::Text(t) => match t.to_ascii_uppercase().as_str() {
                "ON" | "1" | "TRUE" => true,
                "OFF" | "0" | "FALSE" => false,
                "DEFAULT" if global => true,
                _ => return Err(ShimError::WrongValueForVar(var.into(), t.to_string())),
            },
            other => crate::vars::truth(other)
                .ok_or_else(|| ShimError::WrongValueForVar(var.into(), "NULL".into()))?,
        };
        if global {
            // For the sessions that start from now on.
            let globals = &self.facts.globals;
            globals.set(var, (!on).then_some(Value::Int(0)));
            return Ok(());
        }
        if on && !s.autocommit {
            // Enabling autocommit commits the open transaction.
            s.autocommit = true;
            self.commit(s)?;
            s.transaction = None;
        } else if !on && s.autocommit {
            s.autocommit = false;
            if s.transaction.is_none() {
                s.begin_transaction();
            }
        }
        Ok(())
    }

    /// `SET [GLOBAL|SESSION] cte_max_recursion_depth = n`: clamped to
    /// 0..=4294967295 as MySQL does; DEFAULT is the global value for the
    /// session, 1000 for the global.
    fn set_cte_max_recursion_depth(&self, s: &mut Session, v: Value, global: bool) -> Result<()> {
        let var = "cte_max_recursion_depth";
        let max = crate::vars::MAX_CTE_MAX_RECURSION_DEPTH;
        let n = match &v {
            Value::Int(i) => (*i).clamp(0, max as i64) as u64,
            Value::UInt(u) => (*u).min(max),
            Value::Text(t) if t.eq_ignore_ascii_case("DEFAULT") => {
                if !global {
                    s.variables.remove(var);
                    return Ok(());
                }
                crate::vars::DEFAULT_CTE_MAX_RECURSION_DEPTH
            }
            other => return Err(ShimError::WrongValueForVar(var.into(), other.to_string())),
        };
        if global {
            let g = &self.facts.globals.cte_max_recursion_depth;
            g.store(n, std::sync::atomic::Ordering::SeqCst);
        } else {
            s.variables.insert(var.into(), Value::UInt(n));
        }
        Ok(())
    }

    /// Evaluates an expression that refers to no table.
    /// `SET GLOBAL require_secure_transport | max_connect_errors |
    /// max_prepared_stmt_count = v`
    /// (SUPER was checked with the statement; see [`crate::privileges`]).
    fn set_security_variable(&self, var: &str, v: &Value, global: bool) -> Result<()> {
        use std::sync::atomic::Ordering::SeqCst;
        if !global {
            return Err(ShimError::Wire(WireError {
                code: crate::error::ER_GLOBAL_VARIABLE,
                message: format!(
                    "Variable '{var}' is a GLOBAL variable and should be set with SET GLOBAL"
                ),
            }));
        }
        let wrong = || ShimError::WrongValueForVar(var.to_string(), v.to_string());
        let g = &self.facts.security;
        if var == "require_secure_transport" {
            let on = match v {
                Value::Text(t) => match t.to_ascii_uppercase().as_str() {
                    "ON" | "TRUE" | "1" => true,
                    "OFF" | "FALSE" | "0" | "DEFAULT" => false,
                    _ => return Err(wrong()),
                },
                other => crate::vars::truth(other).ok_or_else(wrong)?,
            };
            g.require_secure_transport.store(on, SeqCst);
        } else {
            let (default, min, max, target) = if var == "max_prepared_stmt_count" {
                (
                    crate::vars::MAX_PREPARED_STMT_COUNT_DEFAULT,
                    0,
                    1_048_576,
                    &g.max_prepared_stmt_count,
                )
            } else {
                (100, 1, u64::MAX, &g.max_connect_errors)
            };
            let n = match v {
                Value::Int(i) => u64::try_from(*i).map_err(|_| wrong())?,
                Value::UInt(u) => *u,
                Value::Text(t) if t.eq_ignore_ascii_case("DEFAULT") => default,
                _ => return Err(wrong()),
            };
            // Out-of-range values are clamped, as MySQL does.
            target.store(n.clamp(min, max), SeqCst);
        }
        Ok(())
    }
}
