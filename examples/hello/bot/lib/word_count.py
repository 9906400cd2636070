#!/usr/bin/env python3
"""word_count: reads {"input": {"text": ...}, "context": {...}} on stdin, prints the counts as JSON."""
import json
import sys

request = json.load(sys.stdin)
text = request["input"]["text"]
json.dump(
    {
        "words": len(text.split()),
        "lines": len(text.splitlines()) if text else 0,
        "characters": len(text),
    },
    sys.stdout,
)
