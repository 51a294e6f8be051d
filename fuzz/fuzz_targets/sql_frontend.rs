//! The SQL front end: any text as one client statement (parse, plan,
//! compile its view, execute against seeded tables). Seeded from the
//! sqllogictest corpus (`fuzz/seed-corpus.sh`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(sql) = std::str::from_utf8(data) {
        ladle_fuzz::run_sql(sql);
    }
});
