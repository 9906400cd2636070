#!/usr/bin/env python3
"""submit_review: leaves one review on a pull request.

Reads {"input": {"pr_url", "verdict", "summary"}, "context": {...}} on stdin and prints the outcome
as JSON. With GITHUB_TOKEN set it re-reads the live PR (never approving a draft or a closed PR,
whatever the model was told) and POSTs the review: `approve` becomes an APPROVE review,
`request_human_review` a COMMENT asking for a person. Without a token it appends the review as one
JSON line to $BDK_STATE_ROOT/reviews.ndjson (.bdk/reviews.ndjson under the working directory when
BDK_STATE_ROOT is unset) and says that nothing was posted; a second review of the same PR is refused.
"""
import datetime
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import github  # noqa: E402  (lib/github.py, found through the path above)

EVENTS = {"approve": "APPROVE", "request_human_review": "COMMENT"}
HEADINGS = {"approve": "Approved by the review bot.", "request_human_review": "A person should review this change."}


def review_body(verdict, summary):
    return f"**{HEADINGS[verdict]}**\n\n{summary.strip()}\n\n_Left by the BDK pr-reviewer example._"


def post(owner, repo, number, url, verdict, summary, token):
    try:
        pull = github.get_pull(owner, repo, number, token)
        if verdict == "approve" and (pull.get("draft") or pull.get("state") != "open"):
            what = "a draft" if pull.get("draft") else f"{pull.get('state')}"
            github.fail(f"submit_review: refusing to approve {url}: it is {what}. Do not review it.")
        review = github.api(
            "POST",
            f"/repos/{owner}/{repo}/pulls/{number}/reviews",
            token,
            {"event": EVENTS[verdict], "body": review_body(verdict, summary)},
        )
    except github.GitHubError as err:
        github.fail(f"submit_review: {err}")
    return {
        "pr_url": url,
        "verdict": verdict,
        "posted": True,
        "review_id": review.get("id"),
        "review_url": review.get("html_url"),
        "message": f"Posted the review ({EVENTS[verdict]}) on {url}.",
    }


def record_locally(url, verdict, summary):
    path = os.path.join(github.state_root(), "reviews.ndjson")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as existing:
            for line in existing:
                try:
                    earlier = json.loads(line)
                except ValueError:
                    continue
                if earlier.get("pr_url") == url:
                    github.fail(
                        f"submit_review: a review of {url} was already recorded at {earlier.get('at')} "
                        f"(verdict {earlier.get('verdict')}). One review per PR: do not submit another."
                    )
    os.makedirs(os.path.dirname(path), exist_ok=True)
    entry = {
        "at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "pr_url": url,
        "verdict": verdict,
        "summary": summary,
        "session_id": os.environ.get("BDK_SESSION_ID"),
    }
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(entry) + "\n")
    return {
        "pr_url": url,
        "verdict": verdict,
        "posted": False,
        "recorded_at": path,
        "message": f"Recorded locally in {path}; NOT posted to GitHub because GITHUB_TOKEN is not set.",
    }


def main():
    params = github.read_input()
    owner, repo, number, url = github.parse_pr_url(params.get("pr_url"))
    verdict = params.get("verdict")
    if verdict not in EVENTS:
        github.fail(f"submit_review: `verdict` must be one of {', '.join(EVENTS)}, got {verdict!r}")
    summary = params.get("summary")
    if not isinstance(summary, str) or not summary.strip():
        github.fail("submit_review: `summary` must be a non-empty string")
    token = github.token()
    if token:
        result = post(owner, repo, number, url, verdict, summary, token)
    else:
        result = record_locally(url, verdict, summary)
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
