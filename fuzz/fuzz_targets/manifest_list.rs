#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cryo_fuzz::manifest_list(cryo_fuzz::lake(), data));
