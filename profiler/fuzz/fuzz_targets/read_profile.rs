//! Any bytes given to the profile reader, and whatever it reads from them given to the analysis
//! and every export: nothing may panic.
//!
//!     cd profiler/fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run read_profile -- -max_total_time=60

#![no_main]

use libfuzzer_sys::fuzz_target;
use xlaprof_profiler::export::{self, Format};
use xlaprof_profiler::{analyze, file, Profile, Thresholds};

fuzz_target!(|data: &[u8]| {
    // With and without a valid header, so the fuzzer reaches the records quickly.
    let mut framed = file::header();
    framed.extend_from_slice(data);
    for bytes in [data, framed.as_slice()] {
        if let Ok(decoded) = file::decode(bytes) {
            let profile = Profile::from_records(decoded.records);
            let analysis = analyze(&profile, &Thresholds::default());
            for format in [Format::Text, Format::Json, Format::Chrome, Format::Folded] {
                let _ = export::to_bytes(&profile, &analysis, format);
            }
        }
    }
});
