#!/usr/bin/env python3
"""page_oncall: pages the on-call engineer of a service.

Reads {"input": {"service", "severity", "summary", "runbook"?}, "context": {...}} on stdin.
With PAGERDUTY_ROUTING_KEY set it triggers a PagerDuty Events API v2 alert (deduplicated per
service and severity, so a repeated page updates the open alert instead of paging twice).
Without it the page is appended to $BDK_STATE_ROOT/pages.ndjson and the result says nobody was
actually paged. PAGERDUTY_EVENTS_URL overrides the endpoint (for tests).
"""
import json
import os
import sys
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ops  # noqa: E402  (lib/ops.py)

PAGERDUTY_URL = "https://events.pagerduty.com/v2/enqueue"
PD_SEVERITY = {"sev1": "critical", "sev2": "error", "sev3": "warning"}


def trigger(routing_key, page):
    body = {
        "routing_key": routing_key,
        "event_action": "trigger",
        "dedup_key": page["dedup_key"],
        "payload": {
            "summary": f"[{page['severity']}] {page['service']}: {page['summary']}"[:1024],
            "source": page["service"],
            "severity": PD_SEVERITY[page["severity"]],
            "custom_details": {"runbook": page.get("runbook"), "oncall": page.get("oncall")},
        },
    }
    url = os.environ.get("PAGERDUTY_EVENTS_URL", PAGERDUTY_URL)
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=ops.TIMEOUT_SECONDS) as resp:
            return json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as err:
        ops.fail(f"page_oncall: PagerDuty refused the page: HTTP {err.code} {err.read().decode('utf-8', 'replace')}")
    except (urllib.error.URLError, TimeoutError, OSError, ValueError) as err:
        ops.fail(f"page_oncall: cannot reach PagerDuty at {url}: {getattr(err, 'reason', err)}")


def main():
    params, _ = ops.read_request()
    service, severity = params.get("service"), params.get("severity")
    summary = (params.get("summary") or "").strip()
    if severity not in PD_SEVERITY:
        ops.fail(f"page_oncall: `severity` must be sev1, sev2 or sev3, got {severity!r}")
    if not service or not summary:
        ops.fail("page_oncall: `service` and a non-empty `summary` are required")
    try:
        entry = ops.find_service(ops.load_services(), service)
    except ops.OpsError:
        entry = None  # Paging must not depend on the status API being up.
    page = {
        "at": ops.iso(ops.now()),
        "service": service,
        "severity": severity,
        "summary": summary,
        "runbook": params.get("runbook") or (entry or {}).get("runbook"),
        "oncall": (entry or {}).get("oncall"),
        "dedup_key": f"ops-bot:{service}:{severity}",
        "session_id": os.environ.get("BDK_SESSION_ID"),
    }
    routing_key = os.environ.get("PAGERDUTY_ROUTING_KEY", "").strip()
    if routing_key:
        response = trigger(routing_key, page)
        ops.reply(
            {
                "paged": True,
                "service": service,
                "severity": severity,
                "oncall": page["oncall"],
                "dedup_key": response.get("dedup_key", page["dedup_key"]),
                "message": f"Paged the {service} on-call through PagerDuty ({response.get('status', 'sent')}).",
            }
        )
        return
    path = ops.append_ndjson("pages.ndjson", page)
    ops.reply(
        {
            "paged": False,
            "service": service,
            "severity": severity,
            "oncall": page["oncall"],
            "dedup_key": page["dedup_key"],
            "message": f"Recorded in {path}; nobody was paged because PAGERDUTY_ROUTING_KEY is not set.",
        }
    )


if __name__ == "__main__":
    main()
