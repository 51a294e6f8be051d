//! Hash maps and sets for the engine's hot paths: rows grouped by a key
//! during fills and joins, and operators' keyed state.
//!
//! They hash with foldhash instead of std's SipHash, which was about a
//! tenth of a cold fill's CPU (hashing `Value` keys, and rehashing them as
//! maps grow). foldhash is seeded per map from a per-process random seed,
//! so a client still cannot pick keys that collide in a known way.

/// [`std::collections::HashMap`] with foldhash; make one with `default()`
/// or `with_capacity_and_hasher(n, Default::default())`.
pub(crate) type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// [`std::collections::HashSet`] with foldhash.
pub(crate) type HashSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;
