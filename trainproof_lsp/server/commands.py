"""workspace/executeCommand. Folder-sized work (doctor, compare, environment checks,
datasets too big for the editor to sync) runs the project's own command line in a child
process: the same code path and JSON contract as CI (CONTRACTS.md §5), real cancellation
(the child is killed), and a crash or a runaway import in the child cannot take the
server down. Results come back as diagnostics on the files they cite, one message, and
the list of findings in the command's answer (`findings`: what an editor puts in a list of
its own, Neovim's quickfix list, VS Code's Problems panel for what no diagnostic shows).
Paths under the workspace folder are written relative to it in every text the user reads,
as the command line writes them. "Show run" answers with the run report page (`doctor
--html`), which the client shows in its own panel (VS Code), or the server writes it to a
file and asks the client to open it in a browser (window/showDocument: Neovim 0.11+), or
only names the file (the rest).

Each command is a handler at module level (HANDLERS: name -> handler, registered by
app.initialize) over the server's state, `ls.tp`. Files are read and written in worker
threads, never on the event loop.
"""

from __future__ import annotations

# hashlib, platform, tempfile and uuid are imported where they are used: the server's
# answer to `initialize` waits on every module imported here.
import asyncio
import contextlib
import json
import logging
import math
import os
import re
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable, Literal

from lsprotocol import types as lsp

from .. import TOOL_NAME, __version__
from ..core.model import Artefact, Edit, Finding, Fix, Level, Location, Related, Report, Span, Verdict
from .children import BadValue, cli_child, existing_path, interpreter
from .diagnostics import by_path, capped, relative_text
from .documents import path_to_uri, uri_to_path
from .lines import cited_lines
from .lsp import Progress, registered_methods, workspace_folders
from .settings import settings_json
from .state import ClientFeatures, ServerState, TrainproofServer, cache_base

log = logging.getLogger(__name__)

DOCTOR = "trainproof.doctor"
COMPARE = "trainproof.compare"
SET_BASELINE = "trainproof.setBaseline"
CHECK_ENVIRONMENT = "trainproof.checkEnvironment"
CHECK_DATASET = "trainproof.checkDataset"
SHOW_REPORT = "trainproof.showReport"
SHOW_RUN = "trainproof.showRun"
SHOW_SERVER_INFO = "trainproof.showServerInfo"

# Why a script's "Check environment" is off: a setting, not the workspace's trust.
ENVIRONMENT_OFF = "off: trainproof.checkEnvironment is false"

_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


# --- the JSON envelope back into reports --------------------------------------------------

def _location(raw: dict[str, Any]) -> Location:
    rng = raw.get("range")
    span = None
    if isinstance(rng, dict):
        span = Span(rng["start"]["line"], rng["start"]["character"], rng["end"]["line"], rng["end"]["character"])
    return Location(path=str(raw.get("path", "")), span=span, byte_offset=raw.get("byte_offset"),
                    record=raw.get("record"))


def _value(v: Any) -> Any:
    return _NON_FINITE.get(v, v) if isinstance(v, str) else v


def _fix(doc: Any) -> Fix | None:
    """A finding's fix as the CLI's JSON gives it (output/render.fix_json); None if absent or garbled."""
    if not isinstance(doc, dict):
        return None
    try:
        edits = tuple(Edit(span=Span(int(e["range"]["start"]["line"]), int(e["range"]["start"]["character"]),
                                     int(e["range"]["end"]["line"]), int(e["range"]["end"]["character"])),
                           new_text=str(e["new_text"])) for e in doc["edits"])
        return Fix(title=str(doc["title"]), edits=edits, safe=bool(doc.get("safe")))
    except (KeyError, TypeError, ValueError):
        return None


