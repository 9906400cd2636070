"""Shared helpers for the ops-bot scripts: the command protocol, the state root, service status
and metrics. Standard library only; scripts add this folder to sys.path and `import ops`.

Data sources, each with a demo fallback so the example runs anywhere:
  OPS_STATUS_URL   GET returns {"services": [{"service", "status", "team", "oncall", "runbook", ...}]}
  PROMETHEUS_URL   metrics come from /api/v1/query_range with the queries in PROMQL below
  neither          lib/demo_services.json, with times relative to now
"""
import datetime
import json
import math
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
DEMO_FILE = os.path.join(HERE, "demo_services.json")
TIMEOUT_SECONDS = 10
METRICS = ("error_rate", "latency_p99_ms", "requests_per_min")
UNITS = {"error_rate": "percent", "latency_p99_ms": "ms", "requests_per_min": "requests/min"}
PROMQL = {
    "error_rate": '100 * sum(rate(http_requests_total{{service="{s}",code=~"5.."}}[5m]))'
    ' / sum(rate(http_requests_total{{service="{s}"}}[5m]))',
    "latency_p99_ms": "1000 * histogram_quantile(0.99, sum by (le) "
    '(rate(http_request_duration_seconds_bucket{{service="{s}"}}[5m])))',
    "requests_per_min": '60 * sum(rate(http_requests_total{{service="{s}"}}[5m]))',
}
MAX_POINTS = 24
MAX_SPAN = datetime.timedelta(days=7)


class OpsError(Exception):
    """A data source failed; the message is written for the model."""


# --- protocol -----------------------------------------------------------------------------------


def fail(message):
    """Ends the command as an error result: BDK shows the model the tail of stderr."""
    print(message, file=sys.stderr)
    sys.exit(1)


def read_request(required=True):
    """Reads {"input": ..., "context": {...}} from stdin; returns (input, context).

    With required=False an empty stdin is fine (schedule runs may get no input).
    """
    raw = sys.stdin.read() if not sys.stdin.isatty() else ""
    if not raw.strip():
        if required:
            fail('expected {"input": {...}, "context": {...}} as JSON on stdin')
        return {}, {}
    try:
        request = json.loads(raw)
    except ValueError as err:
        fail(f"expected a JSON request on stdin: {err}")
    if not isinstance(request, dict):
        fail('expected a JSON object {"input": ..., "context": ...} on stdin')
    payload = request.get("input")
    if payload is None:
        payload = {}
    if not isinstance(payload, dict):
        fail("expected `input` to be a JSON object")
    context = request.get("context") if isinstance(request.get("context"), dict) else {}
    return payload, context


def reply(result):
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


def state_root():
    """Where the agent keeps durable files: $BDK_STATE_ROOT, else .bdk/ under the working directory."""
    return os.environ.get("BDK_STATE_ROOT") or os.path.join(os.getcwd(), ".bdk")


def append_ndjson(name, record):
    """Appends one JSON line to <state root>/<name>; returns the file's path."""
    path = os.path.join(state_root(), name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(record) + "\n")
    return path


# --- time ---------------------------------------------------------------------------------------


def now():
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)


def iso(moment):
    return moment.astimezone(datetime.timezone.utc).isoformat().replace("+00:00", "Z")


def parse_instant(value, name):
    """An absolute ISO-8601 instant with a timezone, or a failure naming the argument."""
    text = value.strip() if isinstance(value, str) else ""
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        fail(f"`{name}` must be an absolute ISO-8601 instant such as 2025-01-06T09:00:00Z, got {value!r}")
    if moment.tzinfo is None:
        fail(f"`{name}` needs a timezone (end it with Z for UTC), got {value!r}")
    return moment.astimezone(datetime.timezone.utc)


# --- services -----------------------------------------------------------------------------------


