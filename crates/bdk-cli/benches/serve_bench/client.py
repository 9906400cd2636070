#!/usr/bin/env python3
"""The serve benchmark's Python client: new-session turns through http.client, as a Python
user would write them. Usage: client.py HOST PORT TURNS (keepalive|fresh) MESSAGE

keepalive: the POST and the stream read share one connection (requests.Session, SDKs).
fresh: a new connection for each request.
Prints one JSON list: each turn's seconds from sending the POST to reading session.waiting.
"""
import http.client
import json
import sys
import time

host, port, turns, mode, message = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
body = json.dumps({"message": message})
latencies = []
for _ in range(turns):
    started = time.perf_counter()
    conn = http.client.HTTPConnection(host, port, timeout=30)
    conn.request("POST", "/v1/session", body, {"Content-Type": "application/json"})
    reply = conn.getresponse()
    session = json.loads(reply.read())["sessionId"]
    if mode == "fresh":
        conn.close()
        conn = http.client.HTTPConnection(host, port, timeout=30)
    conn.request("GET", f"/v1/session/{session}/stream?startIndex=0")
    stream = conn.getresponse()
    while True:
        line = stream.readline()
        if not line:
            raise SystemExit("the stream ended before session.waiting")
        if b'"type":"session.waiting"' in line:
            break
    latencies.append(time.perf_counter() - started)
    conn.close()
print(json.dumps(latencies))
