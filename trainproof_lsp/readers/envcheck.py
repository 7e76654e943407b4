"""`trainproof-lsp env`: can this machine start this run? -> `EnvFacts`.

- Imports: the training script is read with `ast` (readers/script.py); each module it
  imports is imported in a *child process* of the chosen interpreter
  (import_probe_child.py), one item at a time, with a timeout per item. A native crash, an
  `os._exit` or a hang kills only the child; the parent tells them apart by the exit
  status and its own clock, records the culprit and starts a fresh child for the rest.
  The script's own top-level code is never run unless `--run-entrypoint` asks for it.
- Library signatures: each class the script calls from a training library
  (readers/script.py `ApiCall`: TrainingArguments, SFTConfig, LoraConfig, Lightning's
  Trainer, ...) is looked up in a second child of the same interpreter, which reads its
  signature with `inspect.signature` and never calls it. That child starts in an empty
  folder of its own and refuses any module whose file lies in the workspace, so nothing
  from the workspace is imported by it (rules/script_api.py judges the keywords).
- GPUs: name and compute capability from `nvidia-smi` when it is on PATH (with a timeout),
  beside the precisions the script's configs ask for (bf16, tf32).
- Memory and disk: what the machine has, against what the run declares
  (`--required-gb`, `--checkpoint-gb` x `--keep` in `--output-dir`).

This module does the IO and records facts; rules/env.py judges them.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.model import Location, ReadError, Span
from .script import ApiCall

CHILD_SOURCE_FILE = Path(__file__).with_name("import_probe_child.py")


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportProbe:
    """One import statement's target, as the child process met it."""

    module: str  # as written, with leading dots for a relative import
    names: tuple[str, ...]  # `from module import names`
    location: Location  # the script's import line
    context: str  # "module" | "function" | "optional" | "entrypoint"
    outcome: str  # "ok" | "module-not-found" | "missing-name" | "exception" | "exit" | "crash" | "timeout"
    exc_type: str = ""
    detail: str = ""  # the exception message, the signal, the exit code
    where: str = ""  # file:line where it was raised
    missing_module: str = ""
    missing_names: tuple[str, ...] = ()
    exit_code: int | None = None
    signal: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Signature:
    """A library class as the chosen interpreter has it: read, never called."""

    outcome: str  # "ok" | "not-a-class" | "no-signature" | "module-not-found" | "exception" | "timeout" | ...
    library: str  # the top package ("transformers")
    version: str = ""  # its installed version
    qualname: str = ""  # where the class is defined ("transformers.training_args.TrainingArguments")
    params: tuple[str, ...] = ()  # keyword-passable parameter names
    var_keyword: bool = False  # takes **kwargs: any keyword binds
    # keyword -> (the string values its Enum/Literal annotation allows, whether any str is
    # allowed beside them)
    choices: tuple[tuple[str, tuple[str, ...], bool], ...] = ()
    detail: str = ""  # why the outcome is not "ok"


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiProbe:
    """One call of a library class in the script, with the installed class's signature."""

    call: ApiCall
    path: str  # the script, as findings name it
    signature: Signature


@dataclass(frozen=True, slots=True, kw_only=True)
class Gpu:
    name: str
    capability: float  # CUDA compute capability (7.5 = Turing, 8.0 = Ampere)


@dataclass(frozen=True, slots=True, kw_only=True)
class PrecisionAsk:
    """A precision the script's config turns on that needs particular hardware."""

    key: str  # "bf16" | "tf32"
    config: str  # the config class
    location: Location


@dataclass(frozen=True, kw_only=True)
class EnvFacts:
    path: str  # the entrypoint (or the module's file, or "(environment)")
    python: str
    python_version: str = ""
    python_error: str = ""  # the interpreter could not be run: why
    cwd: str = ""
    cwd_missing: bool = False
    imports_requested: bool = False
    entry_error: str = ""  # the entrypoint could not be read: why
    probes: tuple[ImportProbe, ...] = ()
    api: tuple[ApiProbe, ...] = ()  # the script's library calls against installed signatures
    api_error: str = ""  # the signature probe could not run: why
    gpus: tuple[Gpu, ...] = ()
    gpu_note: str = ""  # why no GPU was measured ("nvidia-smi not found", its error)
    precision: tuple[PrecisionAsk, ...] = ()  # what the script's configs ask of the GPU
    timeout_s: float = 0.0
    memory_gb: tuple[float, float] | None = None  # (total, available)
    required_gb: float | None = None
    output_dir: str | None = None
    disk_probe: str = ""  # the folder whose free space was measured
    disk_free_gb: float | None = None
    checkpoint_gb: float | None = None
    keep: int = 1
    notes: tuple[str, ...] = field(default=())


