#!/usr/bin/env python3
"""word_count, a persistent tool (`persistent = true` in tools/word_count.toml).

BDK starts this once and keeps it running, so a call costs one line each way instead of a new
Python interpreter (about 50 ms). Each line on stdin is one request,
{"id": ..., "input": {"text": ...}, "context": {...}}; each answer is one line on stdout,
{"id": ..., "result": {...}} or {"id": ..., "error": "message"}. Print logs to stderr only.
"""
import json
import sys


def count(text):
    return {
        "words": len(text.split()),
        "lines": len(text.splitlines()) if text else 0,
        "characters": len(text),
    }


for line in sys.stdin:
    request = json.loads(line)
    try:
        answer = {"id": request["id"], "result": count(request["input"]["text"])}
    except Exception as error:  # the model sees the message as an error result
        answer = {"id": request["id"], "error": f"word_count failed: {error}"}
    print(json.dumps(answer), flush=True)
