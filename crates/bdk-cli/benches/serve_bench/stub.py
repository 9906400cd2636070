#!/usr/bin/env python3
"""An OpenAI-compatible Chat Completions stub for the serve benchmark (standard library only).

POST /v1/chat/completions streams a short answer at once. When the last message is the user's
and starts with "tool:NAME", it asks for one call of NAME with {"text": "..."} instead; after a
tool result it answers with text. "big:BYTES" answers with BYTES of text in 64 KiB deltas. Prints "listening on PORT" and serves until killed.
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def chunk(delta, finish=None):
    body = {"id": "chatcmpl-stub", "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return ("data: " + json.dumps(body) + "\n\n").encode()


USAGE = ("data: " + json.dumps({"id": "chatcmpl-stub", "choices": [], "usage": {
    "prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}}) + "\n\n").encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body are two writes: without this the body waits for the client's delayed ACK.
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        request = json.loads(self.rfile.read(length) or b"{}")
        messages = request.get("messages", [])
        last = messages[-1] if messages else {}
        content = last.get("content") if isinstance(last.get("content"), str) else ""
        if last.get("role") == "user" and content.startswith("tool:"):
            name = content[5:].split()[0]
            call = {"index": 0, "id": "call_1", "type": "function",
                    "function": {"name": name, "arguments": json.dumps({"text": "one two three"})}}
            parts = [chunk({"role": "assistant", "tool_calls": [call]}), chunk({}, "tool_calls")]
        elif last.get("role") == "user" and content.startswith("big:"):
            size, piece = int(content[4:].split()[0]), "x" * 65536
            parts = [chunk({"role": "assistant", "content": ""})]
            parts += [chunk({"content": piece})] * -(-size // len(piece))
            parts.append(chunk({}, "stop"))
        else:
            parts = [chunk({"role": "assistant", "content": "Hello"}), chunk({"content": " there."}),
                     chunk({}, "stop")]
        body = b"".join(parts) + USAGE + b"data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            # The host stops reading an answer past its per-step output cap ("big:"): expected.
            self.close_connection = True


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256


server = Server(("127.0.0.1", 0), Handler)
print("listening on", server.server_address[1], flush=True)
try:
    server.serve_forever()
except KeyboardInterrupt:
    sys.exit(0)
