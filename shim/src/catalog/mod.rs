//! Catalog statements answered by the shim: `SHOW ...` ([`show`]),
//! `DESCRIBE` ([`describe`]), and queries of the `information_schema`
//! virtual tables ([`information_schema`]).

mod describe;
mod filter;
mod information_schema;
mod show;

pub use describe::describe;
pub use information_schema::{information_schema_select, is_information_schema_query};
pub use show::show;
