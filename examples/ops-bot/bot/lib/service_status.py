#!/usr/bin/env python3
"""service_status: the current status of one service, or of every service.

Reads {"input": {"service"?: ...}, "context": {...}} on stdin and prints JSON:
{"services": [...], "unhealthy": [...names], "checked_at": ...}. An unknown service is an error
that lists the known names, so the model can retry.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ops  # noqa: E402  (lib/ops.py)


def main():
    params, _ = ops.read_request()
    try:
        services = ops.load_services()
    except ops.OpsError as err:
        ops.fail(f"service_status: {err}")
    name = params.get("service")
    if name:
        entry = ops.find_service(services, name)
        if entry is None:
            known = ", ".join(sorted(s["service"] for s in services))
            ops.fail(f"service_status: no service named `{name}`. Known services: {known}.")
        services = [entry]
    ops.reply(
        {
            "checked_at": ops.iso(ops.now()),
            "services": services,
            "unhealthy": [s["service"] for s in services if s.get("status") != "healthy"],
        }
    )


if __name__ == "__main__":
    main()
