"""Judging open documents: debounced per document, off the event loop, superseded work
dropped, results stamped with the document version they judged.

    didOpen ──► schedule(uri, 0) ─┐
    didChange ► schedule(uri, debounce) ─► (settings gate) ─► worker thread: engine
                     │ a newer edit cancels the pending task; a result for an old
                     │ version is thrown away, never published
                     ▼
               DocResult(version, report, diagnostics) ─► push, or kept for pull

Datasets with an incremental session (see datasets.py) are re-checked on the loop: an
edit re-scans only the lines it touched, which is cheaper than a thread hop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Protocol

from lsprotocol import types as lsp

from ..core.model import Finding, Report, Run
from . import datasets
from .diagnostics import Presentation, capped
from .documents import LineDocument, LineEdit
from .kinds import DocKind, kind_of
from .lines import cited_lines

if TYPE_CHECKING:
    from ..core.config import Config
    from .settings import Settings

class _State(Protocol):
    """What analysis needs of the server's state (state.ServerState, which builds the
    Analyzer and Configs below: a Protocol here keeps the import one-way)."""

    documents: dict[str, LineDocument]
    configs: "Configs"
    presentation: Presentation

    @property
    def settings(self) -> "Settings": ...

    async def ready(self) -> None: ...

    def warn(self, text: str) -> None: ...

    def line_text(self, path: str, line: int) -> str | None: ...

    async def load_lines(self, cited: Mapping[str, Iterable[int]]) -> None: ...

    def publish_result(self, result: "DocResult", previous: "DocResult | None") -> None: ...


class _Server(Protocol):
    @property
    def tp(self) -> _State: ...


# The engine (readers, rules) is imported on first use, in a worker thread, not at
# start-up: `initialize` is answered before any of it is loaded.
HEAD_BYTES = 64 * 1024  # detect.HEAD_BYTES; checked equal by tests/test_lsp_units.py

log = logging.getLogger(__name__)


@dataclass(eq=False)
class DocResult:
    uri: str
    version: int
    kind: DocKind
    report: Report | None
    findings: tuple[Finding, ...]
    diagnostics: list[lsp.Diagnostic]
    result_id: str
    elapsed_ms: float = 0.0
    note: str = ""  # why a document of a known kind got no diagnostics
    mode: str = "full"  # "full", or "incremental: N line(s) re-scanned"
    data: bytes | None = field(default=None, repr=False)  # for the hover's lazy re-read
    _run: Any = field(default=None, repr=False)

    def run(self, path: Path) -> Run | None:
        """The metric run behind a log's findings (for sparklines), read once on demand."""
        if self._run is None and self.kind.kind == "metrics" and self.data is not None:
            from ..judge import engine
            from ..readers.detect import detect

            try:
                self._run = engine.read_run(path, detect(path, self.data[:HEAD_BYTES]), self.data)
            except Exception:  # a hover without a picture, never an error
                self._run = False
        return self._run or None


class Configs:
    """`[tool.trainproof]` per folder, cached; a broken file is reported once and the
    defaults are used until it is fixed. Finding and reading the file (a walk up the
    folders to the nearest pyproject.toml) happens in a worker thread."""

    def __init__(self, server: _Server) -> None:
        self._server = server
        self._cache: dict[Path, "Config"] = {}
        self._reported: set[str] = set()
        self._cleared = 0  # a load that started before a clear() is not cached

    def clear(self) -> None:
        self._cache.clear()
        self._reported.clear()
        self._cleared += 1

    async def for_path(self, path: Path) -> "Config":
        """The config for a file; waits for the settings it depends on first."""
        tp = self._server.tp
        await tp.ready()
        folder = path.parent
        cached = self._cache.get(folder)
        if cached is not None:
            return cached
        cleared = self._cleared
        config, problems = await asyncio.to_thread(load_config, folder, tp.settings)
        if cleared != self._cleared:  # settings or a pyproject.toml changed meanwhile: the re-check loads again
            return config
        for message in problems:
            if message not in self._reported:
                self._reported.add(message)
                tp.warn(message)
        self._cache[folder] = config
        return config


