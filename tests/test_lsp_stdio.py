"""The server's stdio loop (server/stdio.py), driven over raw pipes: framing, bodies
msgspec refuses but the standard library accepts, and garbage that must not end the
server."""

from __future__ import annotations

import json
import subprocess
import sys

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


def _responses(out: bytes) -> list[dict]:
    messages = []
    while out:
        head, _, rest = out.partition(b"\r\n\r\n")
        length = int(head.split(b"\r\n")[0].split(b":")[1])
        messages.append(json.loads(rest[:length]))
        out = rest[length:]
    return messages


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
        _message({"jsonrpc": "2.0", "id": 3, "method": "shutdown"}),
        _message({"jsonrpc": "2.0", "method": "exit"}),
    ])
    proc = subprocess.run([sys.executable, "-m", "trainproof_lsp", "serve"], input=stream,
                          capture_output=True, timeout=60)
    messages = _responses(proc.stdout)
    by_id = {m["id"]: m for m in messages if "id" in m and "method" not in m}
    assert by_id[1]["result"]["serverInfo"]["name"] == "trainproof-lsp"
    assert [f["id"] for f in by_id[2]["result"]["report"]["findings"]] == ["TP-PRE-MALFORMED-JSONL"]
    assert by_id[3]["result"] is None
    published = [m["params"] for m in messages if m.get("method") == "textDocument/publishDiagnostics"]
    assert [(d["code"], d["range"]["start"]["line"]) for p in published for d in p["diagnostics"]] == \
        [("TP-PRE-MALFORMED-JSONL", 1)]
    assert proc.returncode == 0
    assert b"Traceback" not in proc.stderr or b"Unable to handle message" in proc.stderr
