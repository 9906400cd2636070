#!/usr/bin/env bash
# Instructions per turn of a `bdk serve` binary, counted by valgrind's callgrind: user-space
# instructions of every server thread, the same from run to run whatever else the machine does
# (unlike CPU time on a shared machine). Used to compare builds of the server (release
# profiles, code changes) where CPU figures drown in noise; see docs/decisions/0036-*.md.
#
#   scripts/instructions-per-turn.sh BDK [new|follow|tool|growth] [TURNS]
#
# new:    new-session text turns (POST /v1/session, its stream until session.waiting)
# follow: text follow-ups in one conversation
# tool:   follow-ups that call a persistent python3 tool (two model steps each)
# growth: TURNS follow-ups in one conversation (default 200); prints the first 20 and the
#         last 20 separately, and their ratio: what a longer conversation costs the host.
#
# Each kind runs 20 turns first (not counted), then TURNS more (default 100), against the serve
# benchmark's OpenAI-compatible stub. Needs valgrind and python3; state goes to a temp dir.
# With KEEP_CALLGRIND=DIR the counted dumps are copied there, for `callgrind_annotate`.
# Valgrind counts a `rep movsb` copy one instruction per byte, so a large `memcpy` weighs far
# more here than on the CPU; see docs/decisions/0038-*.md.
set -euo pipefail
bdk=$(realpath "${1:?usage: $0 BDK [new|follow|tool|growth] [TURNS]}")
kind=${2:-new}
default_turns=100
[ "$kind" = growth ] && default_turns=200
turns=${3:-$default_turns}
here=$(cd "$(dirname "$0")/.." && pwd)
command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 1; }

work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

python3 "$here/crates/bdk-cli/benches/serve_bench/stub.py" >"$work/stub.out" &
pids+=($!)
for _ in $(seq 100); do grep -q listening "$work/stub.out" 2>/dev/null && break; sleep 0.1; done
stub_port=$(sed -n 's/listening on //p' "$work/stub.out")

bot=$work/project/bot
mkdir -p "$bot/tools" "$bot/lib"
cat >"$bot/agent.toml" <<EOF
name = "bench"
max_running_turns = 64

[model]
id = "stub"
provider = "openai-compatible"
base_url = "http://127.0.0.1:$stub_port/v1"
EOF
echo "Answer briefly." >"$bot/instructions.md"
cat >"$bot/tools/warm.toml" <<'EOF'
description = "Counts words."
effect = "read"
command = ["python3", "lib/warm.py"]
persistent = true

[input_schema]
type = "object"
required = ["text"]
properties = { text = { type = "string" } }
EOF
cat >"$bot/lib/warm.py" <<'EOF'
import json, sys
for line in sys.stdin:
    request = json.loads(line)
    print(json.dumps({"id": request["id"], "result": {"words": len(request["input"]["text"].split())}}), flush=True)
EOF

valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.%p" "$bdk" serve --mode single --port 0 \
    --dir "$work/project" --state-root "$work/state" >"$work/serve.out" 2>"$work/valgrind.err" &
server=$!
pids+=("$server")
for _ in $(seq 600); do grep -q listening "$work/serve.out" 2>/dev/null && break; sleep 0.1; done
addr=$(sed -n 's#listening on http://##p' "$work/serve.out")
[ -n "$addr" ] || { echo "bdk serve did not start:" >&2; cat "$work/valgrind.err" >&2; exit 1; }

# Drives the turns; zeroes the counters before a counted window and dumps them after it.
python3 - "${addr%:*}" "${addr##*:}" "$server" "$kind" "$turns" <<'EOF'
import http.client, json, subprocess, sys

host, port, server, kind, turns = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
conn = http.client.HTTPConnection(host, port, timeout=600)

def post(path, body):
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    return json.loads(conn.getresponse().read())

def stream(session):
    follower = http.client.HTTPConnection(host, port, timeout=600)
    follower.request("GET", f"/v1/session/{session}/stream?startIndex=0")
    return follower, follower.getresponse()

def until_waiting(response):
    while b'"type":"session.waiting"' not in response.readline():
        pass

def callgrind(command):
    subprocess.run(["callgrind_control", command, server], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)

if kind == "new":
    windows = [(20, 20 + turns)]
else:
    windows = [(1, 21), (turns - 19, turns + 1)] if kind == "growth" else [(21, 21 + turns)]
last = windows[-1][1]
session = follower = response = token = None
for turn in range(last):
    if any(turn == start for start, _ in windows):
        callgrind("-z")
    if kind == "new":
        follower, response = stream(post("/v1/session", {"message": "hello"})["sessionId"])
        until_waiting(response)
        follower.close()
    elif turn == 0:
        started = post("/v1/session", {"message": "hello"})
        session, token = started["sessionId"], started["continuationToken"]
        follower, response = stream(session)
        until_waiting(response)
    else:
        message = "tool:warm go" if kind == "tool" else f"again {turn} " + "some words of a user message " * 4
        token = post(f"/v1/session/{session}", {"message": message, "continuationToken": token})["continuationToken"]
        until_waiting(response)
    if any(turn + 1 == end for _, end in windows):
        callgrind("-d")
EOF

# The dumps, in order: callgrind.<pid>.1, .2
totals=()
for n in 1 2; do
    dump=$work/callgrind.$server.$n
    [ -f "$dump" ] || continue
    totals+=("$(sed -n 's/^summary: //p; s/^totals: //p' "$dump" | head -1)")
    [ -n "${KEEP_CALLGRIND:-}" ] && mkdir -p "$KEEP_CALLGRIND" && cp "$dump" "$KEEP_CALLGRIND/$kind.$n"
done
if [ "$kind" = growth ]; then
    first=$((totals[0] / 20)) late=$((totals[1] / 20))
    echo "growth: follow-ups 1-20 $first, $((turns - 19))-$turns $late instructions per turn ($(python3 -c "print(f'{$late / $first:.2f}')")x)"
else
    echo "$kind: $((totals[0] / turns)) instructions per turn ($turns turns)"
fi