def reports_from_json(doc: dict[str, Any]) -> list[Report]:
    """CONTRACTS.md §5 envelope -> model.Report (the fields diagnostics need)."""
    out = []
    for r in doc.get("reports", []):
        findings = tuple(
            Finding(id=f["id"], level=Level(f["level"]), message=f.get("message", ""),
                    evidence={k: _value(v) for k, v in f.get("evidence", {}).items()},
                    location=_location(f.get("location", {})),
                    related=tuple(Related(location=_location(x["location"]), message=x.get("message", ""))
                                  for x in f.get("related", [])),
                    limits={k: _value(v) for k, v in f.get("limits", {}).items()},
                    fix=_fix(f.get("fix")))
            for f in r.get("findings", []))
        art = r.get("artefact", {})
        out.append(Report(artefact=Artefact(path=art.get("path", ""), kind=art.get("kind", ""),
                                            format=art.get("format", ""), sources=tuple(art.get("sources", ()))),
                          verdict=Verdict(r.get("verdict", "NOT-CHECKED")), findings=findings, checks=(),
                          reason=r.get("reason", "")))
    return out


# --- running the command line ---------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class CliRun:
    envelope: dict[str, Any] | None
    exit_code: int | None
    stderr: str
    cancelled: bool = False
    timed_out: bool = False


async def run_cli(argv: list[str], progress: Progress, timeout: float) -> CliRun:
    # Its own process group, so a cancel also stops what it started (env's import probe).
    # Never in the workspace, never importing from it (children.py).
    launch = cli_child(argv)
    proc = await asyncio.create_subprocess_exec(
        *launch.argv, cwd=launch.cwd, env=launch.env,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        start_new_session=os.name == "posix")
    communicate = asyncio.ensure_future(proc.communicate())
    started = time.monotonic()
    try:
        while True:
            done, _ = await asyncio.wait({communicate}, timeout=0.25)
            if done:
                break
            elapsed = time.monotonic() - started
            if progress.cancelled() or elapsed > timeout:
                _kill(proc)
                await communicate
                return CliRun(envelope=None, exit_code=None, stderr="", cancelled=progress.cancelled(),
                              timed_out=not progress.cancelled())
            progress.report(f"{argv[0]} · {elapsed:.0f} s")
    except asyncio.CancelledError:  # the request itself was cancelled
        _kill(proc)
        raise
    out, err = communicate.result()
    envelope = None
    try:
        envelope = json.loads(out.decode("utf-8", "replace")) if out.strip() else None
    except ValueError:
        envelope = None
    return CliRun(envelope=envelope if isinstance(envelope, dict) else None, exit_code=proc.returncode,
                  stderr=err.decode("utf-8", "replace").strip())


def _kill(proc: asyncio.subprocess.Process) -> None:
    try:
        if os.name == "posix":
            os.killpg(proc.pid, signal.SIGKILL)
        else:  # pragma: no cover - Windows
            proc.kill()
    except (ProcessLookupError, PermissionError):
        pass


# --- results as diagnostics and a message ------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class Published:
    counts: dict[str, int]  # findings per path the reports cite
    shown: frozenset[str]  # paths whose findings the editor shows as diagnostics


async def publish_reports(ls: TrainproofServer, reports: list[Report], *, beside_open: bool = False) -> Published:
    """Diagnostics for every file the reports cite. An open document keeps its own,
    judged from its buffer: a doctor's findings for it are left out (the same engine
    said the same), a comparison's or environment check's are shown beside them
    (`beside_open`). A folder, or a path that is no file, has no document to show them on."""
    tp = ls.tp
    grouped = {path: findings for path, findings in by_path(reports).items() if path}
    await tp.ready()  # the rule docs the diagnostics link to
    files = await asyncio.to_thread(_existing_files, [p for p in grouped if p not in tp.paths])
    await tp.load_lines(cited_lines(f for findings in grouped.values() for f in findings))
    counts: dict[str, int] = {}
    shown: set[str] = set()
    for path, findings in grouped.items():
        uri = path_to_uri(path)
        counts[path] = len(findings)
        doc = tp.paths.get(path)
        if doc is not None:
            if beside_open:
                tp.publish_extras(doc.uri, capped(findings, path, tp.line_text, tp.presentation,
                                                  tp.settings.max_diagnostics_per_file))
            shown.add(path)
            continue
        if path not in files:
            continue  # a folder: no document to show it on
        tp.publish(uri, capped(findings, path, tp.line_text, tp.presentation, tp.settings.max_diagnostics_per_file))
        shown.add(path)
        if findings:
            tp.disk_published.add(uri)
    return Published(counts=counts, shown=frozenset(shown))


