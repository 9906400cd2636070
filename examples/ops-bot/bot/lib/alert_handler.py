#!/usr/bin/env python3
"""POST /v1/channels/alerts/alert handler: turns a monitoring alert into a message for the agent.

Reads {"input": <the request>, "context": {...}} on stdin. BDK has already checked the body
against the route's body_schema; the body is `input.body` (or `input` itself when the request is
passed as the bare body). Prints the response as JSON:
  firing    {"status": 202, "accepted": true, "send": {"continuation_key", "title", "message"}}:
            one conversation per alert fingerprint, so repeats of the same alert join it
  resolved  the same, telling that conversation the alert cleared
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ops  # noqa: E402  (lib/ops.py)


def main():
    request, _ = ops.read_request()
    body = request.get("body") if isinstance(request.get("body"), dict) else request
    service, severity, summary = body.get("service"), body.get("severity"), body.get("summary")
    if not (service and severity and summary):
        ops.fail("alerts: the body needs service, severity and summary")
    fingerprint = body.get("fingerprint") or f"{service}:{body.get('alertname', 'alert')}"
    status = body.get("status", "firing")
    if status == "resolved":
        message = (
            f"Alert resolved for {service}: {summary}. Confirm with service_status; if the incident is "
            "over, say so and cancel any re-check reminder."
        )
    else:
        started = f" (started {body['started_at']})" if body.get("started_at") else ""
        message = (
            f"Alert firing for {service}, reported as {severity}{started}: {summary}. "
            "Triage it with the incident-triage skill."
        )
    ops.reply(
        {
            "status": 202,
            "accepted": True,
            "send": {
                "continuation_key": f"alert:{fingerprint}",
                "title": f"{severity} {service}: {summary}"[:120],
                "message": message,
            },
        }
    )


if __name__ == "__main__":
    main()