# --- memory and disk ----------------------------------------------------------------------

def system_memory_gb() -> tuple[float, float] | None:
    """(total, available) in GiB; None where it cannot be measured (never zero)."""
    if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
        return _windows_memory()
    try:
        text = Path("/proc/meminfo").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    values: dict[str, float] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            values[key] = int(parts[0]) / (1024 ** 2)  # kB -> GiB
    total = values.get("MemTotal")
    available = values.get("MemAvailable", values.get("MemFree"))
    if total is None or available is None:
        return None
    return total, available


def _windows_memory() -> tuple[float, float] | None:  # pragma: no cover
    import ctypes

    class Status(ctypes.Structure):
        _fields_ = [("length", ctypes.c_ulong), ("load", ctypes.c_ulong),
                    ("total", ctypes.c_ulonglong), ("available", ctypes.c_ulonglong),
                    ("total_page", ctypes.c_ulonglong), ("available_page", ctypes.c_ulonglong),
                    ("total_virtual", ctypes.c_ulonglong), ("available_virtual", ctypes.c_ulonglong),
                    ("available_extended", ctypes.c_ulonglong)]
    try:
        status = Status()
        status.length = ctypes.sizeof(Status)
        if not ctypes.windll.kernel32.GlobalMemoryStatusEx(ctypes.byref(status)):  # type: ignore[attr-defined]
            return None
        return status.total / 1024 ** 3, status.available / 1024 ** 3
    except (AttributeError, OSError):
        return None


# nvidia-smi answers in well under a second; a hung driver must not hang env.
NVIDIA_SMI_TIMEOUT_S = 20.0


def nvidia_gpus() -> tuple[tuple[Gpu, ...], str]:
    """(GPUs, why none) from `nvidia-smi --query-gpu=name,compute_cap`: lines like
    "Tesla T4, 7.5"."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return (), "nvidia-smi not found (no NVIDIA GPU or driver here)"
    try:
        proc = subprocess.run([exe, "--query-gpu=name,compute_cap", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=NVIDIA_SMI_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        return (), f"nvidia-smi failed ({type(e).__name__})"
    if proc.returncode != 0:
        return (), f"nvidia-smi failed (status {proc.returncode}: {_last_line(deque(proc.stderr.splitlines()))})"
    gpus = []
    for line in proc.stdout.splitlines()[:64]:
        name, _, cap = line.rpartition(",")
        try:
            gpus.append(Gpu(name=name.strip()[:100], capability=float(cap.strip())))
        except ValueError:
            continue
    return tuple(gpus), "" if gpus else "nvidia-smi listed no GPU"


def disk_free_gb(folder: Path) -> tuple[str, float | None]:
    """Free space where the run will write: the folder, or its nearest existing parent."""
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.exists():
        return str(probe), None
    try:
        return str(probe), shutil.disk_usage(probe).free / 1024 ** 3
    except OSError:
        return str(probe), None


# --- the child process ----------------------------------------------------------------------

@dataclass
class _Child:
    proc: subprocess.Popen[bytes]
    lines: "queue.Queue[str | None]"
    stderr: deque[str]


def _die_with_parent() -> None:
    """In the probe, before it runs anything (Linux): SIGKILL when the process that started
    it dies. The editor stops a cancelled `env` with SIGKILL, which leaves no chance to
    clean up, and the probe has its own process group, so without this a hanging import
    would outlive the cancel until its own timeout."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # no prctl: the probe's own timeout still ends it
        pass


