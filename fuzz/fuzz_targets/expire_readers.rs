#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cryo_fuzz::expire_readers(data));
