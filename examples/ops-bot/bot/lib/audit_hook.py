#!/usr/bin/env python3
"""audit hook: appends every event it is sent to $BDK_STATE_ROOT/audit.ndjson.

Long-lived: BDK starts it once and writes one event envelope per line on stdin
({"type", "index", "sessionId", "turnId"?, "at", "data"}); it runs until stdin closes.
Hooks only observe, so a line that is not a JSON object is reported on stderr and skipped.
"""
import json
import os
import sys


def main():
    root = os.environ.get("BDK_STATE_ROOT") or os.path.join(os.getcwd(), ".bdk")
    os.makedirs(root, exist_ok=True)
    path = os.path.join(root, "audit.ndjson")
    with open(path, "a", encoding="utf-8") as out:
        for line in sys.stdin:
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except ValueError as err:
                print(f"audit hook: skipped a line that is not JSON: {err}", file=sys.stderr, flush=True)
                continue
            if not isinstance(event, dict) or "type" not in event:
                print("audit hook: skipped a line that is not an event envelope", file=sys.stderr, flush=True)
                continue
            out.write(json.dumps(event, separators=(",", ":")) + "\n")
            out.flush()  # One line per event, on disk before the next one is read.


if __name__ == "__main__":
    main()
