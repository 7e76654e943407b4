"""Environment rules: does the training script import here, and is there room to run?

Every rule reads `EnvFacts` (envcheck.py: imports probed in a child process of the chosen
interpreter, memory and disk measured). Import findings land on the script's import line.
IDs and meanings follow the published trainproof `env` command where they match.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from ..readers.envcheck import EnvFacts, ImportProbe
from ..core.model import Hit, Level, Location
from .base import Context, Family, NoLimits, Rule, Skip

# Every rule here judges one EnvFacts (readers/envcheck.py).
ENV: Family[EnvFacts, Context] = Family("env")


def _rule(**kw: Any) -> Rule[EnvFacts, Context]:
    return Rule(family=ENV, **kw)


def _probes(facts: EnvFacts) -> tuple[ImportProbe, ...]:
    if not facts.imports_requested:
        raise Skip("no --entrypoint or --module given")
    if facts.python_error:
        raise Skip("the interpreter could not be run (TP-ENV-PYTHON-UNUSABLE)")
    if facts.cwd_missing:
        raise Skip("the working directory does not exist (TP-ENV-CWD-MISSING)")
    if facts.entry_error:
        raise Skip(facts.entry_error)
    return facts.probes


def _what(p: ImportProbe) -> str:
    if p.context == "entrypoint":
        return f"running the entrypoint {p.module}"
    if p.names:
        return f"from {p.module} import {', '.join(p.names)}"
    return f"import {p.module}"


def _import_evidence(p: ImportProbe) -> dict[str, Any]:
    return {"module": p.module, "names": ", ".join(p.names), "outcome": p.outcome, "exception": p.exc_type,
            "missing_module": p.missing_module, "missing_names": ", ".join(p.missing_names),
            "raised_at": p.where, "context": p.context}


def _failure_message(p: ImportProbe) -> str:
    if p.outcome == "module-not-found":
        missing = p.missing_module or p.module
        also = "" if missing in (p.module, p.module.lstrip(".")) else f" (needed by {p.module})"
        return f"{_what(p)}: ModuleNotFoundError, no module named {missing!r}{also}"
    if p.outcome == "missing-name":
        return f"{_what(p)}: {p.module} has no {', '.join(repr(n) for n in p.missing_names)} (ImportError)"
    at = f" (raised at {p.where})" if p.where else ""
    return f"{_what(p)}: {p.exc_type}: {p.detail}{at}"


_PY_EXCEPTION = ("module-not-found", "missing-name", "exception")

# --- imports that raise -------------------------------------------------------------------

FAIL_DOC = """A module the training script imports at module level cannot be imported here.

What it flags: a module-level import of the script (found with `ast`) that raises in a
child process of the chosen interpreter: ModuleNotFoundError (named), `from X import
name` where X has no `name`, or any other exception; located on the script's import line,
with where it was raised.
Why it matters: the run dies before its first step — after the job was queued, the GPU
allocated and the model maybe downloaded.
What it does not mean: that the script is wrong; the environment (interpreter, venv,
versions, working directory) is. The script's own top-level code was not run.
"""


def check_import_fail(facts: EnvFacts, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    for p in _probes(facts):
        if p.outcome in _PY_EXCEPTION and p.context in ("module", "entrypoint"):
            yield Hit(message=_failure_message(p), evidence=_import_evidence(p), location=p.location)


IMPORT_FAIL_RULE = _rule(id="TP-ENV-IMPORT-FAIL", name="import-fails", level=Level.FAIL, doc=FAIL_DOC,
                         check=check_import_fail, origin="trainproof")

LAZY_DOC = """An import inside a function of the training script fails here.

What it flags: an import statement inside a function (a lazy import) whose module raises
ModuleNotFoundError, lacks the imported name, or raises on import in the chosen
interpreter; located on the import line.
Why it matters: the run fails when that function first runs — possibly hours in (an
export at the end, an evaluation callback).
What it does not mean: a certain failure: the function may never be called. Imports
under `try/except ImportError` are TP-ENV-IMPORT-OPTIONAL-MISSING instead.
"""


def check_lazy(facts: EnvFacts, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    for p in _probes(facts):
        if p.outcome in _PY_EXCEPTION and p.context == "function":
            yield Hit(message=_failure_message(p) + "; it fails when its function first runs",
                      evidence=_import_evidence(p), location=p.location)


IMPORT_LAZY_RULE = _rule(id="TP-ENV-IMPORT-LAZY-FAIL", name="lazy-import-fails", level=Level.WARN,
                         doc=LAZY_DOC, check=check_lazy)

OPTIONAL_DOC = """An optional import of the training script is not available here.