def findings_list(tp: ServerState, reports: list[Report], not_judged: list[Any],
                  shown: frozenset[str]) -> list[dict[str, Any]]:
    """The command's findings as a list an editor shows beside its diagnostics: one entry
    per finding, each file's in the order and under the cap of its diagnostics (the
    entry that counts the rest included), then the files the command could not judge.
    An entry: `path` (absolute; a folder's findings name the folder), `uri`, `range`
    (0-based, in the client's position units, as the diagnostic's), `id` (the rule; null
    for a count or a file not judged), `level`, `message` (as the diagnostic says it) and
    `shown` (true when a diagnostic on that file shows it already)."""
    out: list[dict[str, Any]] = []
    for path, findings in by_path(reports).items():
        if not findings:
            continue
        for d in capped(findings, path, tp.line_text, tp.presentation, tp.settings.max_diagnostics_per_file):
            data = d.data if isinstance(d.data, dict) else {}
            out.append({"path": path, "uri": path_to_uri(path) if path else None, "range": _range_json(d.range),
                        "id": d.code, "level": data.get("level") or "INFO", "message": d.message,
                        "shown": path in shown})
    for entry in not_judged:
        if isinstance(entry, dict) and isinstance(entry.get("path"), str):
            path = entry["path"]
            out.append({"path": path, "uri": path_to_uri(path) if path else None,
                        "range": _range_json(None), "id": None, "level": Level.NOT_CHECKED.value,
                        "message": tp.presentation.shown(f"not judged: {entry.get('reason') or 'no reason given'}"),
                        "shown": False})
    return out


def _range_json(rng: lsp.Range | None) -> dict[str, dict[str, int]]:
    if rng is None:
        return {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}
    return {"start": {"line": rng.start.line, "character": rng.start.character},
            "end": {"line": rng.end.line, "character": rng.end.character}}


def _existing_files(paths: list[str]) -> set[str]:
    return {p for p in paths if Path(p).is_file()}


def summary(envelope: dict[str, Any], what: str, roots: tuple[str, ...] = ()) -> str:
    reports = envelope.get("reports", [])
    by_verdict: dict[str, int] = {}
    for r in reports:
        by_verdict[r.get("verdict", "?")] = by_verdict.get(r.get("verdict", "?"), 0) + 1
    parts = [f"{n} {v}" for v, n in sorted(by_verdict.items())]
    extra = []
    if envelope.get("not_judged"):
        extra.append(f"{len(envelope['not_judged'])} not judged")
    if envelope.get("error"):
        extra.append(relative_text(str(envelope["error"]), roots))
    worst = envelope.get("worst_verdict", "?")
    return f"trainproof {what}: {worst} — {len(reports)} report(s): {', '.join(parts) or 'none'}" + (
        f"; {'; '.join(extra)}" if extra else "")


def _no_result(tp: ServerState, run: CliRun, *, what: str, timeout: float) -> dict[str, Any] | None:
    """The answer (and its message) when the child gave no envelope: cancelled, stopped,
    or crashed. None when it gave one."""
    if run.cancelled:
        text = f"trainproof {what}: cancelled"
        tp.message(text)
        return {"status": "cancelled", "message": text}
    if run.timed_out:
        text = f"trainproof {what}: stopped after {timeout:g} s"
        tp.warn(text)
        return {"status": "timeout", "message": text}
    if run.envelope is None:
        text = f"trainproof {what}: no result ({run.stderr.splitlines()[-1] if run.stderr else f'exit {run.exit_code}'})"
        tp.warn(text)
        return {"status": "error", "message": text}
    return None


