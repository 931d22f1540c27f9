#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cryo_fuzz::table_metadata(cryo_fuzz::lake(), data));