What it flags: an import under `try: ... except ImportError` (or a broader except) that
fails in the chosen interpreter; located on the import line.
Why it matters: the script runs without it — a logger, a faster kernel or a metric
silently missing; worth knowing before hours of training, not worth failing.
What it does not mean: that the run will fail; this is INFO and never changes a verdict.
"""


def check_optional(facts: EnvFacts, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    for p in _probes(facts):
        if p.outcome in _PY_EXCEPTION and p.context == "optional":
            yield Hit(message=_failure_message(p) + "; the script catches it and runs without",
                      evidence=_import_evidence(p), location=p.location)


IMPORT_OPTIONAL_RULE = _rule(id="TP-ENV-IMPORT-OPTIONAL-MISSING", name="optional-import-missing",
                             level=Level.INFO, doc=OPTIONAL_DOC, check=check_optional)

# --- imports that kill the interpreter --------------------------------------------------------

CRASH_DOC = """Importing a module the training script needs crashes the interpreter.

What it flags: an import during which the child process died by a signal (SIGSEGV,
SIGABRT, SIGBUS, ...) with no Python exception — a native extension crashing; located on
the script's import line, with the signal and faulthandler's last line.
Why it matters: the run will die the same way at launch, with no traceback to explain it;
usually a binary wheel built for another CUDA, glibc or numpy ABI.
What it does not mean: a Python-level error (TP-ENV-IMPORT-FAIL) or a deliberate exit
(TP-ENV-IMPORT-EXIT).
"""


def check_crash(facts: EnvFacts, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    for p in _probes(facts):
        if p.outcome == "crash":
            last = f"; last output: {p.detail}" if p.detail else ""
            yield Hit(message=f"{_what(p)}: the interpreter died by {p.signal}, no Python exception{last}",
                      evidence={**_import_evidence(p), "signal": p.signal}, location=p.location)


IMPORT_CRASH_RULE = _rule(id="TP-ENV-IMPORT-CRASH", name="import-crashes", level=Level.FAIL, doc=CRASH_DOC,
                          check=check_crash, origin="trainproof")

EXIT_DOC = """Importing a module the training script needs ends the interpreter.

What it flags: an import during which the process exited by itself — `os._exit(n)` (no
exception, no cleanup) or `sys.exit(n)` raised on import — located on the script's
import line, with the exit status.
Why it matters: the run stops at launch, often with status 0, so a scheduler records
success while nothing trained.
What it does not mean: a native crash (TP-ENV-IMPORT-CRASH): no signal was involved.
"""


def check_exit(facts: EnvFacts, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    for p in _probes(facts):
        if p.outcome == "exit":
            how = p.detail if p.exc_type == "SystemExit" else f"os._exit({p.exit_code}) or a native exit"
            yield Hit(message=f"{_what(p)}: the module ends the interpreter on import ({how})",
                      evidence={**_import_evidence(p), "exit_code": p.exit_code}, location=p.location)


IMPORT_EXIT_RULE = _rule(id="TP-ENV-IMPORT-EXIT", name="import-exits", level=Level.FAIL, doc=EXIT_DOC,
                         check=check_exit)


@dataclass(frozen=True, kw_only=True)
class TimeoutLimits:
    # Importing torch + transformers cold from a network filesystem takes tens of seconds;
    # two minutes per module leaves room for that and still catches a real hang.
    timeout_s: float = 120.0


TIMEOUT_DOC = """Importing a module the training script needs does not finish.

What it flags: an import that gave no result within `timeout_s` seconds (`--timeout`
overrides it); the child was killed; located on the script's import line.
Why it matters: an import that hangs (a lock on a shared cache, a network call at import,
a deadlock in an extension) hangs the training launch too.
What it does not mean: a certain hang on a warm machine — a cold cache on a slow disk can
exceed a short timeout.
"""


def check_timeout(facts: EnvFacts, limits: TimeoutLimits, ctx: Context) -> Iterator[Hit]:
    for p in _probes(facts):
        if p.outcome == "timeout":
            yield Hit(message=f"{_what(p)}: no result after {facts.timeout_s:g}s; the import was killed",
                      evidence={**_import_evidence(p), "timeout_s": facts.timeout_s}, location=p.location)


IMPORT_TIMEOUT_RULE = _rule(id="TP-ENV-IMPORT-TIMEOUT", name="import-hangs", level=Level.FAIL,
                            doc=TIMEOUT_DOC, limits=TimeoutLimits, check=check_timeout,
                            origin="trainproof")

# --- the interpreter and the working directory -------------------------------------------------

PYTHON_DOC = """The interpreter to probe with could not be run.

