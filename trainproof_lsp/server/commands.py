"""workspace/executeCommand. Folder-sized work (doctor, compare, environment checks,
datasets too big for the editor to sync) runs the project's own command line in a child
process: the same code path and JSON contract as CI (CONTRACTS.md §5), real cancellation
(the child is killed), and a crash or a runaway import in the child cannot take the
server down. Results come back as diagnostics on the files they cite and one message;
"Show run" answers with the run report page (`doctor --html`), which the client shows in
its own panel (VS Code), or the server writes it to a file and asks the client to open it
in a browser (window/showDocument: Neovim 0.11+), or only names the file (the rest).

Commands another part of the project provides (compare, env) are offered only as what
they are: when this installation lacks them, the command says so and does nothing else.
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
from typing import TYPE_CHECKING, Any, Literal

from lsprotocol import types as lsp

from .. import TOOL_NAME, __version__
from ..core.model import Artefact, Finding, Level, Location, Related, Report, Span, Verdict
from . import datasets
from .children import BadValue, cli_child, existing_path, interpreter
from .diagnostics import by_path, capped
from .documents import path_to_uri, uri_to_path
from .kinds import optional_module
from .settings import settings_json

if TYPE_CHECKING:
    from .app import ClientFeatures

log = logging.getLogger(__name__)

DOCTOR = "trainproof.doctor"
COMPARE = "trainproof.compare"
SET_BASELINE = "trainproof.setBaseline"
CHECK_ENVIRONMENT = "trainproof.checkEnvironment"
CHECK_DATASET = "trainproof.checkDataset"
SHOW_REPORT = "trainproof.showReport"
SHOW_RUN = "trainproof.showRun"
SHOW_SERVER_INFO = "trainproof.showServerInfo"
ALL = (DOCTOR, COMPARE, SET_BASELINE, CHECK_ENVIRONMENT, CHECK_DATASET, SHOW_REPORT, SHOW_RUN, SHOW_SERVER_INFO)

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
                    limits={k: _value(v) for k, v in f.get("limits", {}).items()})
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


class Progress:
    """$/progress for one command, when the client shows progress; a no-op otherwise."""

    def __init__(self, ls, title: str, token: Any = None) -> None:
        self._ls = ls
        self.title = title
        self.token = token
        self.enabled = ls.tp.features.progress
        self._cancel = None

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
        if self.enabled:
            self._ls.work_done_progress.report(self.token, lsp.WorkDoneProgressReport(message=message))

    async def __aexit__(self, *exc: Any) -> None:
        if self.enabled:
            self._ls.work_done_progress.end(self.token, lsp.WorkDoneProgressEnd(
                message="cancelled" if self.cancelled() else "done"))
            self._ls.work_done_progress.tokens.pop(self.token, None)


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


def _unavailable(run: CliRun, command: str) -> bool:
    return run.envelope is None and run.exit_code == 2 and "invalid choice" in run.stderr and command in run.stderr


# --- results as diagnostics and a message ------------------------------------------------

def publish_reports(ls, reports: list[Report], *, beside_open: bool = False) -> dict[str, int]:
    """Diagnostics for every file the reports cite. An open document keeps its own,
    judged from its buffer: a doctor's findings for it are left out (the same engine
    said the same), a comparison's or environment check's are shown beside them
    (`beside_open`). Returns findings per file."""
    tp = ls.tp
    counts: dict[str, int] = {}
    for path, findings in by_path(reports).items():
        if not path:
            continue
        uri = path_to_uri(path)
        counts[path] = len(findings)
        doc = tp.paths.get(path)
        if doc is not None:
            if beside_open:
                tp.publish_extras(doc.uri, capped(findings, path, tp.line_text, tp.presentation,
                                                  tp.settings.max_diagnostics_per_file))
            continue
        if not Path(path).is_file():
            continue  # a folder: no document to show it on
        tp.publish(uri, capped(findings, path, tp.line_text, tp.presentation, tp.settings.max_diagnostics_per_file))
        if findings:
            tp.disk_published.add(uri)
    return counts


def summary(envelope: dict[str, Any], what: str) -> str:
    reports = envelope.get("reports", [])
    by_verdict: dict[str, int] = {}
    for r in reports:
        by_verdict[r.get("verdict", "?")] = by_verdict.get(r.get("verdict", "?"), 0) + 1
    parts = [f"{n} {v}" for v, n in sorted(by_verdict.items())]
    extra = []
    if envelope.get("not_judged"):
        extra.append(f"{len(envelope['not_judged'])} not judged")
    if envelope.get("error"):
        extra.append(envelope["error"])
    worst = envelope.get("worst_verdict", "?")
    return f"trainproof {what}: {worst} — {len(reports)} report(s): {', '.join(parts) or 'none'}" + (
        f"; {'; '.join(extra)}" if extra else "")


def _no_result(tp, run: CliRun, *, what: str, timeout: float, subcommand: str) -> dict[str, Any] | None:
    """The answer (and its message) when the child gave no envelope: cancelled, stopped,
    without the subcommand, or crashed. None when it gave one."""
    if run.cancelled:
        text = f"trainproof {what}: cancelled"
        tp.message(text)
        return {"status": "cancelled", "message": text}
    if run.timed_out:
        text = f"trainproof {what}: stopped after {timeout:g} s"
        tp.warn(text)
        return {"status": "timeout", "message": text}
    if _unavailable(run, subcommand):
        text = f"trainproof {what}: not available in this version ({TOOL_NAME} {__version__} has no `{subcommand}`)"
        tp.warn(text)
        return {"status": "unavailable", "message": text}
    if run.envelope is None:
        text = f"trainproof {what}: no result ({run.stderr.splitlines()[-1] if run.stderr else f'exit {run.exit_code}'})"
        tp.warn(text)
        return {"status": "error", "message": text}
    return None


async def _cli_command(ls, *, what: str, argv: list[str], title: str, timeout: float,
                       subcommand: str, beside_open: bool = False) -> dict[str, Any]:
    tp = ls.tp
    async with Progress(ls, title) as progress:
        run = await run_cli(argv, progress, timeout)
    failed = _no_result(tp, run, what=what, timeout=timeout, subcommand=subcommand)
    if failed is not None:
        return failed
    assert run.envelope is not None
    reports = reports_from_json(run.envelope)
    files = publish_reports(ls, reports, beside_open=beside_open)
    text = summary(run.envelope, what)
    level = lsp.MessageType.Error if run.envelope.get("worst_verdict") == "FAIL" else lsp.MessageType.Info
    tp.message(text, level)
    return {"status": "done", "message": text, "worst_verdict": run.envelope.get("worst_verdict"),
            "exit_code": run.exit_code,
            "reports": [{"path": r.artefact.path, "verdict": r.verdict.value, "findings": len(r.findings)}
                        for r in reports],
            "not_judged": run.envelope.get("not_judged", []), "files": files}


def workspace_root(ls) -> Path | None:
    """The first workspace folder: where relative settings and arguments are resolved
    (never the server's working folder, which is not the workspace: children.py)."""
    workspace = ls.workspace if ls is not None else None
    if workspace is None:
        return None
    folders = [uri_to_path(f.uri) for f in workspace.folders.values()]
    if folders:
        return folders[0]
    return Path(workspace.root_path) if workspace.root_path else None


def _config_args(ls) -> list[str]:
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


def _baseline(ls) -> Path | None:
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


def env_interpreter(ls) -> EnvInterpreter:
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


async def _show_run(ls, path: Path) -> dict[str, Any]:
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
    import tempfile

    with tempfile.TemporaryDirectory(prefix="trainproof-run-") as folder:
        page = Path(folder) / "run.html"
        argv = ["doctor", "--json", f"--html={page}", *config_args,
                *([f"--baseline={baseline}"] if baseline is not None else []), "--", str(path)]
        async with Progress(ls, f"trainproof: Show run {label}") as progress:
            run = await run_cli(argv, progress, timeout)
        failed = _no_result(tp, run, what=what, timeout=timeout, subcommand="doctor")
        if failed is not None:
            return failed
        assert run.envelope is not None
        reports = run.envelope.get("reports", [])
        if all(r.get("verdict") == "NOT-CHECKED" for r in reports):
            # Nothing was read (a broken or missing log): the page would only repeat the reason.
            reason = next((r["reason"] for r in reports if r.get("reason")), None) or \
                run.envelope.get("error") or "nothing was judged"
            text = f"trainproof {what}: nothing to show — {reason}"
            tp.warn(text)
            return {"status": "none", "message": text}
        try:
            html = page.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            text = f"trainproof {what}: no page written ({e})"
            tp.warn(text)
            return {"status": "error", "message": text}
    worst = run.envelope.get("worst_verdict")
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


def cache_base() -> Path:
    """The server's cache folder for this version: the run pages and the rule docs."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / TOOL_NAME / __version__


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
    never reads half of it."""
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


async def _open_run_page(ls, log: Path, html: str, *, what: str, browser: bool) -> dict[str, Any]:
    """Writes the page to the cache, asks the client to open it in a browser when it can,
    and says where the page is: the answer's `file` and `message`, and a window message."""
    tp = ls.tp
    target = run_page_path(log)
    try:
        write_run_page(target, html)
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


async def _show_document(ls, uri: str) -> str | None:
    """window/showDocument with external=True (the client's browser, not an editor tab):
    None when the client opened it, else why not."""
    try:
        result = await asyncio.wait_for(
            ls.window_show_document_async(lsp.ShowDocumentParams(uri=uri, external=True)), SHOW_DOCUMENT_TIMEOUT_S)
    except asyncio.TimeoutError:
        return f"no answer in {SHOW_DOCUMENT_TIMEOUT_S:g} s"
    except Exception as e:  # an error answer: the client could not or would not
        return (str(e).splitlines() or [type(e).__name__])[0]
    return None if result is not None and result.success else "it answered success: false"


def _refused(tp, what: str, problem: BadValue) -> dict[str, Any]:
    """A setting or argument that cannot go to a child: nothing runs, the user hears why."""
    text = f"trainproof {what}: not run — {problem}"
    tp.warn(text)
    return {"status": "error", "message": text}


def _path_arg(ls, args: tuple[Any, ...], index: int = 0) -> Path | None:
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


def register(ls) -> None:
    tp = ls.tp

    def bad_args(command: str, usage: str) -> dict[str, Any]:
        text = f"{command}: expected {usage}"
        tp.warn(text)
        return {"status": "error", "message": text}

    @ls.command(DOCTOR)
    async def doctor(ls, *args: Any) -> dict[str, Any]:
        path = _path_arg(ls, args) or workspace_root(ls)
        if path is None:
            return bad_args(DOCTOR, "a file or folder path")
        try:
            config_args = _config_args(ls)
        except BadValue as e:
            return _refused(tp, f"doctor {path}", e)
        return await _cli_command(ls, what=f"doctor {path}", argv=["doctor", "--json", *config_args, "--", str(path)],
                                  title=f"trainproof doctor {path.name or path}", timeout=600, subcommand="doctor")

    @ls.command(CHECK_DATASET)
    async def check_dataset(ls, *args: Any) -> dict[str, Any]:
        path = _path_arg(ls, args)
        if path is None:
            return bad_args(CHECK_DATASET, "a dataset path")
        if not datasets.available():
            text = f"trainproof: {datasets.UNAVAILABLE}"
            tp.warn(text)
            return {"status": "unavailable", "message": text}
        try:
            config_args = _config_args(ls)
        except BadValue as e:
            return _refused(tp, f"preflight {path}", e)
        return await _cli_command(ls, what=f"preflight {path}",
                                  argv=["doctor", "--json", *config_args, "--", str(path)],
                                  title=f"trainproof preflight {path.name}", timeout=600, subcommand="doctor")

    @ls.command(COMPARE)
    async def compare(ls, *args: Any) -> dict[str, Any]:
        run = _path_arg(ls, args)
        if run is None:
            return bad_args(COMPARE, "a run's log or folder (and optionally a baseline)")
        if optional_module("judge.compare") is None:
            text = f"trainproof compare: not available in this version ({TOOL_NAME} {__version__})"
            tp.warn(text)
            return {"status": "unavailable", "message": text}
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
        return await _cli_command(ls, what=f"compare {run.name} with {baseline}",
                                  argv=["compare", "--json", *config_args, "--", str(baseline), str(run)],
                                  title="trainproof compare", timeout=600, subcommand="compare",
                                  beside_open=True)

    @ls.command(SET_BASELINE)
    def set_baseline(ls, *args: Any) -> dict[str, Any]:
        path = _path_arg(ls, args)
        if path is None:
            return bad_args(SET_BASELINE, "a run's log or folder")
        if not path.exists():
            return _refused(tp, "set baseline", BadValue(f"baseline: {str(path)!r} does not exist"))
        tp.baseline = str(path)
        text = (f"trainproof: baseline for this session is {path}. To keep it, add "
                f"`baseline = \"{path}\"` under [tool.trainproof] or set trainproof.baseline.")
        tp.message(text)
        return {"status": "done", "baseline": str(path), "message": text}

    @ls.command(CHECK_ENVIRONMENT)
    async def check_environment(ls, *args: Any) -> dict[str, Any]:
        script = _path_arg(ls, args)
        if script is None:
            return bad_args(CHECK_ENVIRONMENT, "a training script path")
        if not tp.settings.check_environment:
            text = (f"trainproof: {ENVIRONMENT_OFF}. Check environment imports the script's modules with the "
                    "workspace's interpreter, so code from the workspace runs; set "
                    "trainproof.checkEnvironment = true to allow it")
            tp.warn(text)
            return {"status": "disabled", "message": text}
        if optional_module("readers.envcheck") is None:
            text = f"trainproof env: not available in this version ({TOOL_NAME} {__version__})"
            tp.warn(text)
            return {"status": "unavailable", "message": text}
        try:
            script = existing_path(str(script), what="training script", file=True)
            python = env_interpreter(ls)
        except BadValue as e:
            return _refused(tp, f"env {script.name}", e)
        argv = ["env", f"--entrypoint={script}", f"--cwd={script.parent}",
                f"--timeout={tp.settings.env_timeout_s:g}", f"--python={python.path}", "--json"]
        answer = await _cli_command(ls, what=f"env {script.name} with {python.path} ({python.source})", argv=argv,
                                    title=f"trainproof env {script.name}",
                                    timeout=tp.settings.env_timeout_s + 30, subcommand="env", beside_open=True)
        return {**answer, "python": python.path, "pythonSource": python.source}

    @ls.command(SHOW_REPORT)
    async def show_report(ls, *args: Any) -> dict[str, Any]:
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
        tp.message("trainproof: " + "\n".join(lines))
        return {"status": "done", "report": report_json(r)}

    @ls.command(SHOW_RUN)
    async def show_run(ls, *args: Any) -> dict[str, Any]:
        path = _path_arg(ls, args)
        if path is None:
            return bad_args(SHOW_RUN, "a log's path or file: URI")
        return await _show_run(ls, path)

    @ls.command(SHOW_SERVER_INFO)
    def show_server_info(ls, *args: Any) -> dict[str, Any]:
        import pygls

        info = {
            "name": TOOL_NAME, "version": __version__,
            "python": sys.version.split()[0], "executable": sys.executable, "platform": _platform(),
            "pygls": getattr(pygls, "__version__", None) or _dist_version("pygls"),
            "lsprotocol": _dist_version("lsprotocol"),
            "positionEncoding": tp.presentation.encoding,
            "features": sorted(ls.protocol.fm.features), "commands": sorted(ls.protocol.fm.commands),
            "diagnostics": "pull (push until a document is first pulled)" if tp.features.pull else "push",
            "settings": settings_json(tp.settings),
            "baseline": tp.baseline,
            "documents": {uri: {"version": d.version, "lines": len(d.lines),
                                "kind": getattr(tp.analyzer.kinds.get(uri), "kind", None),
                                "last_check_ms": round(tp.analyzer.results[uri].elapsed_ms, 2)
                                if uri in tp.analyzer.results else None,
                                "last_check": tp.analyzer.results[uri].mode if uri in tp.analyzer.results else None}
                          for uri, d in tp.documents.items()},
            "engine": {"preflight": datasets.available(),
                       "compare": optional_module("judge.compare") is not None,
                       "envcheck": optional_module("readers.envcheck") is not None},
        }
        tp.message(f"{TOOL_NAME} {__version__} (pygls {info['pygls']}, Python {info['python']}); "
                   f"{len(tp.documents)} open document(s); diagnostics by {info['diagnostics']}; "
                   f"preflight {'on' if info['engine']['preflight'] else 'not available'}")
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