def _spawn(python: str, cwd: str | None, job: dict[str, Any]) -> _Child:
    """Start the probe child. With job["forbid"] (the signature job) PYTHONPATH loses
    every entry that is relative or inside a forbidden folder (the workspace)."""
    source = CHILD_SOURCE_FILE.read_text(encoding="utf-8")
    kwargs: dict[str, Any] = {}
    if os.name == "posix":
        kwargs["start_new_session"] = True  # its own process group: a hang is killed whole
    if sys.platform.startswith("linux") and threading.current_thread() is threading.main_thread():
        # (the signal follows the thread that started the child: from a worker thread
        # it would fire when that thread ends, not when the process does)
        kwargs["preexec_fn"] = _die_with_parent
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONFAULTHANDLER"] = "1"
    if job.get("forbid") and env.get("PYTHONPATH"):
        roots = [os.path.realpath(f) for f in job["forbid"]]
        kept = [e for e in env["PYTHONPATH"].split(os.pathsep) if os.path.isabs(e) and not any(
            os.path.realpath(e) == r or os.path.realpath(e).startswith(r.rstrip(os.sep) + os.sep) for r in roots)]
        env["PYTHONPATH"] = os.pathsep.join(kept)
    proc = subprocess.Popen([python, "-c", source, json.dumps(job)], cwd=cwd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, **kwargs)
    lines: "queue.Queue[str | None]" = queue.Queue()
    tail: deque[str] = deque(maxlen=40)

    def pump_out() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            lines.put(raw.decode("utf-8", "replace"))
        lines.put(None)

    def pump_err() -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            tail.append(raw.decode("utf-8", "replace").rstrip())

    threading.Thread(target=pump_out, daemon=True).start()
    threading.Thread(target=pump_err, daemon=True).start()
    return _Child(proc=proc, lines=lines, stderr=tail)


def _kill(child: _Child) -> None:
    proc = child.proc
    if proc.poll() is None:
        try:
            if os.name == "posix":
                os.killpg(proc.pid, signal.SIGKILL)
            else:  # pragma: no cover
                proc.kill()
        except (ProcessLookupError, PermissionError, OSError):
            pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover
        pass


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def _last_line(tail: deque[str]) -> str:
    for line in reversed(tail):
        if line.strip():
            return line.strip()[:200]
    return ""


class PythonUnusable(Exception):
    pass


def run_items(python: str, cwd: str | None, path0: str, items: list[dict[str, Any]], timeout: float,
              argv0: str = "", guard: str = "",
              forbid: tuple[str, ...] = ()) -> tuple[dict[int, dict[str, Any]], str]:
    """Run probe items in child processes; results by item id, and the interpreter's
    version. A child that dies or hangs on an item costs only that item: the rest run in
    a fresh child. Raises PythonUnusable when the interpreter cannot run the probe at all."""
    results: dict[int, dict[str, Any]] = {}
    pending = list(items)
    version = ""
    while pending:
        job: dict[str, Any] = {"path0": path0, "items": pending, "argv0": argv0, "guard": guard}
        if forbid:
            job["forbid"] = list(forbid)
        try:
            child = _spawn(python, cwd, job)
        except OSError as e:
            raise PythonUnusable(f"{python}: cannot run ({e.strerror or e})") from None
        current: int | None = None
        hello = False
        deadline = time.monotonic() + timeout
        try:
            while True:
                try:
                    line = child.lines.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    _kill(child)
                    if current is None:
                        raise PythonUnusable(f"{python}: no answer within {timeout:g}s of starting")
                    results[current] = {"ok": False, "kind": "timeout", "message": f"no result after {timeout:g}s"}
                    break
                if line is None:  # the child's stdout closed: it ended
                    try:
                        code = child.proc.wait(timeout=10)
                    except subprocess.TimeoutExpired:  # pragma: no cover
                        _kill(child)
                        code = child.proc.returncode
                    if not hello:
                        why = _last_line(child.stderr) or f"exit status {code}"
                        raise PythonUnusable(f"{python}: cannot run the import probe ({why})")
                    if current is not None:
                        if code is not None and code < 0:
                            results[current] = {"ok": False, "kind": "crash", "signal": _signal_name(code),
                                                "message": _last_line(child.stderr)}
                        else:
                            results[current] = {"ok": False, "kind": "exit", "exit_code": code,
                                                "message": f"the process ended with status {code} "
                                                           "(os._exit or a native exit), no exception"}
                    break
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                if "hello" in msg:
                    hello = True
                    version = str(msg["hello"])
                    deadline = time.monotonic() + timeout
                elif "begin" in msg:
                    current = int(msg["begin"])
                    deadline = time.monotonic() + timeout
                elif "end" in msg:
                    results[int(msg["end"])] = msg
                    current = None
                elif msg.get("done"):
                    break
        finally:
            _kill(child)
        pending = [it for it in pending if it["id"] not in results]
    return results, version


# --- the whole check --------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class EnvRequest:
    entrypoint: Path | None = None
    module: str | None = None
    cwd: Path | None = None
    python: str | None = None
    timeout_s: float = 120.0
    run_entrypoint: bool = False
    required_gb: float | None = None
    checkpoint_gb: float | None = None
    keep: int = 1
    output_dir: Path | None = None


