"""A raw-pipe LSP client for tests that must control exactly how the server process is
started (argv, working folder, environment) or what bytes it reads: a reader thread
keeps every message, answers the server's requests the way an editor does, and tests
wait on messages with a deadline (a Condition), never on sleeps.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, BinaryIO, Callable, Mapping

# A ceiling so a deaf server fails the test instead of hanging it; never a wait, so generous:
# beside CPU burners and other suites a server start took 13 s of wall time.
WAIT_S = 180.0


def frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def message(payload: dict) -> bytes:
    return frame(json.dumps(payload).encode())


class StreamClient:
    """A client over a pair of byte streams: `write(bytes)` to the server, `stream` from
    it. A reader thread keeps every message and answers the server's requests the way an
    editor does (or as `answer` says: `...` leaves the answer to the test)."""

    def __init__(self, stream: BinaryIO, write: Callable[[bytes], None], *, settings: dict[str, Any] | None = None,
                 answer: Callable[[dict], Any] | None = None) -> None:
        self.settings = settings or {}
        self._answer = answer
        self._stream = stream
        self._write = write
        self.messages: list[dict] = []
        self._cond = threading.Condition()
        self._next_id = 0
        self._write_lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    # --- io -------------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        with self._write_lock:
            self._write(data)

    def _read(self) -> None:
        out = self._stream
        while True:
            length = None
            while True:
                header = out.readline()
                if not header:
                    with self._cond:
                        self._cond.notify_all()
                    return
                if not header.strip():
                    break
                name, _, value = header.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if length is None:
                continue
            msg = json.loads(out.read(length))
            if "method" in msg and "id" in msg:  # a request from the server: answer as an editor does
                self._reply(msg)
            with self._cond:
                self.messages.append(msg)
                self._cond.notify_all()

    def _reply(self, msg: dict) -> None:
        result: Any = None
        if self._answer is not None:
            result = self._answer(msg)
        elif msg["method"] == "workspace/configuration":
            result = [self.settings if item.get("section") == "trainproof" else None
                      for item in msg["params"]["items"]]
        elif msg["method"] == "window/showDocument":
            result = {"success": False}
        if result is not ...:  # `...`: the test answers itself, later
            self.write(message({"jsonrpc": "2.0", "id": msg["id"], "result": result}))

    def _gone(self) -> str | None:
        """Why no message can come any more (the server is gone), or None."""
        return None

    # --- requests and waiting -------------------------------------------------------------

    def notify(self, method: str, params: Any) -> None:
        self.write(message({"jsonrpc": "2.0", "method": method, "params": params}))

    def send_request(self, method: str, params: Any) -> int:
        self._next_id += 1
        self.write(message({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params}))
        return self._next_id

    def wait_for(self, predicate: Callable[[dict], bool], timeout: float = WAIT_S, what: str = "a message") -> dict:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for m in self.messages:
                    if predicate(m):
                        return m
                left = deadline - time.monotonic()
                gone = self._gone() if not self._reader.is_alive() else None
                if left <= 0 or gone is not None:
                    raise AssertionError(f"no {what} within {timeout:g} s{gone or ''}; "
                                         f"got {[m.get('method', m.get('id')) for m in self.messages]}")
                self._cond.wait(min(left, 1.0))

    def response(self, request_id: int, timeout: float = WAIT_S) -> dict:
        return self.wait_for(lambda m: m.get("id") == request_id and "method" not in m, timeout,
                             what=f"answer to request {request_id}")

    def request(self, method: str, params: Any, timeout: float = WAIT_S) -> dict:
        return self.response(self.send_request(method, params), timeout)

    def command(self, command: str, *arguments: Any, timeout: float = WAIT_S) -> Any:
        answer = self.request("workspace/executeCommand", {"command": command, "arguments": list(arguments)},
                              timeout)
        assert "result" in answer, answer
        return answer["result"]

    def initialize(self, root: Path, *, capabilities: dict | None = None, options: Any = None) -> dict:
        answer = self.request("initialize", {
            "processId": None, "rootUri": root.as_uri(), "initializationOptions": options,
            "capabilities": capabilities if capabilities is not None else {"workspace": {"configuration": True}},
            "workspaceFolders": [{"uri": root.as_uri(), "name": root.name}]})
        self.notify("initialized", {})
        return answer


class PipeClient(StreamClient):
    """One server process over stdin/stdout."""

    def __init__(self, argv: list[str], *, cwd: str | Path | None = None, env: Mapping[str, str] | None = None,
                 settings: dict[str, Any] | None = None,
                 answer: Callable[[dict], Any] | None = None,
                 preexec_fn: Callable[[], None] | None = None) -> None:
        self.proc = subprocess.Popen(argv, cwd=cwd, env=None if env is None else dict(env), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=preexec_fn)
        self._stderr: list[bytes] = []
        self._err_reader = threading.Thread(target=lambda: self._stderr.append(self.proc.stderr.read()), daemon=True)
        self._err_reader.start()
        super().__init__(self.proc.stdout, self._to_stdin, settings=settings, answer=answer)

    def _to_stdin(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def _gone(self) -> str | None:
        code = self.proc.poll()
        return None if code is None else f"; exit {code}"

    @property
    def stderr(self) -> str:
        self._err_reader.join(timeout=0)
        return b"".join(self._stderr).decode("utf-8", "replace")

    def close(self, timeout: float = WAIT_S) -> int:
        """shutdown, exit, and the exit code (killed after `timeout`)."""
        try:
            if self.proc.poll() is None:
                self.request("shutdown", None, timeout)
                self.notify("exit", None)
                self.proc.stdin.close()
            return self.proc.wait(timeout)
        except (AssertionError, OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            return self.proc.wait()
        finally:
            self._reader.join(timeout=5)
            self._err_reader.join(timeout=5)
