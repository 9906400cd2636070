//! The serve benchmark's quick mode runs in the suite (on the debug binary): every part of it
//! works end to end (the stub, the three clients, tool turns, the counters it reads). It checks
//! that the figures were measured, never what they are.

#[path = "../../benches/serve_bench/mod.rs"]
mod serve_bench;

#[test]
fn the_serve_benchmark_runs_in_quick_mode() {
    let options = serve_bench::Options {
        bdk: env!("CARGO_BIN_EXE_bdk").into(),
        place: std::env::temp_dir(),
        quick: true,
        soak_secs: 0,
        memory_only: false,
        debounce_ms: 0,
    };
    let summary = serve_bench::run(&options);
    assert!(summary.text_turns > 30, "{:#?}", summary.lines);
    assert_eq!(summary.tool_turns, 6, "{:#?}", summary.lines);
    assert!(summary.rss_idle_kib > 0, "{:#?}", summary.lines);
    assert!(summary.cpu_ms_per_text_turn >= 0.0 && summary.followup_ratio > 0.0, "{:#?}", summary.lines);
    for part in [
        "stub alone",
        "python3 http.client (keepalive)",
        "1 clients",
        "32 clients",
        "one conversation",
        "made by a tool turn",
    ] {
        assert!(summary.lines.iter().any(|l| l.contains(part)), "no `{part}` in {:#?}", summary.lines);
    }
}