async def _run_child(ls: TrainproofServer, argv: list[str], *, title: str, what: str,
                     timeout: float) -> tuple[dict[str, Any] | None, CliRun]:
    """The command line in a child, under progress: (the failure answer or None, the run)."""
    async with Progress(ls, title, enabled=ls.tp.features.progress) as progress:
        run = await run_cli(argv, progress, timeout)
    return _no_result(ls.tp, run, what=what, timeout=timeout), run


async def _cli_command(ls: TrainproofServer, *, what: str, argv: list[str], title: str, timeout: float,
                       beside_open: bool = False) -> dict[str, Any]:
    tp = ls.tp
    failed, run = await _run_child(ls, argv, title=title, what=what, timeout=timeout)
    if failed is not None:
        return failed
    envelope = run.envelope
    assert envelope is not None  # _no_result answered every run without one
    reports = reports_from_json(envelope)
    published = await publish_reports(ls, reports, beside_open=beside_open)
    not_judged = envelope.get("not_judged", [])
    text = summary(envelope, what, root_texts(ls))
    level = lsp.MessageType.Error if envelope.get("worst_verdict") == "FAIL" else lsp.MessageType.Info
    tp.message(text, level)
    return {"status": "done", "message": text, "worst_verdict": envelope.get("worst_verdict"),
            "exit_code": run.exit_code,
            "reports": [{"path": r.artefact.path, "verdict": r.verdict.value, "findings": len(r.findings)}
                        for r in reports],
            "not_judged": not_judged, "files": published.counts,
            "findings": findings_list(tp, reports, not_judged if isinstance(not_judged, list) else [],
                                      published.shown)}


def root_texts(ls: TrainproofServer) -> tuple[str, ...]:
    """The workspace folders (else the root path) as text: paths under them are written
    relative to them in what the user reads (Presentation.roots)."""
    folders, root = workspace_folders(ls)
    return tuple(str(f) for f in folders) or ((str(root),) if root is not None else ())


def shown_path(ls: TrainproofServer, path: Path) -> str:
    """A path as the command line run from the workspace folder would write it: relative
    to the folder that holds it (`.` for the folder itself), else as it is."""
    for root in sorted(root_texts(ls), key=len, reverse=True):
        try:
            relative = path.relative_to(root)
        except ValueError:
            continue
        if Path(root).parent != Path(root):  # never relative to the file system's root
            return str(relative) if relative.parts else "."
    return str(path)


def workspace_root(ls: TrainproofServer | None) -> Path | None:
    """The first workspace folder: where relative settings and arguments are resolved
    (never the server's working folder, which is not the workspace: children.py)."""
    if ls is None:
        return None
    folders, root = workspace_folders(ls)
    return folders[0] if folders else root


def _config_args(ls: TrainproofServer) -> list[str]:
    """Options from settings, each as `--opt=value` (a value is never read as an option).
    Raises BadValue for a config file that does not exist."""
    tp = ls.tp
    args = []
    if tp.settings.config_file:
        config = existing_path(tp.settings.config_file, what="trainproof.configFile", base=workspace_root(ls),
                               file=True)
        args.append(f"--config={config}")
    if tp.settings.vocab_size:
        args.append(f"--vocab-size={int(tp.settings.vocab_size)}")
    for mapping in tp.settings.columns:
        args.append(f"--column={mapping}")
    return args


def _baseline(ls: TrainproofServer) -> Path | None:
    """The editor's baseline: "Set as baseline" in this session, else the `baseline` setting;
    an existing path or BadValue. (Without either, the command line still finds `baseline`
    in [tool.trainproof].)"""
    tp = ls.tp
    if tp.baseline:
        return existing_path(tp.baseline, what="baseline", base=workspace_root(ls))
    if tp.settings.baseline:
        return existing_path(tp.settings.baseline, what="trainproof.baseline", base=workspace_root(ls))
    return None


@dataclass(frozen=True, kw_only=True)
class EnvInterpreter:
    path: str
    source: str  # said in the result: which interpreter the check imported with


