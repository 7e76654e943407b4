"""The server's stdio loop: LSP base-protocol framing read from stdin, each message body
parsed and handed to pygls's protocol.

pygls's own loop parses bodies with the standard library's `json.loads`; a didOpen of a
100k-line dataset is a 20 MB body, which that takes ~45 ms to parse and msgspec ~15 ms, so
bodies of 64 KiB and more go to msgspec. Everything after parsing (structuring into
lsprotocol types, dispatch, responses) is pygls's. A body msgspec refuses (a lone UTF-16
surrogate escape, say) is parsed by `json.loads` instead, so the server accepts exactly
what pygls would.

Unlike pygls's loop, a bad frame never leaves the server deaf (FrameReader: it is logged
and skipped, and reading resynchronises on the next header; an oversize one is never
allocated), and a request pygls cannot structure gets a JSON-RPC error answer instead of
silence (docs/security.md).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import threading
from threading import Event
from typing import Any, BinaryIO, Callable, TypeVar

from lsprotocol.types import LogMessageParams, MessageType

from .lsp import LanguageServer, answer_error, attach_writer, dispatch, report_error, stop_server, structure_message

T = TypeVar("T")

log = logging.getLogger(__name__)
# Bodies below this size (initialize, edits, requests) parse as fast with json.loads, and
# msgspec's import (~4 ms) then waits until the first big one (a didOpen of a dataset).
_MSGSPEC_FROM = 1 << 16


def parse_body(body: bytes) -> Any:
    if len(body) < _MSGSPEC_FROM:
        return json.loads(body)
    import msgspec

    try:
        return msgspec.json.decode(body)
    except (msgspec.DecodeError, RecursionError):
        return json.loads(body)


# Framing limits. A header line is a few dozen bytes; a longer "line" is garbage (or a body
# whose frame was lost) and is read in pieces of this size, never whole.
MAX_HEADER_LINE = 8 << 10
# The largest body accepted. VS Code syncs documents up to 50 MB and Neovim whole buffers;
# JSON escaping can double that. Parsing a body takes several times its size in memory,
# so a frame above this (say a Content-Length of 10^12) is refused unread, never allocated.
MAX_BODY = 512 << 20
_SCAN_CHUNK = 64 << 10
_HEADER = b"content-length:"


class FrameReader:
    """LSP base-protocol frames from a binary stream, one body at a time (`next_body`,
    blocking: the loop runs it in a worker thread).

        Content-Length: 52\r\n        (other headers are ignored)
        \r\n
        {"jsonrpc": "2.0", ...}        exactly 52 bytes, no newline needed

    A frame it cannot take — no Content-Length, a non-numeric or negative one, one above
    MAX_BODY, or a body that is not JSON because its length was wrong — is logged and
    skipped, and reading resynchronises on the next `Content-Length:`, wherever it
    starts (after a wrong length, it follows the rest of a body on the same line)."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._pending = b""  # bytes read past a frame that belong to the next one
        self.bad_frames: list[str] = []  # not yet told to the client (read_messages does)

    def bad(self, text: str) -> None:
        log.warning("bad frame skipped: %s", text)
        self.bad_frames.append(text)

    def push_back(self, data: bytes) -> None:
        self._pending = data + self._pending

    def _readline(self) -> bytes:
        if self._pending:
            cut = self._pending.find(b"\n", 0, MAX_HEADER_LINE)
            if cut >= 0:
                line, self._pending = self._pending[:cut + 1], self._pending[cut + 1:]
                return line
            if len(self._pending) >= MAX_HEADER_LINE:
                line, self._pending = self._pending[:MAX_HEADER_LINE], self._pending[MAX_HEADER_LINE:]
                return line
            head, self._pending = self._pending, b""
            return head + self._stream.readline(MAX_HEADER_LINE - len(head))
        return self._stream.readline(MAX_HEADER_LINE)

    def _read(self, n: int) -> bytes:
        head, self._pending = self._pending[:n], self._pending[n:]
        if len(head) == n:
            return head
        rest = self._stream.read(n - len(head))
        return head + (rest or b"")

    def _skip_to_header(self) -> bool:
        """Discard input up to the next `Content-Length:` in bounded pieces; False at EOF."""
        carry = b""
        read1 = getattr(self._stream, "read1", None)
        while True:
            if self._pending:
                chunk, self._pending = self._pending, b""
            else:
                chunk = read1(_SCAN_CHUNK) if read1 is not None else self._stream.read(_SCAN_CHUNK)
            if not chunk:
                return False
            window = carry + chunk
            at = window.lower().find(_HEADER)
            if at >= 0:
                self._pending = window[at:]
                return True
            carry = window[-(len(_HEADER) - 1):]

    def next_body(self) -> bytes | None:
        """The next well-framed body, or None at the end of the input."""
        while True:
            length: int | None = None
            raw_length = None
            seen = False
            while True:  # headers, up to the empty line
                line = self._readline()
                if not line:
                    return None
                if not line.endswith(b"\n") and len(line) >= MAX_HEADER_LINE:
                    self.bad(f"a header line longer than {MAX_HEADER_LINE} bytes")
                    if not self._skip_to_header():
                        return None
                    length, raw_length, seen = None, None, False
                    continue
                if not line.strip():
                    if seen:
                        break
                    continue  # blank lines between frames
                at = line.lower().find(_HEADER)
                if at > 0:  # the header follows the rest of a body whose length was too short
                    self.bad(f"{at} bytes before a header: {line[:min(at, 60)]!r}")
                    line = line[at:]
                seen = True
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    raw_length = value.strip()
                    length = int(raw_length) if raw_length.isdigit() else None
            if length is None:
                self.bad("no Content-Length" if raw_length is None else f"Content-Length {raw_length[:40]!r}")
                continue
            if length > MAX_BODY:
                self.bad(f"Content-Length {length} is above the limit of {MAX_BODY} bytes; not read")
                if not self._skip_to_header():
                    return None
                continue
            body = self._read(length)
            if len(body) < length:
                return None  # the input ended inside the body
            return body

    def next_message(self) -> tuple[Any] | None:
        """The next body that parses as a JSON object, as a 1-tuple; None at the end of the
        input. A body that does not parse is a frame with a wrong length when a
        `Content-Length:` follows in it: reading starts again there. JSON that is not an
        object (`null`, a number, a JSON-RPC batch array, which LSP does not have) is
        skipped and told to the client the same way."""
        while True:
            body = self.next_body()
            if body is None:
                return None
            try:
                data = parse_body(body)
            except (ValueError, RecursionError):
                at = body.lower().find(_HEADER, 1)
                if at > 0:  # a Content-Length too long took in the next frame: read it again
                    self.push_back(body[at:])
                self.bad(f"a body of {len(body)} bytes that is not JSON: {body[:60]!r}")
                continue
            if isinstance(data, dict):
                return (data,)
            self.bad(f"a body of {len(body)} bytes that is JSON but not a message object "
                     f"({type(data).__name__}): {body[:60]!r}")


