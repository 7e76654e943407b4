"""The server factory. `build_server()` makes a fresh server with its own state; nothing
lives at module level. Features are registered in `initialize`, once the client's
capabilities are known, so a client is only offered what it can use.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from dataclasses import dataclass
from typing import Any

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

from .. import TOOL_NAME, __version__
from . import commands, diagnostics, hover, lenses, watching
from .analysis import Analyzer, Configs, DocResult
from .diagnostics import DiskLines, Presentation
from .documents import LineDocument, LineEdit
from .settings import SECTION, Settings, parse_settings

log = logging.getLogger(__name__)


def _get(obj: Any, dotted: str, default: Any = None) -> Any:
    for part in dotted.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return default
    return obj


# initializationOptions key for what a client can do that LSP has no capability for:
#   {"clientFeatures": {"showRunPanel": true}, ...settings}
# Only clients send it (the VS Code extension: it shows trainproof.showRun's page in its own
# panel); it is no user setting, so settings parsing never sees it.
CLIENT_FEATURES_OPTION = "clientFeatures"


def _client_option(options: Any, name: str) -> Any:
    features = options.get(CLIENT_FEATURES_OPTION) if isinstance(options, dict) else None
    return features.get(name) if isinstance(features, dict) else None


def settings_options(options: Any) -> Any:
    """initializationOptions without the client's own features: the settings."""
    if isinstance(options, dict) and CLIENT_FEATURES_OPTION in options:
        return {k: v for k, v in options.items() if k != CLIENT_FEATURES_OPTION}
    return options


@dataclass(frozen=True, kw_only=True)
class ClientFeatures:
    """What this client can do, read once from its capabilities (and the clientFeatures
    of its initializationOptions)."""

    pull: bool = False
    diagnostic_refresh: bool = False
    hover: bool = False
    hover_markdown: bool = False
    code_lens: bool = False
    code_lens_refresh: bool = False
    configuration: bool = False
    watched_files: bool = False
    progress: bool = False
    related_information: bool = False
    code_description: bool = False
    show_document: bool = False  # window/showDocument (LSP 3.16): opens a URI the server names
    show_run_panel: bool = False  # shows trainproof.showRun's page itself (clientFeatures)

    @classmethod
    def from_capabilities(cls, caps: lsp.ClientCapabilities, options: Any = None) -> "ClientFeatures":
        hover_formats = _get(caps, "text_document.hover.content_format") or []
        return cls(
            pull=_get(caps, "text_document.diagnostic") is not None,
            diagnostic_refresh=bool(_get(caps, "workspace.diagnostics.refresh_support")),
            hover=_get(caps, "text_document.hover") is not None,
            hover_markdown=lsp.MarkupKind.Markdown in hover_formats,
            code_lens=_get(caps, "text_document.code_lens") is not None,
            code_lens_refresh=bool(_get(caps, "workspace.code_lens.refresh_support")),
            configuration=bool(_get(caps, "workspace.configuration")),
            watched_files=bool(_get(caps, "workspace.did_change_watched_files.dynamic_registration")),
            progress=bool(_get(caps, "window.work_done_progress")),
            related_information=bool(_get(caps, "text_document.publish_diagnostics.related_information")),
            code_description=bool(_get(caps, "text_document.publish_diagnostics.code_description_support")),
            show_document=bool(_get(caps, "window.show_document.support")),
            show_run_panel=_client_option(options, "showRunPanel") is True,
        )


class TrainproofProtocol(LanguageServerProtocol):
    """Text sync goes to the server's own line store (documents.py), not pygls's
    one-string workspace, so a one-line edit costs one line, not the whole document."""

    def _user(self, method: str):
        return self.fm.features.get(method)

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
    def lsp_text_document__did_open(self, params: lsp.DidOpenTextDocumentParams):
        if (handler := self._user(lsp.TEXT_DOCUMENT_DID_OPEN)) is not None:
            yield handler, (params,), None

    @lsp_method(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: lsp.DidChangeTextDocumentParams):
        if (handler := self._user(lsp.TEXT_DOCUMENT_DID_CHANGE)) is not None:
            yield handler, (params,), None

    @lsp_method(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: lsp.DidCloseTextDocumentParams):
        if (handler := self._user(lsp.TEXT_DOCUMENT_DID_CLOSE)) is not None:
            yield handler, (params,), None