def env_interpreter(ls: TrainproofServer) -> EnvInterpreter:
    """The workspace's interpreter for Check environment: the `python` setting (the VS Code
    extension fills it with the Python extension's selection), else `python` or `python3`
    on PATH (an activated virtual environment's), else the server's own."""
    tp = ls.tp
    if tp.settings.python:
        return EnvInterpreter(path=interpreter(tp.settings.python, what="trainproof.python",
                                               base=workspace_root(ls)), source="the python setting")
    import shutil

    for name in ("python", "python3"):
        found = shutil.which(name)
        if found:
            return EnvInterpreter(path=str(Path(found).absolute()), source=f"{name} on PATH")
    return EnvInterpreter(path=sys.executable, source="the server's own Python")


def _run_label(path: Path) -> str:
    """A log as a tab title names it: with its folder, since most logs share a file name
    (trainer_state.json, metrics.csv)."""
    return f"{path.parent.name}/{path.name}" if path.parent.name else path.name or str(path)


async def _show_run(ls: TrainproofServer, path: Path) -> dict[str, Any]:
    """The run report page (`doctor PATH --html`) for a log: judged from disk, since the run
    is more than the buffer (config.json for the vocabulary, event files, checkpoints), and
    compared with the editor's baseline when one is set."""
    tp = ls.tp
    label = _run_label(path)
    what = f"show run {label}"
    timeout = 600.0
    try:
        baseline = _baseline(ls)
        config_args = _config_args(ls)
    except BadValue as e:
        return _refused(tp, what, e)
    import shutil
    import tempfile

    folder = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="trainproof-run-"))
    try:
        page = folder / "run.html"
        argv = ["doctor", "--json", f"--html={page}", *config_args,
                *([f"--baseline={baseline}"] if baseline is not None else []), "--", str(path)]
        failed, run = await _run_child(ls, argv, title=f"trainproof: Show run {label}", what=what, timeout=timeout)
        if failed is not None:
            return failed
        envelope = run.envelope
        assert envelope is not None  # _no_result answered every run without one
        reports = envelope.get("reports", [])
        if all(r.get("verdict") == "NOT-CHECKED" for r in reports):
            # Nothing was read (a broken or missing log): the page would only repeat the reason.
            reason = next((r["reason"] for r in reports if r.get("reason")), None) or \
                envelope.get("error") or "nothing was judged"
            text = f"trainproof {what}: nothing to show — {reason}"
            tp.warn(text)
            return {"status": "none", "message": text}
        try:
            html = await asyncio.to_thread(page.read_text, encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            text = f"trainproof {what}: no page written ({e})"
            tp.warn(text)
            return {"status": "error", "message": text}
    finally:
        await asyncio.to_thread(shutil.rmtree, folder, ignore_errors=True)
    worst = envelope.get("worst_verdict")
    done = {"status": "done", "html": html, "title": f"Run: {label}", "path": str(path),
            "worst_verdict": worst, "baseline": str(baseline) if baseline else None}
    shown_by = run_page_shown_by(tp.features)
    if shown_by == "panel":
        return done
    return {**done, **await _open_run_page(ls, path, html, what=f"{what}: {worst}", browser=shown_by == "browser")}


# --- Show run in a client without a panel of its own ------------------------------------------

SHOW_DOCUMENT_TIMEOUT_S = 10.0  # Neovim waits up to 2 s for xdg-open before it answers


def run_page_shown_by(features: ClientFeatures) -> Literal["panel", "browser", "file"]:
    """How this client shows a Show run page: in its own panel (it said so at initialize:
    initializationOptions.clientFeatures.showRunPanel, as the VS Code extension does), in
    a browser it opens when the server asks (window/showDocument, LSP 3.16: Neovim 0.11+),
    or not at all: the page is only written to a file the server's message names. The
    last kind of client is offered no "Show run" lens (lenses.py)."""
    if features.show_run_panel:
        return "panel"
    return "browser" if features.show_document else "file"


def run_page_path(log: Path) -> Path:
    """Where a log's run report page is written for a browser. One file per log: asking
    again replaces it (a reload shows the new page), and the hash of the full path keeps
    two runs' trainer_state.json apart."""
    import hashlib

    digest = hashlib.sha256(os.fsencode(log)).hexdigest()[:12]
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{log.parent.name}-{log.name}".strip("-"))[:80]
    return cache_base() / "runs" / f"{stem}-{digest}.html"


def write_run_page(target: Path, html: str) -> None:
    """Written beside the target and renamed over it, so a browser reloading the page
    never reads half of it. Blocking: the server calls it in a worker thread."""
    target.parent.mkdir(parents=True, exist_ok=True)
    import tempfile

    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.stem}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(html)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


