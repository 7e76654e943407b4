"""The server's stdio loop (server/stdio.py), driven over raw pipes: framing, bodies
msgspec refuses but the standard library accepts, and garbage that must not end the
server."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from lsp_pipe import WAIT_S

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
    watchdog = threading.Timer(WAIT_S, proc.kill)
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
    # Both bad frames are told to the client and logged; nothing reaches a handler.
    logged = [m["params"]["message"] for m in messages if m.get("method") == "window/logMessage"]
    assert logged == ["trainproof-lsp: bad frame skipped: a body of 17 bytes that is not JSON: b'{this is not json'",
                      "trainproof-lsp: bad frame skipped: a body of 9 bytes that is JSON but not a message "
                      "object (list): b'[1, 2, 3]'"]
    assert b"Traceback" not in stderr, stderr.decode()


# --- framing that goes wrong: the server resynchronises and keeps answering -----------------

import io  # noqa: E402
import resource  # noqa: E402

import pytest  # noqa: E402
from lsp_pipe import PipeClient  # noqa: E402

from trainproof_lsp.server.stdio import MAX_BODY, FrameReader  # noqa: E402

GOOD = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "shutdown"}).encode()

BAD_FRAMES = {
    "missing": b"Content-Type: application/json\r\n\r\n" + GOOD,
    "non-numeric": b"Content-Length: twelve\r\n\r\n" + GOOD,
    "negative": b"Content-Length: -5\r\n\r\n" + GOOD,
    "short": b"Content-Length: 10\r\n\r\n" + GOOD,
    "long": b"Content-Length: %d\r\n\r\n" % (len(GOOD) + 30) + GOOD,
    "oversize": b"Content-Length: 1000000000000\r\n\r\n" + GOOD,
    "endless header": b"X" * 100_000 + b"\r\n\r\n",
}


@pytest.mark.parametrize("kind", list(BAD_FRAMES))
def test_a_bad_frame_is_skipped_and_the_next_frame_is_read(kind: str):
    frames = FrameReader(io.BufferedReader(io.BytesIO(BAD_FRAMES[kind] + _frame(GOOD))))
    assert frames.next_message() == (json.loads(GOOD),)
    assert len(frames.bad_frames) >= 1, kind
    assert frames.next_message() is None


def test_the_bad_frame_says_what_was_wrong():
    def first_complaint(kind: str) -> str:
        frames = FrameReader(io.BufferedReader(io.BytesIO(BAD_FRAMES[kind] + _frame(GOOD))))
        frames.next_message()
        return frames.bad_frames[0]

    assert first_complaint("missing") == "no Content-Length"
    assert first_complaint("non-numeric") == "Content-Length b'twelve'"
    assert first_complaint("negative") == "Content-Length b'-5'"
    assert first_complaint("oversize") == f"Content-Length 1000000000000 is above the limit of {MAX_BODY} bytes; not read"


def _limit_memory() -> None:
    # 1 GiB of address space: allocating the body of a 10^12 (or a 600 MB) frame would fail.
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def test_the_server_keeps_answering_after_every_kind_of_bad_frame(tmp_path):
    client = PipeClient([sys.executable, "-m", "trainproof_lsp", "serve"], cwd=tmp_path, preexec_fn=_limit_memory)
    try:
        init = client.initialize(tmp_path, capabilities={})
        assert init["result"]["serverInfo"]["name"] == "trainproof-lsp"
        for i, (kind, bad) in enumerate(BAD_FRAMES.items()):
            client.write(bad.replace(GOOD, b'{"jsonrpc": "2.0", "method": "$/noop"}') if kind != "short" else bad)
            asked = 100 + i
            client.write(_message({"jsonrpc": "2.0", "id": asked, "method": "workspace/executeCommand",
                                   "params": {"command": "trainproof.showServerInfo", "arguments": []}}))
            answer = client.response(asked)
            assert answer["result"]["name"] == "trainproof-lsp", (kind, answer)
        logged = [m["params"]["message"] for m in client.messages if m.get("method") == "window/logMessage"]
        assert any("Content-Length 1000000000000 is above the limit" in text for text in logged), logged
        assert any("no Content-Length" in text for text in logged), logged
        errors = [m for m in client.messages if m.get("method") == "window/showMessage"
                  and m["params"]["type"] == 1]
        assert [e["params"]["message"] for e in errors if "Error in server" in e["params"]["message"]] == []
    finally:
        code = client.close()
    assert code == 0, client.stderr[-2000:]


def test_a_600_mb_frame_is_refused_unread_under_a_1_gib_memory_limit(tmp_path):
    client = PipeClient([sys.executable, "-m", "trainproof_lsp", "serve"], cwd=tmp_path, preexec_fn=_limit_memory)
    try:
        client.initialize(tmp_path, capabilities={})
        client.write(b"Content-Length: %d\r\n\r\n" % (600 << 20) + b'{"jsonrpc": "2.0", "method": "x", "params": "')
        client.write(b"a" * (4 << 20))  # the start of a body the server must not keep
        answer = client.request("workspace/executeCommand", {"command": "trainproof.showServerInfo", "arguments": []})
        assert answer["result"]["name"] == "trainproof-lsp"
    finally:
        code = client.close()
    assert code == 0, client.stderr[-2000:]


@pytest.mark.parametrize(("method", "params"), [
    ("textDocument/hover", {"textDocument": 5, "position": "top"}),
    ("workspace/executeCommand", {"command": ["not", "a", "string"]}),
    ("textDocument/hover", {"textDocument": {"uri": "file:///x.json"}, "position": {"line": "one", "character": 0}}),
    ("textDocument/codeLens", {"textDocument": 5}),
])
def test_a_request_with_ill_typed_params_gets_an_error_answer(method: str, params: dict, tmp_path):
    client = PipeClient([sys.executable, "-m", "trainproof_lsp", "serve"], cwd=tmp_path)
    try:
        client.initialize(tmp_path, capabilities={"textDocument": {"hover": {}, "codeLens": {}}})
        answer = client.request(method, params)
        assert answer["error"]["code"] == -32602, answer
        assert "invalid params" in answer["error"]["message"].lower(), answer
        assert client.command("trainproof.showServerInfo")["name"] == "trainproof-lsp"
    finally:
        code = client.close()
    assert code == 0