def _get_json(url):
    req = urllib.request.Request(url, headers={"Accept": "application/json", "User-Agent": "bdk-ops-bot"})
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_SECONDS) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as err:
        raise OpsError(f"GET {url} failed: HTTP {err.code}") from None
    except (urllib.error.URLError, TimeoutError, OSError) as err:
        raise OpsError(f"cannot reach {url}: {getattr(err, 'reason', err)}") from None
    except ValueError:
        raise OpsError(f"GET {url} did not return JSON") from None


def _demo_services():
    with open(DEMO_FILE, encoding="utf-8") as f:
        demo = json.load(f)
    current = now()
    services = []
    for entry in demo["services"]:
        incident = entry.get("incident")
        since_minutes = incident["minutes_ago"] if incident else 24 * 60
        services.append(
            {
                "service": entry["service"],
                "status": entry["status"],
                "summary": entry["summary"],
                "since": iso(current - datetime.timedelta(minutes=since_minutes)),
                "team": entry["team"],
                "oncall": entry["oncall"],
                "runbook": entry["runbook"],
                "core": entry["core"],
                "last_deploy": iso(current - datetime.timedelta(minutes=entry["last_deploy_minutes_ago"])),
                "source": "demo",
            }
        )
    return services


def load_services():
    """Every service's current status, from OPS_STATUS_URL or the demo file."""
    url = os.environ.get("OPS_STATUS_URL", "").strip()
    if not url:
        return _demo_services()
    data = _get_json(url)
    services = data.get("services") if isinstance(data, dict) else None
    if not isinstance(services, list):
        raise OpsError(f"{url} did not return {{\"services\": [...]}}")
    return [dict(s, source="status_api") for s in services if isinstance(s, dict) and "service" in s]


def find_service(services, name):
    for entry in services:
        if entry["service"] == name:
            return entry
    return None


# --- metrics ------------------------------------------------------------------------------------


def _step(since, until):
    minutes = max(1, math.ceil((until - since).total_seconds() / 60 / MAX_POINTS))
    return datetime.timedelta(minutes=minutes)


def _demo_series(service, metric, since, until):
    with open(DEMO_FILE, encoding="utf-8") as f:
        entry = next((s for s in json.load(f)["services"] if s["service"] == service), None)
    if entry is None:
        return None
    base = entry["baseline"][metric]
    incident = entry.get("incident")
    started = now() - datetime.timedelta(minutes=incident["minutes_ago"]) if incident else None
    points, step, moment = [], _step(since, until), since
    while moment <= until:
        wobble = 1 + 0.06 * math.sin(moment.timestamp() / 420 + len(service))
        factor = incident[metric] if started and moment >= started else 1
        value = base * wobble * factor
        value = min(value, 100.0) if metric == "error_rate" else value
        points.append({"at": iso(moment), "value": round(value, 2) if metric == "error_rate" else round(value)})
        moment += step
    return points


def _prometheus_series(base_url, service, metric, since, until):
    query = PROMQL[metric].format(s=service.replace('"', ""))
    params = urllib.parse.urlencode(
        {"query": query, "start": iso(since), "end": iso(until), "step": f"{int(_step(since, until).total_seconds())}s"}
    )
    data = _get_json(f"{base_url.rstrip('/')}/api/v1/query_range?{params}")
    if not isinstance(data, dict) or data.get("status") != "success":
        raise OpsError(f"Prometheus refused the query: {data.get('error') if isinstance(data, dict) else data}")
    results = data.get("data", {}).get("result", [])
    if not results:
        return []
    points = []
    for stamp, value in results[0].get("values", []):
        moment = datetime.datetime.fromtimestamp(float(stamp), datetime.timezone.utc)
        try:
            number = float(value)
        except ValueError:
            continue
        if math.isfinite(number):
            points.append({"at": iso(moment), "value": round(number, 2)})
    return points


def metric_series(service, metric, since, until):
    """Points between two instants, at most MAX_POINTS of them; None for an unknown service (demo)."""
    url = os.environ.get("PROMETHEUS_URL", "").strip()
    if url:
        return _prometheus_series(url, service, metric, since, until), "prometheus"
    return _demo_series(service, metric, since, until), "demo"
