#!/usr/bin/env python3
"""SIGKILL `bdk serve` under load, again and again, and check that nothing acknowledged is lost.

    scripts/kill-loop.py BDK [ROUNDS]

Each round starts `bdk serve` on the same state root (against the serve benchmark's
OpenAI-compatible stub), reads back every session the rounds before wrote, and checks that
  - every message the server acknowledged (a POST answered 201 or 202) is in its session's log;
  - no turn started before its message (each `turn.started` follows one more top-level
    `message.received` than the turns before it had);
then runs 4 clients (new sessions, each with up to 3 follow-ups, each waiting for its turn's
`session.waiting`) for a random 0.3 to 1.2 s and kills the server with SIGKILL. A last start
checks the last round. ROUNDS defaults to 30. Exits 1 on any problem. Standard library only;
state goes to a temporary folder. Each check reads every session written so far, so the rounds
get slower as they go (40 rounds took about 100 s on a 2-core machine).

DEBOUNCE_MS=N in the environment gives the agent `storage.toml`'s `policy.debounce_ms = N`
(write debouncing): commits are acknowledged before they are synced, and a SIGKILL (unlike a
power loss) must still lose nothing acknowledged.
"""
import http.client
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLIENTS = 4
FOLLOW_UPS = 3


def start_stub(work):
    out = open(os.path.join(work, "stub.out"), "w+")
    stub = subprocess.Popen([sys.executable, os.path.join(HERE, "crates/bdk-cli/benches/serve_bench/stub.py")],
                            stdout=out, stderr=subprocess.STDOUT)
    for _ in range(100):
        out.seek(0)
        line = out.readline()
        if line.startswith("listening on "):
            return stub, int(line.split()[-1])
        time.sleep(0.1)
    raise SystemExit("the stub did not start")


def write_project(work, stub_port):
    bot = os.path.join(work, "project", "bot")
    os.makedirs(bot)
    with open(os.path.join(bot, "agent.toml"), "w") as f:
        f.write(f'name = "kills"\nmax_running_turns = 64\n\n[model]\nid = "stub"\n'
                f'provider = "openai-compatible"\nbase_url = "http://127.0.0.1:{stub_port}/v1"\n')
    with open(os.path.join(bot, "instructions.md"), "w") as f:
        f.write("Answer briefly.\n")
    debounce = int(os.environ.get("DEBOUNCE_MS", "0"))
    if debounce:
        with open(os.path.join(bot, "storage.toml"), "w") as f:
            f.write(f"[policy]\ndebounce_ms = {debounce}\n")
    return os.path.dirname(bot)


def serve(bdk, project, state):
    server = subprocess.Popen([bdk, "serve", "--mode", "single", "--port", "0", "--dir", project,
                               "--state-root", state],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in server.stdout:
        if "listening on http://" in line:
            port = int(line.strip().rsplit(":", 1)[1].split("/")[0])
            threading.Thread(target=server.stdout.read, daemon=True).start()
            return server, port
    raise SystemExit(f"bdk serve did not start (exit {server.wait()})")


def post(port, path, body):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, json.loads(data) if data else {}


def until_waiting(port, session, start):
    """Reads the session's stream from `start` to the next `session.waiting`; the next index."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", f"/v1/session/{session}/stream?startIndex={start}")
    response = conn.getresponse()
    while True:
        line = response.readline()
        if not line:
            raise OSError("the stream ended")
        event = json.loads(line)
        if event.get("type") == "session.waiting":
            conn.close()
            return event["index"] + 1


def client(port, stop, acknowledged, lock):
    try:
        while not stop.is_set():
            text = "start " + uuid.uuid4().hex
            status, started = post(port, "/v1/session", {"message": text})
            if status not in (200, 201):
                continue
            session, token = started["sessionId"], started["continuationToken"]
            with lock:
                acknowledged.append((session, text))
            index = until_waiting(port, session, 0)
            for _ in range(FOLLOW_UPS):
                text = "follow " + uuid.uuid4().hex
                status, reply = post(port, f"/v1/session/{session}", {"message": text, "continuationToken": token})
                if status not in (200, 202):
                    break
                with lock:
                    acknowledged.append((session, text))
                token = reply["continuationToken"]
                index = until_waiting(port, session, index)
    except (OSError, http.client.HTTPException, ValueError):
        pass  # the server was killed


def check(port, acknowledged):
    """The problems found in every session written so far."""
    problems, sent = [], {}
    for session, text in acknowledged:
        sent.setdefault(session, []).append(text)
    for session, texts in sorted(sent.items()):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", f"/v1/session/{session}/events")
        events = [json.loads(line) for line in conn.getresponse().read().decode().splitlines() if line.strip()]
        conn.close()
        said = {e["data"].get("text") for e in events if e.get("type") == "message.received"}
        problems += [f"lost: {session} {text!r}" for text in texts if text not in said]
        messages = turns = 0
        for event in events:
            if event.get("type") == "message.received" and not event.get("turnId"):
                messages += 1
            elif event.get("type") == "turn.started":
                turns += 1
                if turns > messages:
                    problems.append(f"a turn before its message: {session} index {event['index']}")
    return problems


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    bdk, rounds = os.path.abspath(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 30
    with tempfile.TemporaryDirectory() as work:
        stub, stub_port = start_stub(work)
        try:
            project, state = write_project(work, stub_port), os.path.join(work, "state")
            acknowledged, lock, problems = [], threading.Lock(), []
            for round_ in range(rounds + 1):
                server, port = serve(bdk, project, state)
                problems += check(port, acknowledged)
                if round_ == rounds:
                    server.terminate()
                    server.wait()
                    break
                stop = threading.Event()
                threads = [threading.Thread(target=client, args=(port, stop, acknowledged, lock))
                           for _ in range(CLIENTS)]
                for thread in threads:
                    thread.start()
                time.sleep(random.uniform(0.3, 1.2))
                server.send_signal(signal.SIGKILL)
                server.wait()
                stop.set()
                for thread in threads:
                    thread.join()
        finally:
            stub.kill()
    for problem in problems[:20]:
        print(problem)
    sessions = len({s for s, _ in acknowledged})
    print(f"{rounds} kills, {len(acknowledged)} acknowledged messages in {sessions} sessions, "
          f"{len(problems)} problems")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
