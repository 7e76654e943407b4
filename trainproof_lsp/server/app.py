"""The server factory and its handlers. `build_server()` makes a fresh server with its
own state (state.py); nothing lives at module level but the handlers, which work on the
server they are given (`ls.tp`). Features are registered in `initialize`, once the
client's capabilities are known, so a client is only offered what it can use.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from lsprotocol import types as lsp

from . import code_actions, commands, hover, lenses, watching
from .diagnostics import Presentation
from .documents import LineDocument, LineEdit
from .lsp import position_encoding
from .settings import SECTION
from .state import CLIENT_FEATURES_OPTION, ClientFeatures, ServerState, TrainproofServer, settings_options

log = logging.getLogger(__name__)


def _load_engine() -> None:
    try:
        from ..core import config  # noqa: F401
        from ..readers import detect  # noqa: F401
        from ..judge import engine  # noqa: F401
        from ..judge import preflight  # noqa: F401
        from ..output import render  # noqa: F401
    except Exception:  # a broken installation: the first check will say what is missing
        log.warning("engine modules could not be preloaded", exc_info=True)
    try:  # optional (the `speed` extra): duplicate search in C on every dataset check
        import numpy  # noqa: F401
    except ImportError:
        pass


# --- lifecycle ----------------------------------------------------------------------------

def initialize(ls: TrainproofServer, params: lsp.InitializeParams) -> None:
    tp = ls.tp
    options = params.initialization_options
    tp.features = ClientFeatures.from_capabilities(params.capabilities, options)
    if options is not None:
        tp.apply_settings(settings_options(options), initial=True)
    tp.presentation = Presentation(encoding=position_encoding(ls),
                                   related_information=tp.features.related_information,
                                   code_description=tp.features.code_description,
                                   docs_href=tp.docs_href, roots=lambda: commands.root_texts(ls))
    if not tp.features.configuration:
        tp.settings_ready.set()
    ls.feature(lsp.TEXT_DOCUMENT_DID_OPEN)(did_open)
    ls.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)(did_change)
    ls.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)(did_close)
    for name, handler in commands.HANDLERS.items():
        ls.command(name)(handler)
    watching.register(ls)
    if tp.features.pull:
        ls.feature(lsp.TEXT_DOCUMENT_DIAGNOSTIC,
                   lsp.DiagnosticOptions(identifier=SECTION, inter_file_dependencies=False,
                                         workspace_diagnostics=False))(pull_diagnostics)
    if tp.features.hover:
        ls.feature(lsp.TEXT_DOCUMENT_HOVER)(hover.on_hover)
    if params.capabilities.text_document is not None and params.capabilities.text_document.code_action is not None:
        ls.feature(lsp.TEXT_DOCUMENT_CODE_ACTION,
                   lsp.CodeActionOptions(code_action_kinds=code_actions.KINDS))(code_actions.code_action)
    if tp.features.code_lens:
        ls.feature(lsp.TEXT_DOCUMENT_CODE_LENS, lsp.CodeLensOptions(resolve_provider=False))(lenses.code_lens)


async def initialized(ls: TrainproofServer, params: lsp.InitializedParams) -> None:
    tp = ls.tp
    # Load the engine now, in a worker, while the client is still opening files:
    # `initialize` was answered without it, the first check should not wait for it.
    tp.analyzer.executor.submit(_load_engine)
    if tp.features.watched_files:
        await watching.register_watchers(ls)
    if tp.features.configuration:
        await fetch_settings(ls)


async def did_change_configuration(ls: TrainproofServer, params: lsp.DidChangeConfigurationParams) -> None:
    if ls.tp.features.configuration:
        await fetch_settings(ls)
    else:
        ls.tp.apply_settings(params.settings)
    ls.tp.analyzer.recheck_all()


def shutdown(ls: TrainproofServer, *args: Any) -> None:
    for task in ls.tp.analyzer.pending.values():
        task.cancel()
    ls.tp.analyzer.executor.shutdown(wait=False, cancel_futures=True)


async def fetch_settings(ls: TrainproofServer) -> None:
    tp = ls.tp
    try:
        answer = await asyncio.wait_for(
            ls.workspace_configuration_async(lsp.ConfigurationParams(items=[lsp.ConfigurationItem(section=SECTION)])),
            tp.settings.configuration_timeout_ms / 1000)
        if answer:
            tp.apply_settings(answer[0])
    except asyncio.TimeoutError:
        log.warning("no answer to workspace/configuration; using defaults")
    except Exception as e:  # a client that cannot answer: defaults
        log.warning("workspace/configuration failed: %s", e)
    finally:
        tp.settings_ready.set()


# --- text sync (to the server's own line store: lsp.TrainproofProtocol) --------------------

def did_open(ls: TrainproofServer, params: lsp.DidOpenTextDocumentParams) -> None:
    tp = ls.tp
    item = params.text_document
    doc = LineDocument.from_text(item.uri, item.version, item.language_id, item.text)
    tp.documents[item.uri] = doc
    tp.paths[str(doc.path)] = doc
    tp.analyzer.opened(doc)


def did_change(ls: TrainproofServer, params: lsp.DidChangeTextDocumentParams) -> None:
    tp = ls.tp
    doc = tp.documents.get(params.text_document.uri)
    if doc is None:
        return
    edits: list[LineEdit] = []
    encoding = tp.presentation.encoding
    for change in params.content_changes:
        if isinstance(change, lsp.TextDocumentContentChangePartial):
            r = change.range
            edit = doc.apply((r.start.line, r.start.character), (r.end.line, r.end.character),
                             change.text, encoding)
        else:
            edit = doc.replace_all(change.text)
        edits.append(edit)
        tp.analyzer.edited(doc, edit)
    doc.version = params.text_document.version
    tp.analyzer.changed(doc, edits)


def did_close(ls: TrainproofServer, params: lsp.DidCloseTextDocumentParams) -> None:
    tp = ls.tp
    uri = params.text_document.uri
    doc = tp.documents.pop(uri, None)
    if doc is not None:
        tp.paths.pop(str(doc.path), None)
    tp.analyzer.closed(uri)
    tp.pulled.discard(uri)
    tp.pushed.discard(uri)
    tp.extras.pop(uri, None)
    tp.publish(uri, [])


# --- pull diagnostics (registered only for clients that pull) -------------------------------

async def pull_diagnostics(ls: TrainproofServer, params: lsp.DocumentDiagnosticParams) -> lsp.DocumentDiagnosticReport:
    tp = ls.tp
    uri = params.text_document.uri
    if uri in tp.documents and uri not in tp.pulled:
        tp.pulled.add(uri)
        if uri in tp.pushed:  # from now on pulled: take back what was pushed
            tp.pushed.discard(uri)
            tp.publish(uri, tp.extras.get(uri, []))
    result = await tp.analyzer.current(uri)
    if result is None:
        return lsp.RelatedFullDocumentDiagnosticReport(items=[], result_id=None)
    if params.previous_result_id == result.result_id:
        return lsp.RelatedUnchangedDocumentDiagnosticReport(result_id=result.result_id)
    return lsp.RelatedFullDocumentDiagnosticReport(items=result.diagnostics, result_id=result.result_id)


# --- the factory ---------------------------------------------------------------------------

def build_server() -> TrainproofServer:
    """A new server; its handlers work on its own state."""
    logging.getLogger("pygls").setLevel(logging.WARNING)  # pygls logs every message at INFO
    server = TrainproofServer()
    server.feature(lsp.INITIALIZE)(initialize)
    server.feature(lsp.INITIALIZED)(initialized)
    server.feature(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)(did_change_configuration)
    server.feature(lsp.SHUTDOWN)(shutdown)
    return server


__all__ = ["build_server", "TrainproofServer", "ServerState", "ClientFeatures", "CLIENT_FEATURES_OPTION"]
