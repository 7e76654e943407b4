"""The one module that reaches into pygls beyond its handler API.

The rest of the server registers handlers (`ls.feature`, `ls.command`) and calls the
server's public LSP methods (`ls.text_document_publish_diagnostics(...)`, ...). What it
needs of pygls's insides — the protocol object (message structuring, dispatch, error
answers, the writer), the workspace's folders and position encoding, the table of
registered features, progress tokens and their cancellation — goes through the functions
here, so a pygls release that moves them is met in this file alone.

    TrainproofProtocol   text sync to the server's own line store; late answers ignored
    Progress             $/progress for one piece of work, cancellable by the client
    position_encoding, workspace_folders, registered_methods
    attach_writer, structure_message, dispatch, answer_error, report_error   (stdio.py)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from threading import Event
from typing import Any, BinaryIO, Callable

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.io_ import StdoutWriter
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

from .documents import uri_to_path

log = logging.getLogger(__name__)

__all__ = ["LanguageServer", "TrainproofProtocol", "Progress", "position_encoding", "workspace_folders",
           "registered_methods", "attach_writer", "structure_message", "dispatch", "answer_error",
           "report_error", "stop_server", "JsonRpcException"]

Handler = Callable[..., Any]


class TrainproofProtocol(LanguageServerProtocol):
    """Text sync goes to the server's own line store (documents.py), not pygls's
    one-string workspace, so a one-line edit costs one line, not the whole document."""

    def _user(self, method: str) -> Handler | None:
        handler: Handler | None = self.fm.features.get(method)
        return handler

    def _handle_response(self, msg_id: Any, result: Any = None, error: Any = None) -> None:
        """An answer to a request the server stopped waiting for (workspace/configuration
        after configurationTimeoutMs, a progress token, showDocument) is ignored quietly:
        pygls would set it on the cancelled future and show "Error in server: CANCELLED"."""
        future = self._request_futures.get(msg_id)
        if future is not None and future.done():
            self._request_futures.pop(msg_id, None)
            text = f"late answer to request {msg_id} ignored: no longer waited for"
            log.info("%s", text)
            with contextlib.suppress(Exception):  # a log line for the client's log, not a message
                self._server.window_log_message(lsp.LogMessageParams(type=lsp.MessageType.Log, message=text))
            return
        super()._handle_response(msg_id, result, error)

    @lsp_method(lsp.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: lsp.DidOpenTextDocumentParams) -> Iterator[Any]:
        if (handler := self._user(lsp.TEXT_DOCUMENT_DID_OPEN)) is not None:
            yield handler, (params,), None

    @lsp_method(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: lsp.DidChangeTextDocumentParams) -> Iterator[Any]:
        if (handler := self._user(lsp.TEXT_DOCUMENT_DID_CHANGE)) is not None:
            yield handler, (params,), None

    @lsp_method(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: lsp.DidCloseTextDocumentParams) -> Iterator[Any]:
        if (handler := self._user(lsp.TEXT_DOCUMENT_DID_CLOSE)) is not None:
            yield handler, (params,), None


# --- what the server asks of pygls's state --------------------------------------------------

def position_encoding(ls: LanguageServer) -> str:
    """The encoding negotiated at initialize (utf-16 unless the client offered another)."""
    try:
        encoding = ls.workspace.position_encoding
    except RuntimeError:  # before initialize: no workspace yet
        encoding = None
    return str(encoding or "utf-16")


def workspace_folders(ls: LanguageServer) -> tuple[list[Path], Path | None]:
    """The workspace folders the client named, in order, and its root path (or None)."""
    try:
        workspace = ls.workspace
    except RuntimeError:  # before initialize: no workspace yet
        return [], None
    folders = [uri_to_path(f.uri) for f in workspace.folders.values()]
    return folders, Path(workspace.root_path) if workspace.root_path else None


def registered_methods(ls: LanguageServer) -> tuple[list[str], list[str]]:
    """The LSP methods and the commands this server has handlers for, sorted."""
    manager = ls.protocol.fm
    return sorted(manager.features), sorted(manager.commands)


# --- $/progress -------------------------------------------------------------------------------

class Progress:
    """$/progress for one piece of work when the client shows progress (`enabled`); a
    no-op otherwise. The client's cancel button sets `cancelled()`."""

    def __init__(self, ls: LanguageServer, title: str, *, enabled: bool, token: str | None = None) -> None:
        self._ls = ls
        self.title = title
        self.token = token
        self.enabled = enabled
        self._cancel: Future[Any] | None = None

    async def __aenter__(self) -> "Progress":
        if not self.enabled:
            return self
        try:
            if self.token is None:
                import uuid

                self.token = f"trainproof-{uuid.uuid4().hex}"
                await asyncio.wait_for(self._ls.work_done_progress.create_async(self.token), 5)
            self._ls.work_done_progress.begin(self.token, lsp.WorkDoneProgressBegin(
                title=self.title, cancellable=True, message="starting"))
            self._cancel = self._ls.work_done_progress.tokens.get(self.token)
        except Exception as e:  # no progress UI is no reason to fail the command
            log.warning("progress not available: %s", e)
            self.enabled = False
        return self

    def cancelled(self) -> bool:
        return self._cancel is not None and self._cancel.cancelled()

    def report(self, message: str) -> None:
        if self.enabled and self.token is not None:
            self._ls.work_done_progress.report(self.token, lsp.WorkDoneProgressReport(message=message))

    async def __aexit__(self, *exc: object) -> None:
        if self.enabled and self.token is not None:
            self._ls.work_done_progress.end(self.token, lsp.WorkDoneProgressEnd(
                message="cancelled" if self.cancelled() else "done"))
            self._ls.work_done_progress.tokens.pop(self.token, None)


# --- the stdio loop's hooks (stdio.py) ---------------------------------------------------------

def attach_writer(ls: LanguageServer, stdout: BinaryIO) -> Event:
    """Answers go to `stdout`; the returned event stops the server's loop when set (by
    pygls's `exit` handler and `shutdown()`)."""
    stop = Event()
    ls._stop_event = stop
    ls.protocol.set_writer(StdoutWriter(stdout))
    return stop


def structure_message(ls: LanguageServer, data: Any) -> Any:
    """A parsed JSON body as lsprotocol's typed message; raises on ill-typed params."""
    return ls.protocol.structure_message(data)


def dispatch(ls: LanguageServer, message: Any) -> None:
    """A typed message to its handler."""
    ls.protocol.handle_message(message)


def answer_error(ls: LanguageServer, request_id: int | str, exc: Exception, message: str) -> None:
    """A JSON-RPC error answer to a request that never reached a handler."""
    code = exc.code if isinstance(exc, JsonRpcException) else JsonRpcInvalidParams.CODE
    ls.protocol._send_response(request_id, None, lsp.ResponseError(code=code, message=message))


def stop_server(ls: LanguageServer) -> None:
    """pygls's own shutdown: the stop event, its thread pool, its transport."""
    shutdown: Callable[[], None] = ls.shutdown  # untyped in pygls
    shutdown()


def report_error(ls: LanguageServer, exc: Exception) -> None:
    """An error in a handler, shown to the user the way pygls does."""
    ls.report_server_error(exc, JsonRpcException)
