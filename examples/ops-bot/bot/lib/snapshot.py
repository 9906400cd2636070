#!/usr/bin/env python3
"""status-snapshot schedule: records every service's status, every 15 minutes.

Run by schedules/status-snapshot.toml (no model turn). Stdin may hold {"input": ..., "context": ...}
or nothing; it is not needed. Appends one line to $BDK_STATE_ROOT/status-history.ndjson and
prints a short JSON summary of what changed since the previous snapshot.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ops  # noqa: E402  (lib/ops.py)

HISTORY = "status-history.ndjson"


def previous_statuses():
    path = os.path.join(ops.state_root(), HISTORY)
    last = None
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    last = line
    try:
        return json.loads(last)["statuses"] if last else {}
    except (ValueError, KeyError, TypeError):
        return {}


def main():
    ops.read_request(required=False)
    try:
        services = ops.load_services()
    except ops.OpsError as err:
        ops.fail(f"status-snapshot: {err}")
    statuses = {s["service"]: s.get("status", "unknown") for s in services}
    before = previous_statuses()
    changed = {
        name: {"from": before.get(name), "to": status}
        for name, status in statuses.items()
        if before and before.get(name) != status
    }
    ops.append_ndjson(HISTORY, {"at": ops.iso(ops.now()), "statuses": statuses})
    ops.reply(
        {
            "first_snapshot": not before,
            "services": len(statuses),
            "unhealthy": sorted(name for name, status in statuses.items() if status != "healthy"),
            "changed": changed,
        }
    )


if __name__ == "__main__":
    main()
