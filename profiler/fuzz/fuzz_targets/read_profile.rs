//! Any bytes given to the profile reader, and whatever it reads from them given to the analysis
//! and every export: nothing may panic.
//!
//!     cd profiler/fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run read_profile -- -max_total_time=60
//!
//! Random bytes rarely get past a record's checksum, so the bytes are also read as payloads (each
//! after a length byte) framed with valid checksums, which reach the record decoder. What CI runs
//! is `profiler/tests/crafted_records.rs`: arbitrary records through the reader, the analysis and
//! every export, for a fixed number of cases.

#![no_main]

use libfuzzer_sys::fuzz_target;
use xlaprof_profiler::export::{self, Format};
use xlaprof_profiler::{analyze, file, Profile, Thresholds};

/// `data` as payloads, each after a length byte, framed as a writer frames records.
fn checksummed(mut data: &[u8]) -> Vec<u8> {
    let mut out = file::header();
    while let Some((&len, rest)) = data.split_first() {
        let (payload, rest) = rest.split_at((len as usize).min(rest.len()));
        out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
        out.extend_from_slice(payload);
        data = rest;
    }
    out
}

fuzz_target!(|data: &[u8]| {
    // With and without a valid header, and with valid checksums, so the fuzzer reaches the
    // records quickly.
    let mut framed = file::header();
    framed.extend_from_slice(data);
    let checksummed = checksummed(data);
    for bytes in [data, framed.as_slice(), checksummed.as_slice()] {
        if let Ok(decoded) = file::decode(bytes) {
            let profile = Profile::from_records(decoded.records);
            let analysis = analyze(&profile, &Thresholds::default());
            use Format::*;
            for format in [Text, Short, Json, Chrome, Folded, Flamegraph] {
                let _ = export::to_bytes(&profile, &analysis, format);
            }
        }
    }
});
