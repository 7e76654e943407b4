"""The server's stdio loop (server/stdio.py), driven over raw pipes: framing, bodies
msgspec refuses but the standard library accepts, and garbage that must not end the
server."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

from trainproof_lsp.server.stdio import parse_body


def test_parse_body_takes_what_json_takes():
    assert parse_body(b'{"a": [1, 2.5, "x"]}') == {"a": [1, 2.5, "x"]}  # small: json.loads
    big = b'{"text": "' + b"row\\n" * 20_000 + b'"}'  # 100 KB: msgspec
    assert parse_body(big) == json.loads(big)
    lone = b'{"text": "\\ud800 half a pair' + b" " * 70_000 + b'"}'  # msgspec refuses lone surrogates
    assert parse_body(lone) == {"text": "\ud800 half a pair" + " " * 70_000}


def _frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _message(payload: dict) -> bytes:
    return _frame(json.dumps(payload).encode())


def _read_message(out) -> dict:
    """One framed message from the server's stdout (headers, blank line, body)."""
    length = 0
    while (header := out.readline().strip()):
        name, _, value = header.partition(b":")
        if name.lower() == b"content-length":
            length = int(value)
    assert length, "the server closed its output"
    return json.loads(out.read(length))


def test_garbage_between_messages_does_not_end_the_server(tmp_path):
    doc = tmp_path / "train.jsonl"
    text = '{"text": "fine"}\n{"text": broken\n'
    doc.write_text(text)
    stream = b"".join([
        _message({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"processId": None, "rootUri": None, "capabilities": {}}}),
        _message({"jsonrpc": "2.0", "method": "initialized", "params": {}}),
        _frame(b"{this is not json"),                      # garbage body
        _frame(b"[1, 2, 3]"),                              # JSON, not a message
        b"X-Unknown-Header: 1\r\n" + _message({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {
            "textDocument": {"uri": doc.as_uri(), "languageId": "jsonl", "version": 1, "text": text}}}),
        # showReport waits for the document's check, so its diagnostics are out before it answers
        _message({"jsonrpc": "2.0", "id": 2, "method": "workspace/executeCommand",
                  "params": {"command": "trainproof.showReport", "arguments": [doc.as_uri()]}}),
    ])
    proc = subprocess.Popen([sys.executable, "-m", "trainproof_lsp", "serve"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    watchdog = threading.Timer(60, proc.kill)
    watchdog.start()
    try:
        proc.stdin.write(stream)
        proc.stdin.flush()
        messages = []
        while not any(m.get("id") == 2 and "method" not in m for m in messages):
            messages.append(_read_message(proc.stdout))
        # Shut down only once showReport has answered: a shutdown cancels pending checks.
        proc.stdin.write(_message({"jsonrpc": "2.0", "id": 3, "method": "shutdown"})
                         + _message({"jsonrpc": "2.0", "method": "exit"}))
        proc.stdin.close()
        while not any(m.get("id") == 3 for m in messages):
            messages.append(_read_message(proc.stdout))
        stderr = proc.stderr.read()
        proc.wait()
    finally:
        watchdog.cancel()
    by_id = {m["id"]: m for m in messages if "id" in m and "method" not in m}
    assert by_id[1]["result"]["serverInfo"]["name"] == "trainproof-lsp"
    assert [f["id"] for f in by_id[2]["result"]["report"]["findings"]] == ["TP-PRE-MALFORMED-JSONL"]
    assert by_id[3]["result"] is None
    published = [m["params"] for m in messages if m.get("method") == "textDocument/publishDiagnostics"]
    assert [(d["code"], d["range"]["start"]["line"]) for p in published for d in p["diagnostics"]] == \
        [("TP-PRE-MALFORMED-JSONL", 1)]
    assert proc.returncode == 0
    assert b"Traceback" not in stderr or b"Unable to handle message" in stderr
