"""Shared helpers for the pr-reviewer tools: the request protocol, PR URLs and the GitHub REST API.

Standard library only. The tool scripts add this folder to sys.path and `import github`.
"""
import json
import os
import re
import sys
import urllib.error
import urllib.request

# Also the `pattern` of `pr_url` in tools/*.toml; keep the two in step.
PR_URL = re.compile(r"^https://github\.com/([A-Za-z0-9-]+)/([A-Za-z0-9._-]+)/pull/([1-9][0-9]*)/?$")

API_VERSION = "2022-11-28"
TIMEOUT_SECONDS = 20


class GitHubError(Exception):
    """An API call failed; the message is written for the model."""


def fail(message):
    """Ends the tool as an error result: BDK shows the model the tail of stderr."""
    print(message, file=sys.stderr)
    sys.exit(1)


def read_input():
    """Reads {"input": {...}, "context": {...}} from stdin and returns the input object."""
    try:
        request = json.load(sys.stdin)
    except json.JSONDecodeError as err:
        fail(f"expected a JSON request on stdin: {err}")
    payload = request.get("input") if isinstance(request, dict) else None
    if not isinstance(payload, dict):
        fail('expected {"input": {...}} on stdin')
    return payload


def parse_pr_url(url):
    """Returns (owner, repo, number) and the canonical URL, or fails with a clear message."""
    match = PR_URL.match(url.strip()) if isinstance(url, str) else None
    if not match:
        fail(f"`{url}` is not a GitHub pull request URL; expected https://github.com/OWNER/REPO/pull/NUMBER")
    owner, repo, number = match.group(1), match.group(2), int(match.group(3))
    return owner, repo, number, f"https://github.com/{owner}/{repo}/pull/{number}"


def token():
    """The GitHub token from the environment, or None."""
    value = os.environ.get("GITHUB_TOKEN", "").strip()
    return value or None


def api(method, path, token, body=None):
    """Calls the GitHub REST API and returns the decoded JSON response.

    GITHUB_API_URL points at GitHub Enterprise (or a local fake in tests); it defaults to
    https://api.github.com, as in GitHub Actions.
    """
    base = os.environ.get("GITHUB_API_URL", "https://api.github.com").rstrip("/")
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method)
    req.add_header("Accept", "application/vnd.github+json")
    req.add_header("Authorization", f"Bearer {token}")
    req.add_header("X-GitHub-Api-Version", API_VERSION)
    req.add_header("User-Agent", "bdk-pr-reviewer")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_SECONDS) as resp:
            raw = resp.read()
    except urllib.error.HTTPError as err:
        detail = err.read().decode("utf-8", "replace")
        try:
            detail = json.loads(detail).get("message", detail)
        except (ValueError, AttributeError):
            pass
        hint = {
            401: " (GITHUB_TOKEN is invalid or expired)",
            403: " (the token lacks access, or the rate limit was hit)",
            404: " (no such pull request, or the token cannot see the repository)",
        }.get(err.code, "")
        raise GitHubError(f"GitHub {method} {path} failed: HTTP {err.code} {detail}{hint}") from None
    except (urllib.error.URLError, TimeoutError, OSError) as err:
        reason = getattr(err, "reason", err)
        raise GitHubError(f"cannot reach the GitHub API at {base}: {reason}") from None
    try:
        return json.loads(raw) if raw else {}
    except ValueError:
        raise GitHubError(f"GitHub {method} {path} returned something that is not JSON") from None


def get_pull(owner, repo, number, token):
    """GET /repos/{owner}/{repo}/pulls/{number}."""
    return api("GET", f"/repos/{owner}/{repo}/pulls/{number}", token)


def state_root():
    """Where the agent keeps durable files: $BDK_STATE_ROOT, else .bdk/ under the working directory."""
    return os.environ.get("BDK_STATE_ROOT") or os.path.join(os.getcwd(), ".bdk")