def load_config(folder: Path, settings: "Settings") -> tuple["Config", list[str]]:
    """The config for files in `folder` with the editor's settings laid over it, and what
    was wrong with either (a message each). Blocking: runs in a worker thread."""
    from ..core.config import Config, ConfigError, keep_security, with_caps, with_columns, with_fields, with_vocab
    from ..judge.settings import discover, load_file
    from ..rules import SECURITY_IDS

    problems: list[str] = []
    try:
        config = load_file(Path(settings.config_file)) if settings.config_file else discover(folder)
    except ConfigError as e:
        problems.append(f"trainproof: {e}; using default settings")
        config = Config()
    except OSError:
        config = Config()
    # The opened folder's settings file is the folder's, as in CI: it cannot turn off a
    # security rule (an `ignore` beside the unsafe checkpoint it adds), and the editor has
    # no command line to allow it.
    config, kept = keep_security(config, SECURITY_IDS)
    if kept:
        problems.append(f"trainproof: {config.source} turns off security rule(s) {', '.join(kept)}; they run "
                        "anyway (a settings file cannot turn them off)")
    config = with_vocab(config, settings.vocab_size)
    config = with_caps(config, settings)  # the editor's trainproof.max* caps, when set
    try:
        config = with_columns(config, settings.columns, "trainproof.columns")
    except ConfigError as e:
        problems.append(f"trainproof: {e}; the setting is not used")
    try:
        config = with_fields(config, settings.fields, "trainproof.fields")
    except ConfigError as e:
        problems.append(f"trainproof: {e}; the setting is not used")
    return config, problems


def _judge_buffer(path: Path, text: str | None, lines: list[str] | None, config: Config,
                  kind: DocKind) -> tuple[Report | None, bytes | None, str]:
    """Runs in a worker thread, on a snapshot of the buffer (its text, or a copy of its
    line list). Never raises: an engine bug is a NOT-CHECKED report."""
    from ..judge import engine

    if text is None:
        text = "\n".join(lines or ())
    try:
        if kind.kind == "config":
            report = _judge_tokenizer(path, config)
            return report, None, "" if report is not None else "model config: nothing beside it in its folder to judge"
        data = text.encode("utf-8", "replace")
        return engine.judge_file(path, config, data=data), data, ""
    except Exception as e:  # never a dead server: say what happened on the document
        log.exception("judging %s failed", path)
        reason = f"{path}: internal error while judging ({type(e).__name__}: {e})"
        return engine.not_checked(str(path), kind.kind, kind.format, reason), None, ""


def _judge_tokenizer(path: Path, config: "Config") -> Report | None:
    """A tokenizer or model settings file is judged with its folder, from disk (the rules
    need the other files of the folder too): server/bundle.py."""
    from .bundle import judge_config_file

    return judge_config_file(path, config)


