//! `KILL [CONNECTION | QUERY] id` (see [`crate::processes`]).

use sqlparser::tokenizer::Token;

use crate::error::{Result, ShimError, WireError};
use crate::exec::Engine;
use crate::output::Output;
use crate::session::Session;
use crate::tokens::word;

impl Engine {
    /// `KILL [CONNECTION | QUERY] id` (see [`crate::processes`]).
    pub(crate) fn kill(&self, s: &mut Session, t: &[Token]) -> Result<Output> {
        let (connection, from) = match word(t, 1).as_deref() {
            Some("QUERY") => (false, 2),
            Some("CONNECTION") => (true, 2),
            _ => (true, 1),
        };
        let text = crate::tokens::render_tokens(&t[from..]);
        let id = self
            .eval_constant(s, &crate::sqltext::parse_whole_expr(&text)?)?
            .as_i64()
            .and_then(|i| u64::try_from(i).ok())
            .ok_or_else(|| ShimError::WrongArguments("KILL".into()))?;
        let any = crate::privileges::has_global(self, s, crate::accounts::SUPER);
        let wire = |code, message| ShimError::Wire(WireError { code, message });
        match self.processes.kill(id, &s.user, any, connection) {
            Err(crate::processes::KillError::Unknown) => Err(wire(
                crate::error::ER_NO_SUCH_THREAD,
                format!("Unknown thread id: {id}"),
            )),
            Err(crate::processes::KillError::NotOwner) => Err(wire(
                crate::error::ER_KILL_DENIED,
                format!("You are not owner of thread {id}"),
            )),
            // Killing one's own connection answers as MariaDB does.
            Ok(()) if connection && id == u64::from(s.connection_id) => Err(wire(
                crate::error::ER_CONNECTION_KILLED,
                "Connection was killed".into(),
            )),
            Ok(()) => Ok(Output::ok()),
        }
    }
}
