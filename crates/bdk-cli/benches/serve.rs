//! `bdk serve` as a user sees it: new-session and follow-up turns, text and tool, through a
//! Rust client, Python's `http.client` and `curl` over loopback, against an OpenAI-compatible
//! stub process. See `serve_bench/mod.rs` for what is measured and how.
//!
//! `cargo bench -p bdk-cli --bench serve [-- --quick] [--memory] [--soak SECS] [--place DIR] [--bdk PATH] [--debounce MS]`
//! (state goes to the temp dir by default; `--place /dev/shm` shows the cost without fsync;
//! `--debounce MS` gives the agent `storage.toml`'s write debouncing, syncs at most every MS;
//! `--memory` runs only the memory parts; `--bdk` measures another build of the binary, such as one with another allocator or
//! release profile).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod serve_bench;

fn main() {
    let mut options = serve_bench::Options {
        bdk: env!("CARGO_BIN_EXE_bdk").into(),
        place: std::env::temp_dir(),
        quick: false,
        soak_secs: 0,
        memory_only: false,
        debounce_ms: 0,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--quick" => options.quick = true,
            "--memory" => options.memory_only = true,
            "--soak" => options.soak_secs = args.next().and_then(|a| a.parse().ok()).unwrap_or(600),
            "--place" => options.place = args.next().map(Into::into).unwrap_or(options.place),
            "--bdk" => options.bdk = args.next().map(Into::into).unwrap_or(options.bdk),
            "--debounce" => options.debounce_ms = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000),
            _ => {} // `--bench` and the like, from cargo
        }
    }
    serve_bench::run(&options);
}