async def _open_run_page(ls: TrainproofServer, log: Path, html: str, *, what: str,
                         browser: bool) -> dict[str, Any]:
    """Writes the page to the cache, asks the client to open it in a browser when it can,
    and says where the page is: the answer's `file` and `message`, and a window message."""
    tp = ls.tp
    target = run_page_path(log)
    try:
        await asyncio.to_thread(write_run_page, target, html)
    except OSError as e:
        text = f"trainproof {what}; the page could not be written to {target} ({e})"
        tp.warn(text)
        return {"file": None, "message": text, "opened": False}
    if not browser:
        text = f"trainproof {what}; page written to {target} (open it in a browser)"
        tp.message(text)
        return {"file": str(target), "message": text, "opened": False}
    refused = await _show_document(ls, target.as_uri())
    if refused is None:
        text = f"trainproof {what}; opened in a browser: {target}"
        tp.message(text)
    else:
        text = f"trainproof {what}; the editor did not open the page ({refused}); it is at {target}"
        tp.warn(text)
    return {"file": str(target), "message": text, "opened": refused is None}


async def _show_document(ls: Any, uri: str) -> str | None:
    """window/showDocument with external=True (the client's browser, not an editor tab):
    None when the client opened it, else why not. (`ls`: anything with pygls's
    window_show_document_async.)"""
    try:
        result = await asyncio.wait_for(
            ls.window_show_document_async(lsp.ShowDocumentParams(uri=uri, external=True)), SHOW_DOCUMENT_TIMEOUT_S)
    except asyncio.TimeoutError:
        return f"no answer in {SHOW_DOCUMENT_TIMEOUT_S:g} s"
    except Exception as e:  # an error answer: the client could not or would not
        return (str(e).splitlines() or [type(e).__name__])[0]
    return None if result is not None and result.success else "it answered success: false"


def _refused(tp: ServerState, what: str, problem: BadValue) -> dict[str, Any]:
    """A setting or argument that cannot go to a child: nothing runs, the user hears why."""
    text = f"trainproof {what}: not run — {problem}"
    tp.warn(text)
    return {"status": "error", "message": text}


def _bad_args(tp: ServerState, command: str, usage: str) -> dict[str, Any]:
    text = f"{command}: expected {usage}"
    tp.warn(text)
    return {"status": "error", "message": text}


def _path_arg(ls: TrainproofServer, args: tuple[Any, ...], index: int = 0) -> Path | None:
    """A path or file: URI argument, absolute (a relative one from the workspace folder)."""
    if len(args) <= index or not isinstance(args[index], str) or not args[index] or "\x00" in args[index]:
        return None
    raw = args[index]
    path = uri_to_path(raw) if raw.startswith("file:") else Path(os.path.expanduser(raw))
    if not path.is_absolute():
        root = workspace_root(ls)
        if root is None:
            return None
        path = root / path
    return path.absolute()


# --- the commands ------------------------------------------------------------------------------
# Each takes the server and the command's arguments as the client sent them; each answers
# a JSON object with a "status" and a "message" the user was also shown.

async def _doctor_on(ls: TrainproofServer, path: Path, *, what: str, title: str) -> dict[str, Any]:
    """`doctor --json PATH` in a child; its findings published on the files they cite."""
    shown = shown_path(ls, path)
    try:
        config_args = _config_args(ls)
    except BadValue as e:
        return _refused(ls.tp, f"{what} {shown}", e)
    return await _cli_command(ls, what=f"{what} {shown}", argv=["doctor", "--json", *config_args, "--", str(path)],
                              title=title, timeout=600)