What it flags: `--python EXE` (or the current interpreter) that does not exist, is not
executable, or cannot run the probe (too old, broken install); the message says why.
Why it matters: no import was checked (NOT-CHECKED, exit 2).
What it does not mean: that the training script is broken.
"""


def check_python(facts: EnvFacts, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    if facts.python_error:
        yield Hit(message=facts.python_error, evidence={"python": facts.python}, location=Location(path=facts.path))


PYTHON_RULE = _rule(id="TP-ENV-PYTHON-UNUSABLE", name="python-unusable", level=Level.NOT_CHECKED,
                    doc=PYTHON_DOC, check=check_python, origin="trainproof")

CWD_DOC = """The working directory to probe from does not exist.

What it flags: `--cwd DIR` that is not a folder.
Why it matters: imports resolve relative to the launch folder (editable installs, source
checkouts); probing elsewhere would blame the environment falsely, so no import was
checked (NOT-CHECKED, exit 2).
What it does not mean: that the imports would fail from the right folder.
"""


def check_cwd(facts: EnvFacts, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    if facts.cwd_missing:
        yield Hit(message=f"working directory {facts.cwd} does not exist; imports not checked",
                  evidence={"cwd": facts.cwd}, location=Location(path=facts.path))


CWD_RULE = _rule(id="TP-ENV-CWD-MISSING", name="cwd-missing", level=Level.NOT_CHECKED, doc=CWD_DOC,
                 check=check_cwd, origin="trainproof")

# --- memory ------------------------------------------------------------------------------------

MEM_INFO_DOC = """System memory, as measured.

What it flags: the RAM available and in total, when it could be measured; with
`--required-gb`, also the margin left.
Why it matters: the numbers the memory rules ran on, for the record.
What it does not mean: anything by itself — INFO never changes a verdict.
"""


def _memory(facts: EnvFacts) -> tuple[float, float]:
    if facts.memory_gb is None:
        raise Skip("system memory could not be measured on this platform")
    return facts.memory_gb


def check_mem_info(facts: EnvFacts, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    total, avail = _memory(facts)
    extra = "; pass --required-gb to judge it" if facts.required_gb is None else \
        f"; {facts.required_gb:g} GB required"
    yield Hit(message=f"{avail:.1f} GB of {total:.1f} GB RAM available{extra}",
              evidence={"available_gb": round(avail, 2), "total_gb": round(total, 2),
                        "required_gb": facts.required_gb},
              location=Location(path=facts.path))


MEM_INFO_RULE = _rule(id="TP-ENV-MEM-INFO", name="memory-measured", level=Level.INFO, doc=MEM_INFO_DOC,
                      check=check_mem_info, origin="trainproof")

MEM_SHORT_DOC = """Less RAM is available than the run declares it needs.

What it flags: available system RAM below `--required-gb`.
Why it matters: the run is killed by the OOM killer, or swaps until it crawls — on some
drivers GPU memory spills into system RAM and freezes the machine instead of failing.
What it does not mean: a problem on another machine, or after other jobs finish.
"""


def check_mem_short(facts: EnvFacts, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    if facts.required_gb is None:
        raise Skip("no --required-gb given")
    total, avail = _memory(facts)
    if avail < facts.required_gb:
        yield Hit(message=f"{avail:.1f} GB RAM available, {facts.required_gb:g} GB required ({total:.1f} GB total)",
                  evidence={"available_gb": round(avail, 2), "required_gb": facts.required_gb,
                            "total_gb": round(total, 2)},
                  location=Location(path=facts.path))


MEM_SHORT_RULE = _rule(id="TP-ENV-MEM-INSUFFICIENT", name="memory-insufficient", level=Level.FAIL,
                       doc=MEM_SHORT_DOC, check=check_mem_short, origin="trainproof")


@dataclass(frozen=True, kw_only=True)
class TightLimits:
    # Data-loader workers, the page cache of a memory-mapped dataset and checkpoint saves
    # (a full copy of the state dict) all come on top of the declared need; under 4 GB of
    # slack one of them tips the run over.
    min_margin_gb: float = 4.0


MEM_TIGHT_DOC = """The RAM left over after the run's declared need is thin.

