"""No file I/O on the server's event loop: while a file operation of a check or a command
is stuck, the server still answers other requests.

The server runs in this process (its stdio loop on a thread, over two pipes), so a test
can replace the blocking function with one that waits on a threading.Event: the function
signals that it started, the test sends another request and gets its answer, and only
then lets the function go on. Had the function run on the event loop, that answer could
not come until the release, and the wait for it would fail at its deadline.
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path
from typing import Any, Callable

import pytest

from lsp_pipe import WAIT_S, StreamClient
from lsp_support import HF_RUNS

LOOP_THREAD = "server-event-loop"


class InProcessClient(StreamClient):
    """A client for a server started in this process (`build_server().start_io` on a
    thread, over pipes), answering the server's requests with null."""

    def __init__(self, capabilities: dict[str, Any], *, root: Path) -> None:
        from trainproof_lsp.server.app import build_server

        to_server_r, to_server_w = os.pipe()
        from_server_r, from_server_w = os.pipe()
        self._out = os.fdopen(to_server_w, "wb", buffering=0)
        self.server = build_server()
        self._thread = threading.Thread(target=self.server.start_io,
                                        args=(os.fdopen(to_server_r, "rb"), os.fdopen(from_server_w, "wb")),
                                        name=LOOP_THREAD, daemon=True)
        self._thread.start()
        super().__init__(os.fdopen(from_server_r, "rb"), self._out.write, answer=lambda message: None)
        self.request("initialize", {"processId": None, "rootUri": root.as_uri(), "capabilities": capabilities,
                                    "workspaceFolders": [{"uri": root.as_uri(), "name": root.name}]})
        self.notify("initialized", {})

    def answer(self, request_id: int, timeout: float = WAIT_S) -> Any:
        message = self.response(request_id, timeout)
        assert "error" not in message, message
        return message["result"]

    def answered(self, request_id: int) -> bool:
        with self._cond:
            return any(m.get("id") == request_id and "method" not in m for m in self.messages)

    def request(self, method: str, params: Any, timeout: float = WAIT_S) -> Any:
        return self.answer(self.send_request(method, params), timeout)

    def wait(self, match: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        return self.wait_for(match)

    def open(self, path: Path) -> str:
        uri = path.as_uri()
        self.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "json", "version": 1, "text": path.read_text(encoding="utf-8")}})
        return uri

    def server_info(self) -> dict[str, Any]:
        """A request that needs the loop, nothing else: answered at once by a free loop."""
        info: dict[str, Any] = self.request("workspace/executeCommand", {"command": "trainproof.showServerInfo"})
        return info

    def close(self) -> None:
        self.request("shutdown", None)
        self.notify("exit", None)
        self._out.close()
        self._thread.join(WAIT_S)
        assert not self._thread.is_alive(), "the server did not stop"


class Stuck:
    """Stands in for a blocking function: says it started, waits to be let go, then does
    what the real one does."""

    def __init__(self, real: Callable[..., Any]) -> None:
        self.real = real
        self.started = threading.Event()
        self.release = threading.Event()
        self.threads: list[str] = []

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.threads.append(threading.current_thread().name)
        self.started.set()
        assert self.release.wait(WAIT_S), "never released"
        return self.real(*args, **kwargs)

    def wait_started(self) -> None:
        assert self.started.wait(WAIT_S), "the blocking function was never called"

    def off_the_loop(self) -> bool:
        return bool(self.threads) and LOOP_THREAD not in self.threads


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the rule docs and run pages
    run = tmp_path / "ws" / "lr_hot_diverges"
    shutil.copytree(HF_RUNS / "lr_hot_diverges", run)
    (tmp_path / "ws" / "pyproject.toml").write_text("[tool.trainproof]\n")
    return run


def diagnostics_for(client: InProcessClient, uri: str) -> list[dict[str, Any]]:
    message = client.wait(lambda m: m.get("method") == "textDocument/publishDiagnostics"
                          and m["params"]["uri"] == uri and m["params"]["diagnostics"])
    diagnostics: list[dict[str, Any]] = message["params"]["diagnostics"]
    return diagnostics


def test_the_pyproject_walk_runs_off_the_loop(run: Path, monkeypatch: pytest.MonkeyPatch):
    from trainproof_lsp.judge import settings as config

    stuck = Stuck(config.discover)
    monkeypatch.setattr(config, "discover", stuck)
    client = InProcessClient({}, root=run.parent)
    try:
        uri = client.open(run / "trainer_state.json")
        stuck.wait_started()
        assert client.server_info()["documents"][uri]["last_check"] is None  # answered, the check still waits
        stuck.release.set()
        assert "TP-DIVERGE" in {d["code"] for d in diagnostics_for(client, uri)}
    finally:
        stuck.release.set()
        client.close()
    assert stuck.off_the_loop()


def test_the_first_rule_docs_write_runs_off_the_loop(run: Path, monkeypatch: pytest.MonkeyPatch):
    from trainproof_lsp.server import state

    stuck = Stuck(state.write_rule_docs)
    monkeypatch.setattr(state, "write_rule_docs", stuck)
    client = InProcessClient({"textDocument": {"publishDiagnostics": {"codeDescriptionSupport": True}}},
                             root=run.parent)
    try:
        uri = client.open(run / "trainer_state.json")
        stuck.wait_started()
        assert uri in client.server_info()["documents"]
        stuck.release.set()
        diverge = next(d for d in diagnostics_for(client, uri) if d["code"] == "TP-DIVERGE")
        href = diverge["codeDescription"]["href"]
        assert href.startswith("file:") and href.endswith("rules.md#tp-diverge")
        assert (run.parent.parent / "cache").is_dir()
    finally:
        stuck.release.set()
        client.close()
    assert stuck.off_the_loop() and len(stuck.threads) == 1  # written once


def test_the_run_page_write_runs_off_the_loop(run: Path, monkeypatch: pytest.MonkeyPatch):
    from trainproof_lsp.server import commands

    stuck = Stuck(commands.write_run_page)
    monkeypatch.setattr(commands, "write_run_page", stuck)
    client = InProcessClient({}, root=run.parent)  # no panel, no showDocument: the page goes to a file
    try:
        log = run / "trainer_state.json"
        show = client.send_request("workspace/executeCommand",
                                   {"command": "trainproof.showRun", "arguments": [str(log)]})
        stuck.wait_started()
        assert client.server_info()["name"] == "trainproof-lsp"
        assert not client.answered(show)  # Show run is still waiting for its page
        stuck.release.set()
        result = client.answer(show)
        assert stuck.off_the_loop()
        assert result["status"] == "done" and result["worst_verdict"] == "FAIL"
        page = Path(result["file"])
        assert page.read_text(encoding="utf-8") == result["html"] and "TP-DIVERGE" in result["html"]
    finally:
        stuck.release.set()
        client.close()
