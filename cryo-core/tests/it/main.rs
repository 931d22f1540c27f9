//! Integration tests, compiled into one binary to keep link time down.

mod bad_input;
mod catalogs;
mod common;
mod golden;
mod peers_scan;
mod pipeline;
mod render;
mod render_fixtures;
