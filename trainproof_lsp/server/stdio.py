"""The server's stdio loop: LSP base-protocol framing read from stdin, each message body
parsed and handed to pygls's protocol.

pygls's own loop parses bodies with the standard library's `json.loads`; a didOpen of a
100k-line dataset is a 20 MB body, which that takes ~45 ms to parse and msgspec ~15 ms, so
bodies of 64 KiB and more go to msgspec. Everything after parsing (structuring into
lsprotocol types, dispatch, responses) is pygls's. A body msgspec refuses (a lone UTF-16
surrogate escape, say) is parsed by `json.loads` instead, so the server accepts exactly
what pygls would.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from threading import Event
from typing import TYPE_CHECKING, Any, BinaryIO

from pygls.exceptions import JsonRpcException
from pygls.io_ import StdinAsyncReader, StdoutWriter

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer

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


async def read_messages(server: "LanguageServer", reader: StdinAsyncReader, stop: Event) -> None:
    protocol = server.protocol
    while not stop.is_set():
        length = 0
        while True:  # headers, up to the empty line
            header = await reader.readline()
            if not header:
                return
            if not header.strip():
                break
            name, _, value = header.partition(b":")
            if name.strip().lower() == b"content-length":
                try:
                    length = int(value)
                except ValueError:
                    length = 0
        if length <= 0:
            continue
        body = await reader.readexactly(length)
        if not body:
            return
        try:
            protocol.handle_message(protocol.structure_message(parse_body(body)))
        except Exception as exc:  # a bad message is reported, never the end of the server
            log.exception("Unable to handle message")
            server.report_server_error(exc, JsonRpcException)


def _widen_pipe(stream: BinaryIO) -> None:
    """Linux: a 1 MiB pipe buffer instead of 64 KiB, so a 20 MB didOpen crosses in ~20
    reads rather than ~300 wake-ups of client and server. Not a pipe, not Linux, or not
    allowed: left as it is."""
    try:
        import fcntl

        fcntl.fcntl(stream.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
    except (OSError, ValueError, AttributeError, ImportError):
        pass


def serve_stdio(server: "LanguageServer", stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
    """What pygls's `start_io` does, with `read_messages` as the loop."""
    server._stop_event = stop = Event()
    stdin = stdin or sys.stdin.buffer
    _widen_pipe(stdin)
    reader = StdinAsyncReader(stdin, server.thread_pool)
    server.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))
    try:
        asyncio.run(read_messages(server, reader, stop))
    except BrokenPipeError:
        log.error("Connection to the client is lost! Shutting down the server.")
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.shutdown()
