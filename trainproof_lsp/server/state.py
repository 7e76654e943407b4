"""What one server knows: the client's features, its settings, the open documents, the
analyzer and its results, and how diagnostics and messages go out. `TrainproofServer`
carries one `ServerState` as `ls.tp`; every handler (app, commands, hover, lenses,
watching) works on it.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Iterable, Mapping

from lsprotocol import types as lsp

from .. import TOOL_NAME, __version__
from .analysis import Analyzer, Configs, DocResult
from .diagnostics import Presentation
from .documents import LineDocument
from .lines import DiskLines
from .lsp import LanguageServer, TrainproofProtocol
from .settings import SECTION, Settings, parse_settings
from .token_map import EditorTokenMaps

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
        self._docs_written: asyncio.Future[str | None] | None = None
        self._disk_lines = DiskLines()
        self.token_maps = EditorTokenMaps()  # server/token_map.py: a dataset row's map (hover, lens)

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
        """The rule's docs for codeDescription.href: the rulesDocsUrl setting, else the
        local copy `ready()` wrote. No I/O: it is called for every diagnostic."""
        template = self.settings.rules_docs_url
        if template:
            return template.format(id=rule_id, id_lower=rule_id.lower())
        return f"{self._docs_href_base}#{rule_id.lower()}" if self._docs_href_base else None

    async def ready(self) -> None:
        """What a check needs before it runs: the settings (the first answer to
        workspace/configuration, gated) and, when its diagnostics link to the rule docs,
        the local copy of the docs — written once, in a worker thread, never on the loop."""
        await self.settings_gate()
        if self._docs_href_base is not None or self.settings.rules_docs_url or not self.features.code_description:
            return
        if self._docs_written is None:
            self._docs_written = asyncio.ensure_future(asyncio.to_thread(write_rule_docs))
        base = await asyncio.shield(self._docs_written)
        self._docs_href_base = base or ""

    async def load_lines(self, cited: Mapping[str, Iterable[int]]) -> None:
        """Reads (in a worker thread) the lines diagnostics will take their text from
        (`lines.cited_lines`: {path: lines}) in files that are not open, so `line_text`
        never reads a file on the loop. Only regular text files under a size cap are
        read, and only up to the last cited line (server/lines.py)."""
        wanted = {p: lines for p, lines in cited.items() if p and p not in self.paths}
        if wanted:
            await asyncio.to_thread(self._disk_lines.load, wanted)

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
    def key(d: lsp.Diagnostic) -> tuple[object, ...]:
        r = d.range
        return (d.code, r.start.line, r.start.character, r.end.line, r.end.character)

    seen = {key(d) for d in own}
    return [d for d in extras if key(d) not in seen]


class TrainproofServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(name=TOOL_NAME, version=__version__, protocol_cls=TrainproofProtocol,
                         text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental, max_workers=2)
        self.tp = ServerState(self)

    def start_io(self, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
        """Serve on stdin/stdout (messages parsed by msgspec: server/stdio.py)."""
        from .stdio import serve_stdio

        serve_stdio(self, stdin, stdout)


def cache_base() -> Path:
    """The server's cache folder for this version: the run pages and the rule docs."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / TOOL_NAME / __version__


def write_rule_docs() -> str | None:
    """The rule docs as a local file for codeDescription.href: always there, offline, and
    the same version as the server that cites them. Blocking: run in a worker thread."""
    from ..output.render import rules_markdown

    base = cache_base()
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
