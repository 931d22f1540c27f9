#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cryo_fuzz::manifest(cryo_fuzz::lake(), data));
