"""Code lenses: one line of verdict and the commands that fit the document's kind.

    log      trainproof: FAIL · 4 finding(s) | Show run | Run doctor | Compare with baseline | Set as baseline
             (Show run only where the page can be shown: commands.run_page_shown_by)
    script   Check environment | Doctor: <output dir> (one per adjacent run folder)
    dataset  preflight: <verdict> · N finding(s) | Check the file on disk
    config   Doctor: <folder>
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from lsprotocol import types as lsp

from ..core.formats import is_run_marker, is_skipped_folder, run_root
from .commands import ENVIRONMENT_OFF, SHOW_RUN, run_page_shown_by
from .analysis import DocResult
from .documents import path_to_uri
from .state import ServerState, TrainproofServer

_TOP = lsp.Range(start=lsp.Position(line=0, character=0), end=lsp.Position(line=0, character=0))
_SCAN_LIMIT = 400  # directory entries looked at per script: lenses must stay instant


def _lens(title: str, command: str, *arguments: object) -> lsp.CodeLens:
    return lsp.CodeLens(range=_TOP, command=lsp.Command(title=title, command=command,
                                                        arguments=list(arguments)))


def _verdict_title(prefix: str, result: DocResult | None) -> str:
    report = result.report if result is not None else None
    if report is None:
        return f"{prefix}: {result.note}" if result is not None and result.note else f"{prefix}: not judged yet"
    count = len([f for f in report.findings if f.level.value in ("FAIL", "WARN")])
    if report.verdict.value == "NOT-CHECKED":
        return f"{prefix}: NOT-CHECKED · {report.reason}"
    ids = sorted({f.id for f in report.findings if f.level.value in ("FAIL", "WARN")})
    shown = ", ".join(ids[:3]) + (", …" if len(ids) > 3 else "")
    return f"{prefix}: {report.verdict.value} · {count} finding(s)" + (f" ({shown})" if ids else "")


def _is_run_folder(folder: Path) -> bool:
    try:
        with os.scandir(folder) as entries:
            for i, entry in enumerate(entries):
                if i > _SCAN_LIMIT:
                    return False
                if is_run_marker(entry.name):  # enough to offer "Doctor" on the folder
                    return True
    except OSError:
        return False
    return False


def adjacent_run_folders(script: Path) -> list[Path]:
    """Run folders beside a training script: its own folder and the folders one and two
    levels below it that hold logs or checkpoints (output_dir/, runs/x/, lightning_logs/)."""
    found: list[Path] = []
    base = script.parent
    try:
        children = sorted(p for p in base.iterdir() if p.is_dir() and not is_skipped_folder(p.name))[:_SCAN_LIMIT]
    except OSError:
        return found
    for child in children:
        if _is_run_folder(child):
            found.append(child)
            continue
        try:
            grandchildren = sorted(p for p in child.iterdir() if p.is_dir())[:50]
        except OSError:
            continue
        if any(_is_run_folder(g) for g in grandchildren):
            found.append(child)
    return found[:8]


def lenses_for(tp: ServerState, uri: str, run_folders: list[Path]) -> list[lsp.CodeLens]:
    """The lenses of an open document; `run_folders`: a script's adjacent_run_folders."""
    doc = tp.documents.get(uri)
    if doc is None:
        return []
    kind = tp.analyzer.kinds.get(uri)
    result = tp.analyzer.results.get(uri)
    path = doc.path
    if kind is None:
        return []
    if kind.kind == "metrics":
        # A client that can neither show the page nor open a browser on it would run
        # "Show run" and show nothing (the command still answers when called).
        show_run = [_lens("Show run", SHOW_RUN, str(path))] if run_page_shown_by(tp.features) != "file" else []
        return [
            _lens(_verdict_title("trainproof", result), "trainproof.showReport", uri),
            *show_run,
            _lens("Run doctor", "trainproof.doctor", str(run_root(path))),
            _lens("Compare with baseline", "trainproof.compare", str(path)),
            _lens("Set as baseline", "trainproof.setBaseline", str(path)),
        ]
    if kind.kind == "dataset":
        return [
            _lens(_verdict_title("preflight", result), "trainproof.showReport", uri),
            _lens("Check the file on disk", "trainproof.checkDataset", str(path)),
        ]
    if kind.kind == "script":
        title = "Check environment" if tp.settings.check_environment else f"Check environment ({ENVIRONMENT_OFF})"
        out = [_lens(title, "trainproof.checkEnvironment", str(path))]
        for folder in run_folders:
            out.append(_lens(f"Doctor: {folder.name}/", "trainproof.doctor", str(folder)))
        return out
    if kind.kind == "config":
        return [_lens(f"Doctor: {path.parent.name}/", "trainproof.doctor", str(path.parent))]
    return []


async def code_lens(ls: TrainproofServer, params: lsp.CodeLensParams) -> list[lsp.CodeLens]:
    tp = ls.tp
    uri = params.text_document.uri
    await tp.analyzer.current(uri, timeout=5.0)
    kind = tp.analyzer.kinds.get(uri)
    doc = tp.documents.get(uri)
    folders: list[Path] = []
    if doc is not None and kind is not None and kind.kind == "script":  # a folder scan: off the loop
        folders = await asyncio.to_thread(adjacent_run_folders, doc.path)
    out = lenses_for(tp, uri, folders)
    if doc is not None and kind is not None and kind.kind == "dataset":  # server/token_map.py, off the loop
        from .token_map import map_lens

        out += await map_lens(tp, doc, uri)
    return out


__all__ = ["lenses_for", "adjacent_run_folders", "code_lens", "path_to_uri"]