def _request_id(data: Any) -> Any:
    """The id of a request (a message with an id and a method) that an error can answer."""
    if isinstance(data, dict) and "method" in data and isinstance(data.get("id"), (int, str)) \
            and not isinstance(data.get("id"), bool):
        return data["id"]
    return None


async def _in_daemon_thread(fn: Callable[[], T]) -> T:
    """fn() in a daemon thread: a read blocked on stdin never holds up the process's exit
    (an executor's threads are joined at exit) nor takes a worker from the checks."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(setter: Callable[[Any], object], value: Any) -> None:
        if not future.done():
            setter(value)

    def run() -> None:
        try:
            result = fn()
        except BaseException as e:  # handed to the loop, raised there
            outcome: tuple[Callable[[Any], object], Any] = (future.set_exception, e)
        else:
            outcome = (future.set_result, result)
        try:
            loop.call_soon_threadsafe(settle, *outcome)
        except RuntimeError:  # the loop is closed: the server is gone
            pass

    threading.Thread(target=run, name="trainproof-stdin", daemon=True).start()
    return await future


def _tell_client(server: LanguageServer, frames: FrameReader) -> None:
    while frames.bad_frames:
        text = frames.bad_frames.pop(0)
        try:
            server.window_log_message(LogMessageParams(type=MessageType.Warning,
                                                       message=f"trainproof-lsp: bad frame skipped: {text}"))
        except Exception:  # pragma: no cover - transport closed
            pass


async def read_messages(server: LanguageServer, frames: FrameReader, stop: Event) -> None:
    while not stop.is_set():
        got = await _in_daemon_thread(frames.next_message)
        _tell_client(server, frames)
        if got is None:
            return
        (data,) = got
        try:
            message = structure_message(server, data)
        except Exception as exc:
            request_id = _request_id(data)
            if request_id is None:
                log.warning("unusable message skipped: %s", exc)
                continue
            # A request with ill-typed params gets an answer, never silence.
            why = (str(exc.__cause__ or exc).splitlines() or [type(exc).__name__])[0]
            log.warning("invalid params for %r: %s", data.get("method"), why)
            answer_error(server, request_id, exc, f"invalid params for {data.get('method')!r}: {why}")
            continue
        try:
            dispatch(server, message)
        except Exception as exc:  # a bad message is reported, never the end of the server
            log.exception("Unable to handle message")
            report_error(server, exc)


def _widen_pipe(stream: BinaryIO) -> None:
    """Linux: a 1 MiB pipe buffer instead of 64 KiB, so a 20 MB didOpen crosses in ~20
    reads rather than ~300 wake-ups of client and server. Not a pipe, not Linux, or not
    allowed: left as it is."""
    try:
        import fcntl

        fcntl.fcntl(stream.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
    except (OSError, ValueError, AttributeError, ImportError):
        pass


def serve_stdio(server: LanguageServer, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
    """What pygls's `start_io` does, with `read_messages` as the loop."""
    stdin = stdin or sys.stdin.buffer
    _widen_pipe(stdin)
    stop = attach_writer(server, stdout or sys.stdout.buffer)

    frames = FrameReader(stdin)
    try:
        asyncio.run(read_messages(server, frames, stop))
    except BrokenPipeError:
        log.error("Connection to the client is lost! Shutting down the server.")
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        stop_server(server)
