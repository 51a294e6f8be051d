//! Account statements on a cluster node: each account list stored here
//! goes to replicas as a record written in the list's own batch (a crash
//! keeps both or neither), and a replica installs the primary's lists the
//! same way. The statements themselves are in
//! [`crate::account_statements`]; the list in [`crate::accounts`].

use crate::account_statements::statement;
use crate::accounts::{Account, ListRecord};
use crate::error::ShimError;
use crate::exec::SchemaLog;
use crate::output::Output;
use crate::session::Session;

impl crate::exec::Engine {
    /// On a cluster node, inside the fence that keeps every write out: runs
    /// an account statement that changes accounts and records the account
    /// list after it for replicas. A list the statement stored was written
    /// in one batch with its record ([`Self::update_accounts`]), so a
    /// crash keeps both or neither; an unchanged list (`CREATE USER IF NOT
    /// EXISTS` of an existing user) is recorded alone. A statement that
    /// failed after storing its list (trailing words are refused only
    /// then) has it recorded too: replicas must hold what this node holds.
    pub(crate) fn recorded_account_statement(
        &self,
        s: &mut Session,
        sql: &str,
        log: &dyn SchemaLog,
    ) -> Result<Output, ShimError> {
        let before = self.accounts.encoded()?;
        let out = statement(self, s, sql);
        let after = self.accounts.encoded()?;
        let stored = after != before;
        if out.is_ok() || stored {
            log.record_accounts(&after, stored);
        }
        out
    }

    /// On a cluster replica: installs the primary's account list (sent
    /// after each account statement there) and records it for this
    /// node's own replicas, between the same two LSNs, in the batch that
    /// stores it.
    pub fn install_replicated_accounts(&self, state: &str) -> Result<(), String> {
        self.storage.fenced(|| {
            let record = self.list_record();
            self.accounts
                .install(
                    &self.storage,
                    record.as_ref().map(|r| r as ListRecord),
                    state,
                )
                .map_err(|e| e.to_string())?;
            if let Some(log) = self.schema_log.get() {
                log.record_accounts(&self.accounts.encoded().map_err(|e| e.to_string())?, true);
            }
            Ok(())
        })
    }

    /// [`Accounts::update`](crate::accounts::Accounts::update); on a
    /// cluster node (where account statements run inside the schema
    /// fence, [`Self::recorded_account_statement`]) the batch that
    /// stores the new list also writes its record for replicas.
    pub(crate) fn update_accounts<T>(
        &self,
        change: impl FnOnce(&mut Vec<Account>) -> Result<T, ShimError>,
    ) -> Result<T, ShimError> {
        let record = self.list_record();
        self.accounts.update(
            &self.storage,
            record.as_ref().map(|r| r as ListRecord),
            change,
        )
    }

    /// A cluster node's [`ListRecord`]: its schema log's record of a list.
    fn list_record(&self) -> Option<impl Fn(&str) -> Option<(String, Vec<u8>)> + '_> {
        let log = self.schema_log.get()?;
        Some(move |state: &str| log.prepare_accounts(state))
    }
}
