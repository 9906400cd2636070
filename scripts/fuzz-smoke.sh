#!/usr/bin/env bash
# Fuzz smoke: builds every cargo-fuzz target in fuzz/ and runs each for SECONDS (default 20)
# from the seed corpus kept in the repo (fuzz/corpus/<target>, only read; what the run finds
# goes to target/fuzz/corpus/<target>). Exits 1 when a target crashes (cargo-fuzz saves the
# input under fuzz/artifacts/<target>/ and prints how to reproduce it), 77 (a loud skip) when
# no nightly toolchain is installed or cargo-fuzz cannot be installed.
#
#   scripts/fuzz-smoke.sh          # every target, 20 s each
#   scripts/fuzz-smoke.sh 300 sse  # one target for five minutes
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_EACH=${1:-20}
shift || true
CARGO_FUZZ_VERSION=0.13.1
TOOLS=$PWD/target/tools

if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "*** SKIPPED fuzz smoke: no nightly toolchain (rustup toolchain install nightly)" >&2
    exit 77
fi
if ! "$TOOLS/bin/cargo-fuzz" --version 2>/dev/null | grep -q " $CARGO_FUZZ_VERSION"; then
    echo "fuzz smoke: installing cargo-fuzz $CARGO_FUZZ_VERSION into $TOOLS" >&2
    if ! cargo install --quiet --root "$TOOLS" cargo-fuzz --version "=$CARGO_FUZZ_VERSION" --locked; then
        echo "*** SKIPPED fuzz smoke: cargo-fuzz $CARGO_FUZZ_VERSION could not be installed" >&2
        exit 77
    fi
fi
export PATH="$TOOLS/bin:$PATH"

cd fuzz
if [ "$#" -gt 0 ]; then targets=("$@"); else mapfile -t targets < <(cargo +nightly fuzz list); fi
for target in "${targets[@]}"; do
    cargo +nightly fuzz build "$target"
done
failed=()
for target in "${targets[@]}"; do
    out=../target/fuzz/corpus/$target
    mkdir -p "$out" "corpus/$target"
    echo "fuzz smoke: $target for ${SECONDS_EACH}s" >&2
    if ! cargo +nightly fuzz run "$target" "$out" "corpus/$target" -- \
        -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1; then
        failed+=("$target")
    fi
done
if [ "${#failed[@]}" -gt 0 ]; then
    echo "fuzz smoke: FAILED: ${failed[*]} (crashing inputs under fuzz/artifacts/)" >&2
    exit 1
fi
echo "fuzz smoke: ${#targets[@]} targets ran ${SECONDS_EACH}s each without a crash" >&2
