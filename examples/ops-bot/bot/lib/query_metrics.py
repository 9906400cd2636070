#!/usr/bin/env python3
"""query_metrics: one metric of one service between two absolute instants.

Reads {"input": {"service", "metric", "since", "until"}, "context": {...}} on stdin and prints
the points (about 24, evenly spaced) with their min, max, mean and latest value. `since` and
`until` are the tool's time_args: under an as-of session BDK checks them before this runs.
Windows longer than 7 days, reversed windows and windows starting in the future are refused;
a window that runs past now is cut at now.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ops  # noqa: E402  (lib/ops.py)


def main():
    params, _ = ops.read_request()
    service = params.get("service")
    metric = params.get("metric")
    if not service:
        ops.fail("query_metrics: `service` is required")
    if metric not in ops.METRICS:
        ops.fail(f"query_metrics: `metric` must be one of {', '.join(ops.METRICS)}, got {metric!r}")
    since = ops.parse_instant(params.get("since"), "since")
    until = ops.parse_instant(params.get("until"), "until")
    current = ops.now()
    if since >= until:
        ops.fail("query_metrics: `since` must be before `until`")
    if since > current:
        ops.fail(f"query_metrics: `since` is in the future; it is now {ops.iso(current)}")
    until = min(until, current)  # No data from the future; a window running past now ends now.
    if until - since > ops.MAX_SPAN:
        ops.fail("query_metrics: the window is longer than 7 days; query a shorter one")
    try:
        points, source = ops.metric_series(service, metric, since, until)
    except ops.OpsError as err:
        ops.fail(f"query_metrics: {err}")
    if points is None:
        ops.fail(f"query_metrics: no service named `{service}`; call service_status to list them")
    values = [p["value"] for p in points]
    ops.reply(
        {
            "service": service,
            "metric": metric,
            "unit": ops.UNITS[metric],
            "since": ops.iso(since),
            "until": ops.iso(until),
            "source": source,
            "points": points,
            "min": min(values) if values else None,
            "max": max(values) if values else None,
            "mean": round(sum(values) / len(values), 2) if values else None,
            "latest": values[-1] if values else None,
            "note": None if values else "No data in this window: check the service name and the time range.",
        }
    )


if __name__ == "__main__":
    main()