class Analyzer:
    def __init__(self, server: _Server) -> None:
        self._server = server
        self.executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="trainproof-judge")
        self.results: dict[str, DocResult] = {}
        self.pending: dict[str, asyncio.Task[None]] = {}
        self.sessions: dict[str, datasets.DatasetSession] = {}
        self.kinds: dict[str, DocKind] = {}
        self._generation = 0

    # --- scheduling ------------------------------------------------------------------

    def opened(self, doc: LineDocument) -> None:
        self.kinds[doc.uri] = kind_of(doc.path, doc.head(HEAD_BYTES).encode("utf-8", "replace"),
                                      self._server.tp.settings.entrypoints)
        self.sessions.pop(doc.uri, None)
        self.schedule(doc.uri, 0.0)

    def edited(self, doc: LineDocument, edit: LineEdit) -> None:
        """One content change, just applied to `doc` (called once per change, in order)."""
        session = self.sessions.get(doc.uri)
        if session is not None:
            try:
                session.apply(edit, doc.lines)
            except Exception:  # the session is only a cache: start over from the text
                log.exception("incremental re-check of %s failed; checking the whole buffer", doc.uri)
                self.sessions.pop(doc.uri, None)

    def changed(self, doc: LineDocument, edits: list[LineEdit]) -> None:
        kind = self.kinds.get(doc.uri)
        if kind is not None and any(e.start == 0 for e in edits) and kind.kind in ("metrics", "other", "dataset",
                                                                                   "lfs-pointer", "speech"):
            # The first line decides what a JSON file is; an edit there may change it.
            self.kinds[doc.uri] = kind_of(doc.path, doc.head(HEAD_BYTES).encode("utf-8", "replace"),
                                          self._server.tp.settings.entrypoints)
            if self.kinds[doc.uri] != kind:
                self.sessions.pop(doc.uri, None)
        self.schedule(doc.uri, self._server.tp.settings.debounce_ms / 1000.0)

    def closed(self, uri: str) -> None:
        task = self.pending.pop(uri, None)
        if task is not None:
            task.cancel()
        self.results.pop(uri, None)
        self.sessions.pop(uri, None)
        self.kinds.pop(uri, None)

    def schedule(self, uri: str, delay: float) -> None:
        old = self.pending.get(uri)
        if old is not None and not old.done():
            old.cancel()  # superseded: its result would be for an old version anyway
        self.pending[uri] = asyncio.get_running_loop().create_task(self._run(uri, delay))

    def recheck_all(self) -> None:
        for uri in list(self._server.tp.documents):
            self.sessions.pop(uri, None)
            self.schedule(uri, 0.0)

    async def current(self, uri: str, timeout: float = 30.0) -> DocResult | None:
        """The result for the document's current version, waiting for pending work
        (a pull request can arrive before the debounced check ran)."""
        deadline = time.monotonic() + timeout
        while True:
            doc = self._server.tp.documents.get(uri)
            if doc is None:
                return None
            result = self.results.get(uri)
            task = self.pending.get(uri)
            if result is not None and result.version == doc.version and (task is None or task.done()):
                return result
            if task is None or task.done():
                if result is not None and result.version == doc.version:
                    return result
                self.schedule(uri, 0.0)
                task = self.pending[uri]
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return result
            try:
                await asyncio.wait_for(asyncio.shield(task), remaining)
            except asyncio.CancelledError:
                if asyncio.current_task() is not None and asyncio.current_task().cancelling():  # type: ignore[union-attr]
                    raise
            except asyncio.TimeoutError:
                return self.results.get(uri)

    # --- the work ----------------------------------------------------------------------

    async def _run(self, uri: str, delay: float) -> None:
        try:
            if delay > 0:
                await asyncio.sleep(delay)
            await self._server.tp.ready()
            doc = self._server.tp.documents.get(uri)
            if doc is None:
                return
            result = await self._judge(doc)
            if result is None:
                return
            current = self._server.tp.documents.get(uri)
            if current is None or current.version != result.version:
                return  # superseded while judging
            previous = self.results.get(uri)
            self.results[uri] = result
            self._server.tp.publish_result(result, previous)
        except asyncio.CancelledError:
            raise
        except Exception:  # never a dead server
            log.exception("analysis of %s failed", uri)

    async def _judge(self, doc: LineDocument) -> DocResult | None:
        started = time.perf_counter()
        config = await self._server.tp.configs.for_path(doc.path)  # after the settings (ready())
        kind = self.kinds.get(doc.uri) or DocKind("other", "")
        version = doc.version
        note = ""
        mode = "full"
        report: Report | None = None
        data: bytes | None = None
        if kind.kind == "dataset":
            session = self.sessions.get(doc.uri)
            if session is not None and session.needs_rescan:
                session = None
            if session is None:
                loop = asyncio.get_running_loop()
                text, lines = doc.snapshot()
                session, report = await loop.run_in_executor(
                    self.executor, datasets.open_session, doc.path, config, text, lines)
                if self._server.tp.documents.get(doc.uri) is not doc or doc.version != version:
                    return None  # edited while the first scan ran: the next run starts over
                self._split_later(doc, text)
                if session is not None:
                    self.sessions[doc.uri] = session
                else:
                    self.sessions.pop(doc.uri, None)
            else:
                report = session.report()
                mode = f"incremental: {session.rescanned} line(s) re-scanned"
                session.rescanned = 0
        elif kind.lint and kind.kind in ("metrics", "dataset", "script", "config", "lfs-pointer", "speech"):
            report, data, note = await self._in_thread(doc, config, kind)
        elif kind.kind == "script":
            note = "training script: no TrainingArguments-family call for the static lint; see the code lenses"
        elif kind.kind == "config":
            note = "model config: read by doctor for vocab_size/num_labels; nothing to judge on its own"
        if doc.version != version or self._server.tp.documents.get(doc.uri) is not doc:
            return None
        findings = tuple(f for f in report.findings if f.location.path == str(doc.path)) if report else ()
        tp = self._server.tp
        await tp.load_lines(cited_lines(findings, related_only=True))  # the document's own are its buffer's
        if doc.version != version or tp.documents.get(doc.uri) is not doc:
            return None
        diagnostics = capped(findings, str(doc.path), tp.line_text, tp.presentation,
                             tp.settings.max_diagnostics_per_file)
        self._generation += 1
        return DocResult(uri=doc.uri, version=version, kind=kind, report=report, findings=findings,
                         diagnostics=diagnostics, result_id=f"{version}.{self._generation}",
                         elapsed_ms=(time.perf_counter() - started) * 1000, note=note, data=data, mode=mode)

    async def _in_thread(self, doc: LineDocument, config: Config,
                         kind: DocKind) -> tuple[Report | None, bytes | None, str]:
        loop = asyncio.get_running_loop()
        text, lines = doc.snapshot()
        report, data, note = await loop.run_in_executor(
            self.executor, _judge_buffer, doc.path, text, lines, config, kind)
        self._split_later(doc, text)
        return report, data, note

    def _split_later(self, doc: LineDocument, text: str | None) -> None:
        """Split a freshly opened buffer into lines in a worker, after its diagnostics
        are out (a first edit before that splits it itself)."""
        if text is None or doc._lines is not None or len(text) < 1 << 16:
            return
        loop = asyncio.get_running_loop()

        def start() -> None:
            future = loop.run_in_executor(self.executor, text.split, "\n")
            future.add_done_callback(
                lambda f: None if f.cancelled() or f.exception() else doc.adopt_lines(text, f.result()))
        # Not now: str.split holds the GIL, and the publish that follows this check in the
        # same task step would wait for it. call_soon runs after that step.
        loop.call_soon(start)
