#![no_main]

// Raw bytes (decoded with `arbitrary` inside the body), so corpus files replay on stable too.
libfuzzer_sys::fuzz_target!(|data: &[u8]| cryo_fuzz::grade_plan(data));
