#!/usr/bin/env python3
"""inspect_pr: sizes a pull request and rates it trivial, moderate or large.

Reads {"input": {"pr_url": ..., "additions"?, "deletions"?, "changed_files"?, "draft"?}, "context": {...}}
on stdin and prints the facts as JSON. Counts given in the input win; whatever is missing is
fetched from the GitHub REST API when GITHUB_TOKEN is set. With neither, it exits 1 and says on
stderr which numbers to pass.

Size thresholds (lines = additions + deletions):
  trivial   at most 20 lines in at most 2 files
  moderate  at most 400 lines in at most 15 files
  large     anything bigger
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import github  # noqa: E402  (lib/github.py, found through the path above)

TRIVIAL_MAX_LINES, TRIVIAL_MAX_FILES = 20, 2
MODERATE_MAX_LINES, MODERATE_MAX_FILES = 400, 15
COUNTS = ("additions", "deletions", "changed_files")


def rate(lines, files):
    if lines <= TRIVIAL_MAX_LINES and files <= TRIVIAL_MAX_FILES:
        return "trivial"
    if lines <= MODERATE_MAX_LINES and files <= MODERATE_MAX_FILES:
        return "moderate"
    return "large"


def next_step(result):
    if result["state"] != "open":
        return f"The pull request is {result['state']}; do not review it."
    if result["draft"]:
        return "Draft: do not call submit_review; tell the user it will be reviewed once it is ready."
    return {
        "trivial": "Small change: approve unless something in it is risky.",
        "moderate": "Load the pr-review skill and work through its checklist before choosing a verdict.",
        "large": "Too large to approve automatically: submit request_human_review.",
    }[result["size"]]


def main():
    params = github.read_input()
    owner, repo, number, url = github.parse_pr_url(params.get("pr_url"))
    facts = {key: params[key] for key in COUNTS + ("draft",) if params.get(key) is not None}
    source = "input"
    title = author = None
    state = "open"

    missing = [key for key in COUNTS if key not in facts]
    if missing:
        token = github.token()
        if token is None:
            github.fail(
                f"inspect_pr could not size {url}: {', '.join(missing)} not given and GITHUB_TOKEN is not set, "
                "so they cannot be fetched from GitHub. Call inspect_pr again with integer `additions`, "
                "`deletions` and `changed_files` (and `draft`: true if it is a draft), taken from the "
                "user's message or the PR page; if you do not know them, ask the user."
            )
        try:
            pull = github.get_pull(owner, repo, number, token)
        except github.GitHubError as err:
            github.fail(f"inspect_pr: {err}")
        for key in COUNTS + ("draft",):
            if key not in facts and pull.get(key) is not None:
                facts[key] = pull[key]
        source = "github" if len(missing) == len(COUNTS) else "github+input"
        title = pull.get("title")
        author = (pull.get("user") or {}).get("login")
        state = "merged" if pull.get("merged") else pull.get("state", "open")

    for key in COUNTS:
        value = facts.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            github.fail(f"inspect_pr: `{key}` must be a non-negative integer, got {value!r}")
    lines = facts["additions"] + facts["deletions"]
    result = {
        "pr_url": url,
        "repository": f"{owner}/{repo}",
        "number": number,
        "title": title,
        "author": author,
        "state": state,
        "draft": bool(facts.get("draft", False)),
        "additions": facts["additions"],
        "deletions": facts["deletions"],
        "changed_files": facts["changed_files"],
        "lines_changed": lines,
        "size": rate(lines, facts["changed_files"]),
        "source": source,
    }
    result["next_step"] = next_step(result)
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
