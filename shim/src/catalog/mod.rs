//! Catalog statements answered by the shim: `SHOW ...` ([`show`]),
//! `DESCRIBE` ([`describe`]), and queries of the `information_schema`
//! virtual tables ([`information_schema`], [`virtual_select`]).

mod describe;
mod filter;
mod information_schema;
mod show;
mod virtual_select;

pub use describe::describe;
pub use information_schema::is_information_schema_query;
pub use show::show;
pub use virtual_select::information_schema_select;
