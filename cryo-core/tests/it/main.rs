//! Integration tests, compiled into one binary to keep link time down.

mod catalogs;
mod common;
mod peers_scan;
mod pipeline;
