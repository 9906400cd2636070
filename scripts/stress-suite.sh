#!/usr/bin/env bash
# Stress mode: the whole test suite, ROUNDS times in a row (default 5), while a second full copy
# of the suite runs beside it on the same cores, as on a loaded CI machine. A test that depends
# on a wall-clock window, or waits without a timeout, shows up here as a failure or a hang.
#
#   scripts/stress-suite.sh [ROUNDS]
#
# It builds the test binaries once, then runs each binary directly (from its package folder,
# as `cargo test` does) in two loops: the measured loop and the load loop. Exit 0 only when
# every round of the measured loop passed. Logs: target/stress/round-N.log and load.log.
set -uo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-5}"
out="target/stress"
mkdir -p "$out"

echo "building the test binaries..."
cargo test --workspace --locked --no-run --message-format=json 2>"$out/build.log" \
    | python3 -c '
import json, os, sys
for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    if msg.get("reason") == "compiler-artifact" and msg.get("executable") and msg["profile"]["test"]:
        print(os.path.dirname(msg["manifest_path"]) + "\t" + msg["executable"])
' > "$out/binaries.tsv" || { echo "build failed: $out/build.log"; exit 1; }
echo "$(wc -l < "$out/binaries.tsv") test binaries"

# One full pass of the suite; returns non-zero when any binary failed.
suite() {
    local log="$1" status=0
    while IFS=$'\t' read -r dir exe; do
        (cd "$dir" && "$exe" --quiet) >>"$log" 2>&1 || { echo "FAILED: $exe" >>"$log"; status=1; }
    done < "$out/binaries.tsv"
    return $status
}

: > "$out/load.log"
( while :; do suite "$out/load.log" || true; done ) &
load=$!
trap 'kill $load 2>/dev/null; pkill -P $load 2>/dev/null' EXIT

failed=0
for round in $(seq 1 "$rounds"); do
    log="$out/round-$round.log"
    : > "$log"
    start=$(date +%s)
    if suite "$log"; then
        echo "round $round: passed in $(( $(date +%s) - start ))s"
    else
        echo "round $round: FAILED in $(( $(date +%s) - start ))s (see $log)"
        grep -E "^FAILED|panicked|^test .* FAILED" "$log" | head -20
        failed=1
    fi
done
exit $failed