def _package_of(entry: Path) -> tuple[str, Path] | None:
    """For a script inside a package (folders with __init__.py): its package's dotted
    name and the folder that holds the top package, so relative imports resolve."""
    parts: list[str] = []
    folder = entry.parent
    while (folder / "__init__.py").is_file():
        parts.insert(0, folder.name)
        folder = folder.parent
    return (".".join(parts), folder) if parts else None


def collect(req: EnvRequest) -> EnvFacts:
    """Everything `env` measures, as facts. Never runs the entrypoint's top level unless
    req.run_entrypoint."""
    from .script import read_script

    python = req.python or sys.executable
    cwd = req.cwd.resolve() if req.cwd is not None else Path.cwd()
    base = EnvFacts(path=str(req.entrypoint) if req.entrypoint else (f"module {req.module}" if req.module
                                                                      else "(environment)"),
                    python=python, cwd=str(cwd), timeout_s=req.timeout_s, required_gb=req.required_gb,
                    checkpoint_gb=req.checkpoint_gb, keep=req.keep,
                    output_dir=str(req.output_dir) if req.output_dir else None,
                    imports_requested=bool(req.entrypoint or req.module))
    facts = _measure(base, req)
    if not facts.imports_requested:
        return facts
    if not cwd.is_dir():
        return _replace(facts, cwd_missing=True)
    script: Path | None = None
    path0 = str(cwd)
    package = ""
    if req.entrypoint is not None:
        script = req.entrypoint if req.entrypoint.is_absolute() else cwd / req.entrypoint
        if not script.is_file():
            return _replace(facts, entry_error=f"{req.entrypoint}: no such file")
        path0 = str(script.parent)  # `python train.py` puts the script's folder first
        pkg = _package_of(script)
        if pkg is not None:
            package = pkg[0]
    else:
        assert req.module is not None
        try:
            located, version = run_items(python, str(cwd), path0, [{"id": 0, "kind": "locate",
                                                                    "module": req.module}], req.timeout_s)
        except PythonUnusable as e:
            return _replace(facts, python_error=str(e))
        facts = _replace(facts, python_version=version)
        found = located.get(0, {})
        if not found.get("ok") or not found.get("file"):
            probe = ImportProbe(module=req.module, names=(), location=Location(path=facts.path),
                                context="module", outcome=found.get("kind", "module-not-found"),
                                exc_type=found.get("type", "ModuleNotFoundError"),
                                detail=found.get("message", f"No module named {req.module!r}"),
                                missing_module=found.get("missing_module", req.module))
            return _replace(facts, probes=(probe,))
        script = Path(found["file"])
        package = req.module.rpartition(".")[0]
        facts = _replace(facts, path=str(script))
    try:
        sfacts = read_script(script)
    except ReadError as e:
        return _replace(facts, entry_error=str(e))
    # Findings name the script as the user gave it (relative paths stay relative).
    shown = str(req.entrypoint) if req.entrypoint is not None else str(script)
    items: list[dict[str, Any]] = []
    meta: list[tuple[str, tuple[str, ...], Location, str]] = []
    seen: set[tuple[str, int, tuple[str, ...]]] = set()
    for imp in sfacts.imports:
        if imp.context == "type-checking":
            continue
        key = (imp.module, imp.level, imp.names)
        if key in seen:
            continue
        seen.add(key)
        written = "." * imp.level + imp.module
        item: dict[str, Any] = {"id": len(items), "kind": "import", "module": written,
                                "names": list(imp.names)}
        if imp.level:
            if not package:
                # python train.py: a relative import has no package and fails the same way.
                item["package"] = None
            else:
                item["package"] = package
        items.append(item)
        meta.append((written, imp.names, Location(path=shown, span=imp.span), imp.context))
    if req.run_entrypoint:
        if req.module:
            items.append({"id": len(items), "kind": "import", "module": req.module, "names": []})
        else:
            items.append({"id": len(items), "kind": "run", "path": str(script)})
        meta.append((req.module or script.name, (), Location(path=shown, span=Span(0, 0, 0, 0)),
                     "entrypoint"))
    path_for_imports = path0
    if package and req.entrypoint is not None and any(imp.level for imp in sfacts.imports):
        # Relative imports: the script is meant to run as `python -m pkg.train`, which puts
        # the folder holding the top package first on sys.path.
        pkg = _package_of(script)
        if pkg is not None:
            path_for_imports = str(pkg[1])
    try:
        # Without --run-entrypoint the script's own file is never imported, even when it
        # imports itself or a local module imports it (the child refuses that import).
        results, version = run_items(python, str(cwd), path_for_imports, items, req.timeout_s,
                                     argv0=str(script), guard="" if req.run_entrypoint else str(script))
    except PythonUnusable as e:
        return _replace(facts, python_error=str(e))
    precision = tuple(PrecisionAsk(key=key, config=c.cls, location=Location(path=shown if v.path is None else v.path,
                                                                          span=v.span))
                      for c in sfacts.configs for key in ("bf16", "tf32")
                      for v in [c.kwargs.get(key)] if v is not None and v.known and v.value is True)
    facts = _replace(facts, precision=precision)
    probes = []
    api, api_error = _signatures(python, sfacts.api_calls, shown, req.timeout_s,
                                 forbid=(str(cwd), str(script.parent)))
    for item, (written, names, loc, context) in zip(items, meta):
        r = results.get(item["id"], {"ok": False, "kind": "exception", "message": "no result"})
        probes.append(ImportProbe(
            module=written, names=names, location=loc, context=context,
            outcome="ok" if r.get("ok") else str(r.get("kind", "exception")),
            exc_type=str(r.get("type", "")), detail=str(r.get("message", "")), where=str(r.get("where", "")),
            missing_module=str(r.get("missing_module", "") or ""),
            missing_names=tuple(r.get("names", ()) or ()) if not r.get("ok") else (),
            exit_code=r.get("exit_code"), signal=str(r.get("signal", ""))))
    return _replace(facts, probes=tuple(probes), python_version=version or facts.python_version, api=api,
                    api_error=api_error)


