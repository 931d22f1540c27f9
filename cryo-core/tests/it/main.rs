//! Integration tests, compiled into one binary to keep link time down.

mod common;
mod peers_scan;
mod pipeline;