What it flags: available RAM minus `--required-gb` below `min_margin_gb` (but not
negative: that is TP-ENV-MEM-INSUFFICIENT).
Why it matters: the declared need rarely counts loader workers, page cache and
checkpoint copies; a thin margin turns into an OOM kill mid-run.
What it does not mean: a certain failure — the declared need may already include slack.
"""


def check_mem_tight(facts: EnvFacts, limits: TightLimits, ctx: Context) -> Iterator[Hit]:
    if facts.required_gb is None:
        raise Skip("no --required-gb given")
    _, avail = _memory(facts)
    margin = avail - facts.required_gb
    if 0 <= margin < limits.min_margin_gb:
        yield Hit(message=(f"{avail:.1f} GB RAM available, {facts.required_gb:g} GB required: margin "
                           f"{margin:.1f} GB < {limits.min_margin_gb:g} GB"),
                  evidence={"available_gb": round(avail, 2), "required_gb": facts.required_gb,
                            "margin_gb": round(margin, 2)},
                  location=Location(path=facts.path))


MEM_TIGHT_RULE = _rule(id="TP-ENV-MEM-TIGHT", name="memory-tight", level=Level.WARN, doc=MEM_TIGHT_DOC,
                       limits=TightLimits, check=check_mem_tight, origin="trainproof")

MEM_UNKNOWN_DOC = """System memory could not be measured, so --required-gb was not judged.

What it flags: `--required-gb` given on a platform where available RAM cannot be read.
Why it matters: the memory check did not run (NOT-CHECKED, exit 2) — never reported as
zero memory.
What it does not mean: that memory is short.
"""


def _unmeasured(facts: EnvFacts, measured: object, message: str, **asked: Any) -> Iterator[Hit]:
    """A check was asked for (every value in `asked` is given) but what it compares with
    could not be measured: one finding, `message` formatted with `asked` (its evidence)."""
    if measured is None and all(v is not None for v in asked.values()):
        yield Hit(message=message.format(**asked), evidence=asked, location=Location(path=facts.path))


def check_mem_unknown(facts: EnvFacts, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    return _unmeasured(facts, facts.memory_gb, "--required-gb {required_gb:g} given but system memory cannot be "
                       "measured here", required_gb=facts.required_gb)


MEM_UNKNOWN_RULE = _rule(id="TP-ENV-MEM-UNKNOWN", name="memory-unknown", level=Level.NOT_CHECKED,
                         doc=MEM_UNKNOWN_DOC, check=check_mem_unknown, origin="trainproof")

# --- disk --------------------------------------------------------------------------------------

DISK_INFO_DOC = """Free disk space where the run writes, as measured.

What it flags: the free space in `--output-dir` (or its nearest existing parent); with
`--checkpoint-gb`, also what the kept checkpoints need.
Why it matters: the numbers the disk rule ran on, for the record.
What it does not mean: anything by itself — INFO never changes a verdict.
"""


def _disk(facts: EnvFacts) -> float:
    if facts.output_dir is None:
        raise Skip("no --output-dir given")
    if facts.disk_free_gb is None:
        raise Skip("free space could not be measured (TP-ENV-DISK-UNKNOWN)")
    return facts.disk_free_gb


def check_disk_info(facts: EnvFacts, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    free = _disk(facts)
    need = "; pass --checkpoint-gb to judge it" if facts.checkpoint_gb is None else \
        f"; {facts.checkpoint_gb * max(facts.keep, 1):g} GB needed ({facts.checkpoint_gb:g} GB x {max(facts.keep, 1)} kept)"
    yield Hit(message=f"{free:.1f} GB free at {facts.disk_probe}{need}",
              evidence={"free_gb": round(free, 2), "probe": facts.disk_probe, "checkpoint_gb": facts.checkpoint_gb,
                        "keep": facts.keep},
              location=Location(path=facts.path))


DISK_INFO_RULE = _rule(id="TP-ENV-DISK-INFO", name="disk-measured", level=Level.INFO, doc=DISK_INFO_DOC,
                       check=check_disk_info, origin="trainproof")

DISK_SHORT_DOC = """Not enough disk space for the checkpoints the run will keep.

What it flags: free space in `--output-dir` below `--checkpoint-gb` x `--keep`.
Why it matters: the save that runs out of space leaves a truncated checkpoint
(TP-ENV-CKPT-TRUNCATED) and usually kills the run — hours in, at a save.
What it does not mean: a problem if older checkpoints are deleted before the new one is
written (HF writes first, then rotates).
"""


def check_disk_short(facts: EnvFacts, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    free = _disk(facts)
    if facts.checkpoint_gb is None:
        raise Skip("no --checkpoint-gb given")
    need = facts.checkpoint_gb * max(facts.keep, 1)
    if free < need:
        yield Hit(message=(f"{free:.1f} GB free at {facts.disk_probe}, {need:g} GB needed "
                           f"({facts.checkpoint_gb:g} GB x {max(facts.keep, 1)} kept)"),
                  evidence={"free_gb": round(free, 2), "needed_gb": need, "checkpoint_gb": facts.checkpoint_gb,
                            "keep": facts.keep},
                  location=Location(path=facts.path))


DISK_SHORT_RULE = _rule(id="TP-ENV-DISK-INSUFFICIENT", name="disk-insufficient", level=Level.FAIL,
                        doc=DISK_SHORT_DOC, check=check_disk_short, origin="trainproof")

DISK_UNKNOWN_DOC = """Free disk space could not be measured for the output folder.