async def doctor(ls: TrainproofServer, *args: Any) -> dict[str, Any]:
    path = _path_arg(ls, args) or workspace_root(ls)
    if path is None:
        return _bad_args(ls.tp, DOCTOR, "a file or folder path")
    return await _doctor_on(ls, path, what="doctor", title=f"trainproof doctor {path.name or path}")


async def check_dataset(ls: TrainproofServer, *args: Any) -> dict[str, Any]:
    path = _path_arg(ls, args)
    if path is None:
        return _bad_args(ls.tp, CHECK_DATASET, "a dataset path")
    s = ls.tp.settings
    if not s.tokenizer:
        return await _doctor_on(ls, path, what="preflight", title=f"trainproof preflight {path.name}")
    # With the run's tokenizer set, the check is the token map's (the map lens's numbers,
    # server/token_map.py): preflight with the same tokenizer, max length and masking. Its
    # map findings are not the buffer's (the buffer's check builds no map): shown beside
    # an open document's own.
    shown = shown_path(ls, path)
    try:
        root = workspace_root(ls)
        opts = [*_config_args(ls), f"--tokenizer={existing_path(s.tokenizer, what='trainproof.tokenizer', base=root)}"]
        opts += [f"--max-len={int(s.max_len)}"] if s.max_len else []
        opts += [f"--loss={s.loss}"] if s.loss in ("all", "assistant-only", "completion-only") else []
        if s.train_config:
            opts.append(f"--train-config={existing_path(s.train_config, what='trainproof.trainConfig', base=root)}")
    except BadValue as e:
        return _refused(ls.tp, f"preflight {shown}", e)
    return await _cli_command(ls, what=f"preflight {shown}", argv=["preflight", "--json", *opts, "--", str(path)],
                              title=f"trainproof preflight {path.name}", timeout=600, beside_open=True)


async def compare(ls: TrainproofServer, *args: Any) -> dict[str, Any]:
    tp = ls.tp
    run = _path_arg(ls, args)
    if run is None:
        return _bad_args(tp, COMPARE, "a run's log or folder (and optionally a baseline)")
    try:
        chosen = _path_arg(ls, args, 1)
        baseline = existing_path(str(chosen), what="baseline") if chosen is not None else _baseline(ls)
        config_args = _config_args(ls)
    except BadValue as e:
        return _refused(tp, f"compare {run.name}", e)
    if baseline is None:
        text = "trainproof compare: no baseline — use \"Set as baseline\" on a known-good run's log first"
        tp.warn(text)
        return {"status": "no-baseline", "message": text}
    return await _cli_command(ls, what=f"compare {run.name} with {shown_path(ls, baseline)}",
                              argv=["compare", "--json", *config_args, "--", str(baseline), str(run)],
                              title="trainproof compare", timeout=600, beside_open=True)


def set_baseline(ls: TrainproofServer, *args: Any) -> dict[str, Any]:
    tp = ls.tp
    path = _path_arg(ls, args)
    if path is None:
        return _bad_args(tp, SET_BASELINE, "a run's log or folder")
    if not path.exists():
        return _refused(tp, "set baseline", BadValue(f"baseline: {str(path)!r} does not exist"))
    tp.baseline = str(path)
    text = (f"trainproof: baseline for this session is {shown_path(ls, path)}. To keep it, add "
            f"`baseline = \"{path}\"` under [tool.trainproof] or set trainproof.baseline.")
    tp.message(text)
    return {"status": "done", "baseline": str(path), "message": text}


