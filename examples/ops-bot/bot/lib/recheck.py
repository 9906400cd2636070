#!/usr/bin/env python3
"""recheck reminder handler: on each tick, looks at a service again and decides whether to wake
the conversation that set the reminder.

Reads {"input": {"service": ..., "incident"?: ...}, "context": {...}} on stdin; `input` holds the
args the reminder was created with. Prints one of:
  {"action": "delivered", "followup": {"message": ...}}  still unhealthy: wake the conversation
  {"action": "stop", "reason": ...}                      healthy again (or unknown): disarm
  {"action": "skip", "reason": ...}                      the status source is down: try next tick
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ops  # noqa: E402  (lib/ops.py)


def main():
    args, _ = ops.read_request()
    name = args.get("service")
    if not name:
        ops.reply({"action": "stop", "reason": "the reminder has no `service` argument"})
        return
    try:
        entry = ops.find_service(ops.load_services(), name)
    except ops.OpsError as err:
        ops.reply({"action": "skip", "reason": str(err)})
        return
    if entry is None:
        ops.reply({"action": "stop", "reason": f"no service named `{name}`"})
        return
    if entry.get("status") == "healthy":
        ops.reply({"action": "stop", "reason": f"{name} is healthy again"})
        return
    incident = f" (incident {args['incident']})" if args.get("incident") else ""
    ops.reply(
        {
            "action": "delivered",
            "followup": {
                "message": (
                    f"Re-check {name}{incident}: it is still {entry.get('status')}. Read its current "
                    "status and metrics, and update the on-call only if something changed."
                )
            },
        }
    )


if __name__ == "__main__":
    main()