class ServerState:
    """Everything the server knows; one per server."""

    def __init__(self, server: "TrainproofServer") -> None:
        self.server = server
        self.documents: dict[str, LineDocument] = {}
        self.paths: dict[str, LineDocument] = {}  # the same documents by file path
        self.settings = Settings()
        self.features = ClientFeatures()
        self.presentation = Presentation()
        self.analyzer = Analyzer(server)
        self.configs = Configs(server)
        self.baseline: str | None = None  # "Set as baseline", for this session
        self.disk_published: set[str] = set()  # URIs published from disk (doctor, watching)
        self.registered: list[str] = []
        self.pulled: set[str] = set()  # open documents the client has pulled diagnostics for
        # Diagnostics a command (compare, env) produced for an open document. They travel
        # by push only — beside the document's own (pushed or pulled) ones, never in them.
        self.extras: dict[str, list[lsp.Diagnostic]] = {}
        self.pushed: set[str] = set()  # open documents with pushed diagnostics
        self._settings_ready: asyncio.Event | None = None
        self._initial_settings: dict[str, Any] = {}
        self._docs_href_base: str | None = None
        self._disk_lines = DiskLines()

    # --- settings gate ------------------------------------------------------------------

    @property
    def settings_ready(self) -> asyncio.Event:
        if self._settings_ready is None:
            self._settings_ready = asyncio.Event()
        return self._settings_ready

    async def settings_gate(self) -> None:
        if self.settings_ready.is_set():
            return
        try:
            await asyncio.wait_for(self.settings_ready.wait(), self.settings.configuration_timeout_ms / 1000)
        except asyncio.TimeoutError:
            self.settings_ready.set()  # go on with what we have; never wait twice

    def apply_settings(self, raw: Any, *, initial: bool = False) -> None:
        """Settings from the client; later answers are laid over initializationOptions."""
        if isinstance(raw, dict) and isinstance(raw.get(SECTION), dict):
            raw = raw[SECTION]
        if initial:
            self._initial_settings = raw if isinstance(raw, dict) else {}
        elif isinstance(raw, dict):
            raw = {**self._initial_settings, **raw}
        settings, problems = parse_settings(raw, Settings())
        self.settings = settings
        for problem in problems:
            self.warn(f"trainproof: {problem}")
        self.configs.clear()

    # --- text of lines, for column units --------------------------------------------------

    def line_text(self, path: str, line: int) -> str | None:
        doc = self.paths.get(path)
        return doc.line_for_columns(line) if doc is not None else self._disk_lines(path, line)

    def docs_href(self, rule_id: str) -> str | None:
        template = self.settings.rules_docs_url
        if template:
            return template.format(id=rule_id, id_lower=rule_id.lower())
        if self._docs_href_base is None:
            self._docs_href_base = _write_rule_docs() or ""
        return f"{self._docs_href_base}#{rule_id.lower()}" if self._docs_href_base else None

    # --- messages and publishing -----------------------------------------------------------

    def message(self, text: str, kind: lsp.MessageType = lsp.MessageType.Info) -> None:
        try:
            self.server.window_show_message(lsp.ShowMessageParams(type=kind, message=text))
        except Exception:  # pragma: no cover - transport closed
            log.warning("could not show message: %s", text)

    def warn(self, text: str) -> None:
        self.message(text, lsp.MessageType.Warning)

    def publish(self, uri: str, diagnostics: list[lsp.Diagnostic], version: int | None = None) -> None:
        self.server.text_document_publish_diagnostics(
            lsp.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=version))

    def publish_extras(self, uri: str, diagnostics: list[lsp.Diagnostic]) -> None:
        """A command's diagnostics for an open document, less those the buffer's own
        check already shows (the environment check repeats the script's foot-guns)."""
        self.extras[uri] = diagnostics
        result = self.analyzer.results.get(uri)
        own = result.diagnostics if result is not None else []
        if uri in self.pulled or result is None:
            self.publish(uri, not_shown(own, diagnostics))
        else:
            self.publish(uri, own + not_shown(own, diagnostics), result.version)

    def publish_result(self, result: DocResult, previous: DocResult | None) -> None:
        if result.uri in self.pulled:
            # The client pulls this document's diagnostics (pushing too would show every
            # finding twice). A re-check without an edit (settings, a watched file) is
            # announced when the client can hear it.
            if previous is not None and previous.version == result.version and self.features.diagnostic_refresh:
                self.server.workspace_diagnostic_refresh(None)
        else:
            # Every client takes pushed diagnostics. A pull client may never pull a
            # document it does not display (Neovim pulls only for shown buffers), so it
            # is pushed until its first pull.
            self.publish(result.uri, result.diagnostics + not_shown(result.diagnostics, self.extras.get(result.uri, [])),
                         result.version)
            self.pushed.add(result.uri)
        if self.features.code_lens and self.features.code_lens_refresh and (
                previous is None or previous.report is None or result.report is None
                or previous.report.verdict != result.report.verdict):
            self.server.workspace_code_lens_refresh(None)


def not_shown(own: list[lsp.Diagnostic], extras: list[lsp.Diagnostic]) -> list[lsp.Diagnostic]:
    """`extras` without the diagnostics `own` already has (same rule at the same range)."""
    def key(d: lsp.Diagnostic) -> tuple:
        r = d.range
        return (d.code, r.start.line, r.start.character, r.end.line, r.end.character)

    seen = {key(d) for d in own}
    return [d for d in extras if key(d) not in seen]


class TrainproofServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(name=TOOL_NAME, version=__version__, protocol_cls=TrainproofProtocol,
                         text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental, max_workers=2)
        self.tp = ServerState(self)

    def start_io(self, stdin: Any = None, stdout: Any = None) -> None:
        """Serve on stdin/stdout (messages parsed by msgspec: server/stdio.py)."""
        from .stdio import serve_stdio

        serve_stdio(self, stdin, stdout)


def _write_rule_docs() -> str | None:
    """The rule docs as a local file for codeDescription.href: always there, offline, and
    the same version as the server that cites them."""
    from ..output.render import rules_markdown

    base = commands.cache_base()
    target = base / "rules.md"
    try:
        text = rules_markdown()
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            base.mkdir(parents=True, exist_ok=True)
            tmp = target.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(target)
        return target.as_uri()
    except OSError:
        return None


def _load_engine() -> None:
    try:
        from ..core import config
        from ..readers import detect
        from ..judge import engine
        from ..judge import preflight
        from ..output import render  # noqa: F401
    except Exception:  # a partial installation: the first check will say what is missing
        log.warning("engine modules could not be preloaded", exc_info=True)
    try:  # optional (the `speed` extra): duplicate search in C on every dataset check
        import numpy  # noqa: F401
    except ImportError:
        pass


# --- the factory ---------------------------------------------------------------------------

def build_server() -> TrainproofServer:
    """A new server, its handlers bound to its own state."""
    logging.getLogger("pygls").setLevel(logging.WARNING)  # pygls logs every message at INFO
    server = TrainproofServer()

    @server.feature(lsp.INITIALIZE)
    def initialize(ls: TrainproofServer, params: lsp.InitializeParams) -> None:
        tp = ls.tp
        options = params.initialization_options
        tp.features = ClientFeatures.from_capabilities(params.capabilities, options)
        if options is not None:
            tp.apply_settings(settings_options(options), initial=True)
        encoding = ls.protocol.workspace.position_encoding if ls.protocol.workspace else "utf-16"
        tp.presentation = Presentation(encoding=str(encoding or "utf-16"),
                                       related_information=tp.features.related_information,
                                       code_description=tp.features.code_description,
                                       docs_href=tp.docs_href)
        if not tp.features.configuration:
            tp.settings_ready.set()
        _register_sync(ls)
        commands.register(ls)
        watching.register(ls)
        if tp.features.pull:
            diagnostics_pull(ls)
        if tp.features.hover:
            hover.register(ls)
        if tp.features.code_lens:
            lenses.register(ls)

    @server.feature(lsp.INITIALIZED)
    async def initialized(ls: TrainproofServer, params: lsp.InitializedParams) -> None:
        tp = ls.tp
        # Load the engine now, in a worker, while the client is still opening files:
        # `initialize` was answered without it, the first check should not wait for it.
        tp.analyzer.executor.submit(_load_engine)
        if tp.features.watched_files:
            await watching.register_watchers(ls)
        if tp.features.configuration:
            await fetch_settings(ls)

    @server.feature(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(ls: TrainproofServer, params: lsp.DidChangeConfigurationParams) -> None:
        if ls.tp.features.configuration:
            await fetch_settings(ls)
        else:
            ls.tp.apply_settings(params.settings)
        ls.tp.analyzer.recheck_all()

    @server.feature(lsp.SHUTDOWN)
    def shutdown(ls: TrainproofServer, *args: Any) -> None:
        for task in ls.tp.analyzer.pending.values():
            task.cancel()
        ls.tp.analyzer.executor.shutdown(wait=False, cancel_futures=True)

    return server


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


def _register_sync(ls: TrainproofServer) -> None:
    tp = ls.tp

    @ls.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: TrainproofServer, params: lsp.DidOpenTextDocumentParams) -> None:
        item = params.text_document
        doc = LineDocument.from_text(item.uri, item.version, item.language_id, item.text)
        tp.documents[item.uri] = doc
        tp.paths[str(doc.path)] = doc
        tp.analyzer.opened(doc)

    @ls.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: TrainproofServer, params: lsp.DidChangeTextDocumentParams) -> None:
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

    @ls.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: TrainproofServer, params: lsp.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        doc = tp.documents.pop(uri, None)
        if doc is not None:
            tp.paths.pop(str(doc.path), None)
        tp.analyzer.closed(uri)
        tp.pulled.discard(uri)
        tp.pushed.discard(uri)
        tp.extras.pop(uri, None)
        tp.publish(uri, [])


def diagnostics_pull(ls: TrainproofServer) -> None:
    tp = ls.tp

    @ls.feature(lsp.TEXT_DOCUMENT_DIAGNOSTIC,
                lsp.DiagnosticOptions(identifier=SECTION, inter_file_dependencies=False,
                                      workspace_diagnostics=False))
    async def pull(ls: TrainproofServer, params: lsp.DocumentDiagnosticParams):
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


__all__ = ["build_server", "TrainproofServer", "ClientFeatures", "diagnostics"]