async def check_environment(ls: TrainproofServer, *args: Any) -> dict[str, Any]:
    tp = ls.tp
    script = _path_arg(ls, args)
    if script is None:
        return _bad_args(tp, CHECK_ENVIRONMENT, "a training script path")
    if not tp.settings.check_environment:
        text = (f"trainproof: {ENVIRONMENT_OFF}. Check environment imports the script's modules with the "
                "workspace's interpreter, so code from the workspace runs; set "
                "trainproof.checkEnvironment = true to allow it")
        tp.warn(text)
        return {"status": "disabled", "message": text}
    try:
        script = existing_path(str(script), what="training script", file=True)
        python = env_interpreter(ls)
    except BadValue as e:
        return _refused(tp, f"env {script.name}", e)
    argv = ["env", f"--entrypoint={script}", f"--cwd={script.parent}",
            f"--timeout={tp.settings.env_timeout_s:g}", f"--python={python.path}", "--json"]
    answer = await _cli_command(ls, what=f"env {script.name} with {python.path} ({python.source})", argv=argv,
                                title=f"trainproof env {script.name}",
                                timeout=tp.settings.env_timeout_s + 30, beside_open=True)
    return {**answer, "python": python.path, "pythonSource": python.source}


async def show_report(ls: TrainproofServer, *args: Any) -> dict[str, Any]:
    tp = ls.tp
    uri = args[0] if args and isinstance(args[0], str) else None
    result = await tp.analyzer.current(uri) if uri else None
    if result is None or result.report is None:
        text = f"trainproof: {result.note if result is not None and result.note else 'no report for this document'}"
        tp.message(text)
        return {"status": "none", "message": text}
    from ..output.render import report_json

    r = result.report
    lines = [f"{r.verdict.value}: {len(r.findings)} finding(s)" + (f" — {r.reason}" if r.reason else "")]
    lines += [f"{f.id} ({f.level.value}) {f.message}" for f in r.findings[:10]]
    tp.message(tp.presentation.shown("trainproof: " + "\n".join(lines)))
    return {"status": "done", "report": report_json(r)}


async def show_run(ls: TrainproofServer, *args: Any) -> dict[str, Any]:
    path = _path_arg(ls, args)
    if path is None:
        return _bad_args(ls.tp, SHOW_RUN, "a log's path or file: URI")
    return await _show_run(ls, path)


def show_server_info(ls: TrainproofServer, *args: Any) -> dict[str, Any]:
    import pygls

    tp = ls.tp
    features, commands = registered_methods(ls)
    results = tp.analyzer.results
    info = {
        "name": TOOL_NAME, "version": __version__,
        "python": sys.version.split()[0], "executable": sys.executable, "platform": _platform(),
        "pygls": getattr(pygls, "__version__", None) or _dist_version("pygls"),
        "lsprotocol": _dist_version("lsprotocol"),
        "positionEncoding": tp.presentation.encoding,
        "features": features, "commands": commands,
        "diagnostics": "pull (push until a document is first pulled)" if tp.features.pull else "push",
        "settings": settings_json(tp.settings),
        "baseline": tp.baseline,
        "documents": {uri: {"version": d.version, "lines": len(d.lines),
                            "kind": getattr(tp.analyzer.kinds.get(uri), "kind", None),
                            "last_check_ms": round(results[uri].elapsed_ms, 2) if uri in results else None,
                            "last_check": results[uri].mode if uri in results else None}
                      for uri, d in tp.documents.items()},
    }
    tp.message(f"{TOOL_NAME} {__version__} (pygls {info['pygls']}, Python {info['python']}); "
               f"{len(tp.documents)} open document(s); diagnostics by {info['diagnostics']}")
    return info


def _platform() -> str:
    import platform

    return platform.platform()


def _dist_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


HANDLERS: dict[str, Callable[..., dict[str, Any] | Awaitable[dict[str, Any]]]] = {
    DOCTOR: doctor, COMPARE: compare, SET_BASELINE: set_baseline, CHECK_ENVIRONMENT: check_environment,
    CHECK_DATASET: check_dataset, SHOW_REPORT: show_report, SHOW_RUN: show_run,
    SHOW_SERVER_INFO: show_server_info,
}
ALL = tuple(HANDLERS)  # every command's name (the VS Code manifest test checks package.json against it)