What it flags: `--output-dir` where neither the folder nor any parent can be measured.
Why it matters: the disk check did not run (NOT-CHECKED, exit 2).
What it does not mean: that the disk is full.
"""


def check_disk_unknown(facts: EnvFacts, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    return _unmeasured(facts, facts.disk_free_gb, "free space at {output_dir} could not be measured",
                       output_dir=facts.output_dir)


DISK_UNKNOWN_RULE = _rule(id="TP-ENV-DISK-UNKNOWN", name="disk-unknown", level=Level.NOT_CHECKED,
                          doc=DISK_UNKNOWN_DOC, check=check_disk_unknown, origin="trainproof")

ENTRY_DOC = """The training script given to env could not be read.

What it flags: an `--entrypoint` that does not exist or that this interpreter cannot
parse (the message has the line).
Why it matters: its imports were not found, so none was checked (NOT-CHECKED, exit 2).
What it does not mean: that the script fails under its own interpreter — a newer Python
may accept syntax this one does not.
"""


def check_entry(facts: EnvFacts, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    if facts.entry_error:
        yield Hit(message=facts.entry_error, evidence={}, location=Location(path=facts.path))


ENTRY_RULE = _rule(id="TP-ENV-ENTRYPOINT-UNREADABLE", name="entrypoint-unreadable", level=Level.NOT_CHECKED,
                   doc=ENTRY_DOC, check=check_entry)


# --- precision against the GPU -------------------------------------------------------------------

# bf16 arithmetic and TF32 matmuls need compute capability 8.0 (Ampere) or newer; transformers'
# is_torch_bf16_gpu_available / is_torch_tf32_available ask the same.
AMPERE = 8.0

GPU_DOC = """The script asks for bf16 or tf32 on a GPU older than Ampere.

What it flags: `bf16=True` or `tf32=True` in a TrainingArguments-family config of the
script while every GPU `nvidia-smi` lists has a compute capability below 8.0 (T4, V100,
P100); located on the keyword, naming the GPU.
Why it matters: TrainingArguments checks this on construction and raises ValueError
("Your setup doesn't support bf16/gpu", "--tf32 requires Ampere or a newer GPU arch"):
the script dies before training starts. On these GPUs use fp16 (with its loss scaling) or
float32.
What it does not mean: anything on a machine without nvidia-smi (the check says it did
not run), or for another machine the script will run on.
"""


def check_gpu_precision(facts: EnvFacts, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    if not facts.precision:
        raise Skip("the script's configs ask for neither bf16 nor tf32")
    if not facts.gpus:
        raise Skip(f"no GPU measured: {facts.gpu_note or 'nvidia-smi listed none'}; bf16/tf32 support not checked")
    best = max(facts.gpus, key=lambda g: g.capability)
    if best.capability >= AMPERE:
        return
    for ask in facts.precision:
        yield Hit(message=(f"{ask.config}({ask.key}=True) on {best.name} (compute capability {best.capability:g} < "
                           f"{AMPERE:g}, before Ampere): {ask.config} raises ValueError before training starts"),
                  evidence={"key": ask.key, "gpu": best.name, "compute_capability": best.capability,
                            "gpus": len(facts.gpus), "config": ask.config},
                  location=ask.location)


GPU_PRECISION_RULE = _rule(id="TP-ENV-PRECISION-UNSUPPORTED-GPU", name="precision-unsupported-gpu",
                           level=Level.FAIL, doc=GPU_DOC, check=check_gpu_precision)


RULES: tuple[Rule[EnvFacts, Context], ...] = (
    IMPORT_FAIL_RULE, IMPORT_LAZY_RULE, IMPORT_OPTIONAL_RULE, IMPORT_CRASH_RULE, IMPORT_EXIT_RULE,
    IMPORT_TIMEOUT_RULE, PYTHON_RULE, CWD_RULE, ENTRY_RULE, MEM_INFO_RULE, MEM_SHORT_RULE, MEM_TIGHT_RULE,
    MEM_UNKNOWN_RULE, DISK_INFO_RULE, DISK_SHORT_RULE, DISK_UNKNOWN_RULE, GPU_PRECISION_RULE,
)
