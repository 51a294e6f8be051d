//! Which SQL the Lobsters pages issue.

use serde::Serialize;

/// Which SQL the pages issue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Variant {
    /// The app's hand-optimized SQL with denormalized counters kept up to
    /// date on every write.
    Original,
    /// No counters: a vote is one INSERT; reads aggregate.
    Natural,
}

impl Variant {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Original => "original",
            Variant::Natural => "natural",
        }
    }
}
