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
from typing import TYPE_CHECKING, Any

from lsprotocol import types as lsp

from .. import engine
from ..config import Config, ConfigError, discover, load_file, with_vocab
from ..detect import HEAD_BYTES, detect
from ..model import Finding, Report, Run
from . import datasets
from .diagnostics import capped
from .documents import LineDocument, LineEdit
from .kinds import DocKind, kind_of

if TYPE_CHECKING:
    from .app import TrainproofServer

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
    data: bytes | None = field(default=None, repr=False)  # for the hover's lazy re-read
    _run: Any = field(default=None, repr=False)

    def run(self, path: Path) -> Run | None:
        """The metric run behind a log's findings (for sparklines), read once on demand."""
        if self._run is None and self.kind.kind == "metrics" and self.data is not None:
            try:
                self._run = engine.read_run(path, detect(path, self.data[:HEAD_BYTES]), self.data)
            except Exception:  # a hover without a picture, never an error
                self._run = False
        return self._run or None


class Configs:
    """`[tool.trainproof]` per folder, cached; a broken file is reported once and the
    defaults are used until it is fixed."""

    def __init__(self, server: "TrainproofServer") -> None:
        self._server = server
        self._cache: dict[Path, Config] = {}
        self._reported: set[str] = set()

    def clear(self) -> None:
        self._cache.clear()
        self._reported.clear()

    def for_path(self, path: Path) -> Config:
        folder = path.parent
        config = self._cache.get(folder)
        if config is None:
            settings = self._server.tp.settings
            try:
                config = load_file(Path(settings.config_file)) if settings.config_file else discover(folder)
            except ConfigError as e:
                message = f"trainproof: {e}; using default settings"
                if message not in self._reported:
                    self._reported.add(message)
                    self._server.tp.warn(message)
                config = Config()
            except OSError:
                config = Config()
            config = with_vocab(config, settings.vocab_size)
            self._cache[folder] = config
        return config


def _judge_buffer(path: Path, data: bytes | None, lines: list[str] | None, config: Config,
                  kind: DocKind) -> tuple[Report | None, bytes | None, str]:
    """Runs in a worker thread. Never raises: an engine bug is a NOT-CHECKED report."""
    if data is None:
        data = "\n".join(lines or ()).encode("utf-8", "replace")
    try:
        if kind.kind == "metrics":
            return engine.judge_file(path, config, data=data), data, ""
        if kind.kind == "dataset":
            report, note = datasets.judge_buffer(path, config, data)
            return report, None, note
    except Exception as e:  # never a dead server: say what happened on the document
        log.exception("judging %s failed", path)
        reason = f"{path}: internal error while judging ({type(e).__name__}: {e})"
        return engine.not_checked(str(path), kind.kind, kind.format, reason), None, ""
    return None, None, ""


class Analyzer:
    def __init__(self, server: "TrainproofServer") -> None:
        self._server = server
        self.executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="trainproof-judge")
        self.results: dict[str, DocResult] = {}
        self.pending: dict[str, asyncio.Task] = {}
        self.sessions: dict[str, datasets.IncrementalSession] = {}
        self.kinds: dict[str, DocKind] = {}
        self._generation = 0

    # --- scheduling ------------------------------------------------------------------

    def opened(self, doc: LineDocument) -> None:
        self.kinds[doc.uri] = kind_of(doc.path, doc.data[:HEAD_BYTES] if len(doc.lines) < 4096
                                      else "\n".join(doc.lines[:4096]).encode("utf-8", "replace")[:HEAD_BYTES],
                                      self._server.tp.settings.entrypoints)
        self.sessions.pop(doc.uri, None)
        self.schedule(doc.uri, 0.0)

    def changed(self, doc: LineDocument, edits: list[LineEdit]) -> None:
        kind = self.kinds.get(doc.uri)
        session = self.sessions.get(doc.uri)
        if session is not None:
            try:
                for edit in edits:
                    session.apply(edit, doc.lines)
            except Exception:  # the session is only a cache: start over from the text
                log.exception("incremental re-check of %s failed; checking the whole buffer", doc.uri)
                self.sessions.pop(doc.uri, None)
        if kind is not None and any(e.start == 0 for e in edits) and kind.kind in ("metrics", "other", "dataset"):
            # The first line decides what a JSON file is; an edit there may change it.
            self.kinds[doc.uri] = kind_of(doc.path, "\n".join(doc.lines[:4096]).encode("utf-8", "replace")[:HEAD_BYTES],
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
            await self._server.tp.settings_gate()
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
        kind = self.kinds.get(doc.uri) or DocKind("other", "")
        version = doc.version
        config = self._server.tp.configs.for_path(doc.path)
        note = ""
        report: Report | None = None
        data: bytes | None = None
        if kind.kind == "dataset":
            session = self.sessions.get(doc.uri)
            if session is None and datasets.incremental_available():
                loop = asyncio.get_running_loop()
                lines = list(doc.lines)
                session = await loop.run_in_executor(
                    self.executor, datasets.open_session, doc.path, config, lines)
                if self._server.tp.documents.get(doc.uri) is not doc or doc.version != version:
                    return None  # edited while the first scan ran: the next run starts over
                if session is not None:
                    self.sessions[doc.uri] = session
            if session is not None:
                report = session.report()
            else:
                report, data, note = await self._in_thread(doc, config, kind)
        elif kind.kind == "metrics":
            report, data, note = await self._in_thread(doc, config, kind)
        elif kind.kind == "script":
            note = "training script: use the code lenses to check its environment or its run folder"
        elif kind.kind == "config":
            note = "model/tokenizer config: read by doctor for vocab_size; nothing to judge on its own"
        if doc.version != version or self._server.tp.documents.get(doc.uri) is not doc:
            return None
        findings = tuple(f for f in report.findings if f.location.path == str(doc.path)) if report else ()
        tp = self._server.tp
        diagnostics = capped(findings, str(doc.path), tp.line_text, tp.presentation,
                             tp.settings.max_diagnostics_per_file)
        self._generation += 1
        return DocResult(uri=doc.uri, version=version, kind=kind, report=report, findings=findings,
                         diagnostics=diagnostics, result_id=f"{version}.{self._generation}",
                         elapsed_ms=(time.perf_counter() - started) * 1000, note=note, data=data)

    async def _in_thread(self, doc: LineDocument, config: Config, kind: DocKind):
        loop = asyncio.get_running_loop()
        # The worker gets a snapshot: the cached text if there is one, else a copy of the
        # line list (a pointer copy), joined in the worker, off the loop.
        data = doc._bytes
        lines = None if data is not None else list(doc.lines)
        return await loop.run_in_executor(self.executor, _judge_buffer, doc.path, data, lines,
                                          config, kind)