def _signatures(python: str, calls: tuple[ApiCall, ...], shown: str, timeout: float,
                forbid: tuple[str, ...]) -> tuple[tuple[ApiProbe, ...], str]:
    """Each distinct class the script calls, looked up in a child that starts in an empty
    folder and refuses modules from `forbid` (the workspace). Never calls a class."""
    import tempfile

    if not calls:
        return (), ""
    keys: dict[tuple[str, str], int] = {}
    strings: dict[int, set[str]] = {}
    for call in calls:
        i = keys.setdefault((call.module, call.attr), len(keys))
        strings.setdefault(i, set()).update(k.name for k in call.keywords if k.value.known and
                                            isinstance(k.value.value, str))
    items = [{"id": i, "kind": "signature", "module": module, "attr": attr, "strings": sorted(strings[i])}
             for (module, attr), i in keys.items()]
    if os.sep in python or (os.altsep and os.altsep in python):
        python = os.path.abspath(python)  # the child starts in another folder
    with tempfile.TemporaryDirectory(prefix="trainproof-signatures-") as empty:
        try:
            results, _ = run_items(python, empty, empty, items, timeout, forbid=forbid)
        except PythonUnusable as e:
            return (), str(e)
    found: dict[int, Signature] = {}
    for (module, _attr), i in keys.items():
        r = results.get(i, {"ok": False, "kind": "exception", "message": "no result"})
        choices = tuple(sorted((str(k), tuple(str(x) for x in v.get("values", ())), bool(v.get("any_str")))
                               for k, v in (r.get("choices") or {}).items()))
        found[i] = Signature(
            outcome="ok" if r.get("ok") else str(r.get("kind", "exception")), library=module.split(".")[0],
            version=str(r.get("version", "") or ""), qualname=str(r.get("qualname", "") or ""),
            params=tuple(str(p) for p in r.get("params", ()) or ()), var_keyword=bool(r.get("var_keyword")),
            choices=choices,
            detail=str(r.get("message", "") or "") if not r.get("ok") else "")
    return tuple(ApiProbe(call=c, path=shown, signature=found[keys[(c.module, c.attr)]]) for c in calls), ""


def _measure(facts: EnvFacts, req: EnvRequest) -> EnvFacts:
    memory = system_memory_gb()
    probe, free = ("", None)
    if req.output_dir is not None:
        probe, free = disk_free_gb(req.output_dir.resolve())
    gpus, note = nvidia_gpus()
    return _replace(facts, memory_gb=memory, disk_probe=probe, disk_free_gb=free, gpus=gpus, gpu_note=note)


def _replace(facts: EnvFacts, **changes: Any) -> EnvFacts:
    from dataclasses import replace

    return replace(facts, **changes)


__all__ = ["EnvFacts", "EnvRequest", "ImportProbe", "ApiProbe", "Signature", "Gpu", "PrecisionAsk", "nvidia_gpus", "collect", "run_items", "system_memory_gb",
           "disk_free_gb", "PythonUnusable"]
