"""workspace/didChangeWatchedFiles: a log that grows on disk is re-judged, so a live run
turns red in the editor while it trains — also when the log is not open (its diagnostics
are published against its own URI and show in the problems list).

An open document is judged from its buffer, never from disk: the editor sends didChange
when it reloads the file. A pyproject.toml change re-reads `[tool.trainproof]`.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types as lsp

from ..core.formats import in_skipped_folder, watched_globs
from .diagnostics import capped
from .documents import uri_to_path
from .kinds import kind_of
from .lines import cited_lines

if TYPE_CHECKING:  # the engine loads on first use: the server answers initialize fast
    from ..core.config import Config
    from ..core.model import Report

log = logging.getLogger(__name__)

# Every file a run writes while it trains (the table of formats, core/formats.py), and the
# settings file.
GLOBS = (*watched_globs(), "**/pyproject.toml")
# A trainer rewrites its log several times per save; judge once it is quiet.
SETTLE_S = 0.1


def workspace_roots(ls: Any) -> list[Path]:
    workspace = ls.workspace
    roots = [uri_to_path(f.uri) for f in workspace.folders.values()]
    if not roots and workspace.root_path:
        roots.append(Path(workspace.root_path))
    return roots


async def register_watchers(ls: Any) -> None:
    try:
        await ls.client_register_capability_async(lsp.RegistrationParams(registrations=[lsp.Registration(
            id=f"trainproof-watch-{uuid.uuid4().hex[:8]}", method=lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES,
            register_options=lsp.DidChangeWatchedFilesRegistrationOptions(
                watchers=[lsp.FileSystemWatcher(glob_pattern=g) for g in GLOBS]))]))
        ls.tp.registered.append(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    except Exception as e:  # the client said no: no live re-judging, everything else works
        log.warning("could not register file watchers: %s", e)


def skipped(path: Path, roots: list[Path]) -> bool:
    """A change inside a folder `doctor` and `watch` never search (node_modules, a venv,
    .git, ...): ignored here too. Judged below the workspace folder holding it, so a
    workspace that itself lies under a dot-folder is still watched."""
    for root in roots:
        try:
            return in_skipped_folder(path.relative_to(root))
        except ValueError:
            continue
    return False


def judge_from_disk(path: Path, config: Config) -> Report | None:
    """Runs in a worker thread: the engine's verdict on the file as it is on disk."""
    from ..judge import engine
    from ..readers.detect import HEAD_BYTES

    from ..readers.common import NotRegularFile, open_regular  # start-up: as the engine, on first use

    try:
        with open_regular(path) as fh:
            head = fh.read(HEAD_BYTES)
    except NotRegularFile:
        # A FIFO or a device named like a log: never opened for reading (a FIFO would
        # hold this worker until someone writes to it). Known by its name, it is judged
        # as the engine judges it: NOT-CHECKED, with why.
        head = b""
    except OSError:
        return None
    kind = kind_of(path, head)
    if kind.kind not in ("metrics", "binary", "lfs-pointer"):
        return None
    return engine.judge_file(path, config)


def register(ls: Any) -> None:
    tp = ls.tp
    pending: dict[str, asyncio.Task[None]] = {}

    async def rejudge(uri: str) -> None:
        await asyncio.sleep(SETTLE_S)
        path = uri_to_path(uri)
        loop = asyncio.get_running_loop()
        config = await tp.configs.for_path(path)  # a config problem becomes a message
        report = await loop.run_in_executor(tp.analyzer.executor, judge_from_disk, path, config)
        if report is None or uri in tp.documents:
            return
        findings = [f for f in report.findings if f.location.path == str(path)]
        await tp.load_lines(cited_lines(findings))  # the line text for columns, read off the loop
        if (report.verdict.value == "NOT-CHECKED" and report.artefact.kind != "lfs-pointer"
                and uri not in tp.disk_published and kind_of(path, b"").kind == "binary"):
            return  # a binary file this version cannot read: nothing worth a squiggle (a Git LFS pointer is said)
        tp.publish(uri, capped(findings, str(path), tp.line_text, tp.presentation,
                               tp.settings.max_diagnostics_per_file))
        tp.disk_published.add(uri)

    @ls.feature(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched_files(ls: Any, params: lsp.DidChangeWatchedFilesParams) -> None:
        recheck = False
        roots = workspace_roots(ls)
        for change in params.changes:
            uri = change.uri
            path = uri_to_path(uri)
            if skipped(path, roots):
                continue
            if path.name == "pyproject.toml":
                recheck = True
                continue
            if uri in tp.documents:
                continue
            if change.type == lsp.FileChangeType.Deleted:
                if uri in tp.disk_published:
                    tp.disk_published.discard(uri)
                    tp.publish(uri, [])
                continue
            old = pending.get(uri)
            if old is not None and not old.done():
                old.cancel()
            pending[uri] = asyncio.get_running_loop().create_task(rejudge(uri))
        if recheck:
            tp.configs.clear()
            tp.analyzer.recheck_all()
