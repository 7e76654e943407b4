"""The environment rules (rules/env.py) on facts built here, field by field: every finding
asserted whole (message, evidence, location), every skip by its exact reason, each limit
met exactly and passed just, several probes and asks in one input (a rule that stopped at
the first would miss the second), and each context and outcome a probe may have.

The facts are what readers/envcheck.py returns after probing imports in a child process
and measuring memory and disk; building them directly proves the rules and nothing in
front of them, and starts no process (tests/test_env.py probes real interpreters).
"""

from __future__ import annotations

from typing import Any

import pytest

from trainproof_lsp.core.model import Hit, Location, Span
from trainproof_lsp.readers.envcheck import EnvFacts, Gpu, ImportProbe, PrecisionAsk
from trainproof_lsp.rules.base import Context, Skip
from trainproof_lsp.rules.env import (CWD_RULE, DISK_INFO_RULE, DISK_SHORT_RULE, DISK_UNKNOWN_RULE, ENTRY_RULE,
                                      GPU_PRECISION_RULE, IMPORT_CRASH_RULE, IMPORT_EXIT_RULE, IMPORT_FAIL_RULE,
                                      IMPORT_LAZY_RULE, IMPORT_OPTIONAL_RULE, IMPORT_TIMEOUT_RULE, MEM_INFO_RULE,
                                      MEM_SHORT_RULE, MEM_TIGHT_RULE, MEM_UNKNOWN_RULE, PYTHON_RULE, TightLimits)

SCRIPT = "/run/train.py"
FILE = Location(path=SCRIPT)


def line(n: int) -> Location:
    return Location(path=SCRIPT, span=Span(n, 0, n, 20))


def env(**kw: Any) -> EnvFacts:
    kw.setdefault("path", SCRIPT)
    kw.setdefault("python", "/usr/bin/python3")
    return EnvFacts(**kw)


def probe(module: str, outcome: str, context: str = "module", at: int = 0, **kw: Any) -> ImportProbe:
    return ImportProbe(module=module, names=kw.pop("names", ()), location=line(at), context=context, outcome=outcome,
                       **kw)


def run(rule: Any, facts: EnvFacts, limits: Any = None) -> list[Hit]:
    return list(rule.check(facts, limits if limits is not None else rule.limits(), Context()))


def skip(rule: Any, facts: EnvFacts, limits: Any = None) -> str:
    with pytest.raises(Skip) as e:
        run(rule, facts, limits)
    return str(e.value)


def evidence(p: ImportProbe, **more: Any) -> dict[str, Any]:
    return {"module": p.module, "names": ", ".join(p.names), "outcome": p.outcome, "exception": p.exc_type,
            "missing_module": p.missing_module, "missing_names": ", ".join(p.missing_names), "raised_at": p.where,
            "context": p.context, **more}


IMPORT_RULES = (IMPORT_FAIL_RULE, IMPORT_LAZY_RULE, IMPORT_OPTIONAL_RULE, IMPORT_CRASH_RULE, IMPORT_EXIT_RULE,
                IMPORT_TIMEOUT_RULE)


# --- why imports were not probed ------------------------------------------------------------------

@pytest.mark.parametrize("rule", IMPORT_RULES, ids=lambda r: r.id)
def test_every_import_rule_says_why_it_did_not_run(rule):
    p = (probe("torch", "crash"),)
    assert skip(rule, env(probes=p)) == "no --entrypoint or --module given"
    assert skip(rule, env(probes=p, imports_requested=True, python_error="no such file", cwd_missing=True,
                          entry_error="x")) == "the interpreter could not be run (TP-ENV-PYTHON-UNUSABLE)"
    assert skip(rule, env(probes=p, imports_requested=True, cwd_missing=True, entry_error="x")) == (
        "the working directory does not exist (TP-ENV-CWD-MISSING)")
    assert skip(rule, env(probes=p, imports_requested=True, entry_error="train.py:3: invalid syntax")) == (
        "train.py:3: invalid syntax")
    assert run(rule, env(imports_requested=True)) == []


# --- TP-ENV-IMPORT-FAIL / LAZY-FAIL / OPTIONAL-MISSING -------------------------------------------

def failures() -> tuple[ImportProbe, ...]:
    """One failing probe of each kind, in each context, and probes that did not fail."""
    return (
        probe("torch", "ok", at=1),
        probe("apex", "module-not-found", at=2, exc_type="ModuleNotFoundError", missing_module="apex"),
        probe("mypkg.models", "module-not-found", at=3, exc_type="ModuleNotFoundError", missing_module="einops",
              names=("Net",)),
        probe(".utils", "module-not-found", at=4, exc_type="ModuleNotFoundError", missing_module="utils"),
        probe("transformers", "missing-name", at=5, exc_type="ImportError", names=("Trainer", "OldThing", "Gone"),
              missing_names=("OldThing", "Gone")),
        probe("bad", "exception", at=6, exc_type="RuntimeError", detail="CUDA mismatch", where="bad/__init__.py:7"),
        probe("plain", "exception", at=7, exc_type="ValueError", detail="nope"),
        probe("torch", "crash", at=8, signal="SIGSEGV"),
        probe("wandb", "module-not-found", "function", at=9, exc_type="ModuleNotFoundError", missing_module="wandb"),
        probe("deepspeed", "exception", "optional", at=10, exc_type="OSError", detail="libcudart missing"),
        probe("train", "module-not-found", "entrypoint", at=0, exc_type="ModuleNotFoundError", missing_module=""),
        probe("xformers", "missing-name", "optional", at=11, names=("ops",), missing_names=("ops",)),
        probe("peft", "timeout", "function", at=12),
        probe("slow", "exception", "function", at=13, exc_type="ImportError", detail="cannot import",
              where="slow.py:1"),
    )


def test_import_fail_every_module_level_and_entrypoint_failure_whole():
    ps = failures()
    got = run(IMPORT_FAIL_RULE, env(imports_requested=True, probes=ps))
    assert got == [
        Hit(message="import apex: ModuleNotFoundError, no module named 'apex'", evidence=evidence(ps[1]),
            location=line(2)),
        Hit(message="from mypkg.models import Net: ModuleNotFoundError, no module named 'einops' (needed by "
                    "mypkg.models)", evidence=evidence(ps[2]), location=line(3)),
        Hit(message="import .utils: ModuleNotFoundError, no module named 'utils'", evidence=evidence(ps[3]),
            location=line(4)),
        Hit(message="from transformers import Trainer, OldThing, Gone: transformers has no 'OldThing', 'Gone' "
                    "(ImportError)", evidence=evidence(ps[4]), location=line(5)),
        Hit(message="import bad: RuntimeError: CUDA mismatch (raised at bad/__init__.py:7)", evidence=evidence(ps[5]),
            location=line(6)),
        Hit(message="import plain: ValueError: nope", evidence=evidence(ps[6]), location=line(7)),
        Hit(message="running the entrypoint train: ModuleNotFoundError, no module named 'train'",
            evidence=evidence(ps[10]), location=line(0)),
    ]
    assert got[1].evidence == {"module": "mypkg.models", "names": "Net", "outcome": "module-not-found",
                               "exception": "ModuleNotFoundError", "missing_module": "einops", "missing_names": "",
                               "raised_at": "", "context": "module"}


def test_import_lazy_every_failure_inside_a_function_whole():
    ps = failures()
    got = run(IMPORT_LAZY_RULE, env(imports_requested=True, probes=ps))
    assert got == [
        Hit(message="import wandb: ModuleNotFoundError, no module named 'wandb'; it fails when its function first runs",
            evidence=evidence(ps[8]), location=line(9)),
        Hit(message="import slow: ImportError: cannot import (raised at slow.py:1); it fails when its function first "
                    "runs", evidence=evidence(ps[13]), location=line(13)),
    ]


def test_import_optional_every_caught_failure_whole():
    ps = failures()
    got = run(IMPORT_OPTIONAL_RULE, env(imports_requested=True, probes=ps))
    assert got == [
        Hit(message="import deepspeed: OSError: libcudart missing; the script catches it and runs without",
            evidence=evidence(ps[9]), location=line(10)),
        Hit(message="from xformers import ops: xformers has no 'ops' (ImportError); the script catches it and runs "
                    "without", evidence=evidence(ps[11]), location=line(11)),
    ]


def test_a_module_not_found_without_the_missing_name_names_the_module():
    p = probe("a.b", "module-not-found", exc_type="ModuleNotFoundError")
    assert [h.message for h in run(IMPORT_FAIL_RULE, env(imports_requested=True, probes=(p,)))] == [
        "import a.b: ModuleNotFoundError, no module named 'a.b'"]
    p = probe("..pkg", "module-not-found", missing_module=".pkg")
    assert [h.message for h in run(IMPORT_FAIL_RULE, env(imports_requested=True, probes=(p,)))] == [
        "import ..pkg: ModuleNotFoundError, no module named '.pkg' (needed by ..pkg)"]


# --- TP-ENV-IMPORT-CRASH / EXIT / TIMEOUT -----------------------------------------------------------

def test_import_crash_every_crash_whole_with_and_without_last_output():
    a = probe("torch", "crash", at=3, signal="SIGSEGV", detail="Fatal Python error: Segmentation fault")
    b = probe("cv2", "crash", "function", at=9, signal="SIGABRT", names=("imread",))
    got = run(IMPORT_CRASH_RULE, env(imports_requested=True, probes=(probe("x", "ok"), a, probe("y", "exit"), b)))
    assert got == [
        Hit(message="import torch: the interpreter died by SIGSEGV, no Python exception; last output: Fatal Python "
                    "error: Segmentation fault", evidence=evidence(a, signal="SIGSEGV"), location=line(3)),
        Hit(message="from cv2 import imread: the interpreter died by SIGABRT, no Python exception",
            evidence=evidence(b, signal="SIGABRT"), location=line(9)),
    ]


def test_import_exit_by_sys_exit_and_by_os_exit_whole():
    a = probe("quitter", "exit", at=2, exc_type="SystemExit", detail="sys.exit(3)", exit_code=3)
    b = probe("hard", "exit", at=4, exit_code=0, detail="ignored")
    got = run(IMPORT_EXIT_RULE, env(imports_requested=True, probes=(a, probe("z", "crash"), b)))
    assert got == [
        Hit(message="import quitter: the module ends the interpreter on import (sys.exit(3))",
            evidence=evidence(a, exit_code=3), location=line(2)),
        Hit(message="import hard: the module ends the interpreter on import (os._exit(0) or a native exit)",
            evidence=evidence(b, exit_code=0), location=line(4)),
    ]


def test_import_timeout_every_hang_whole_with_the_facts_timeout():
    a = probe("torch", "timeout", at=1)
    b = probe("mod", "timeout", "entrypoint", at=0)
    got = run(IMPORT_TIMEOUT_RULE, env(imports_requested=True, timeout_s=7.5, probes=(a, probe("q", "exit"), b)))
    assert got == [
        Hit(message="import torch: no result after 7.5s; the import was killed", evidence=evidence(a, timeout_s=7.5),
            location=line(1)),
        Hit(message="running the entrypoint mod: no result after 7.5s; the import was killed",
            evidence=evidence(b, timeout_s=7.5), location=line(0)),
    ]
    assert IMPORT_TIMEOUT_RULE.limits().timeout_s == 120.0


# --- the interpreter, the working directory, the entrypoint --------------------------------------

def test_python_unusable_whole_and_quiet():
    assert run(PYTHON_RULE, env(python="/opt/py", python_error="/opt/py: not executable")) == [
        Hit(message="/opt/py: not executable", evidence={"python": "/opt/py"}, location=FILE)]
    assert run(PYTHON_RULE, env()) == []


def test_cwd_missing_whole_and_quiet():
    assert run(CWD_RULE, env(cwd="/nope", cwd_missing=True)) == [
        Hit(message="working directory /nope does not exist; imports not checked", evidence={"cwd": "/nope"},
            location=FILE)]
    assert run(CWD_RULE, env(cwd="/nope")) == []


def test_entrypoint_unreadable_whole_and_quiet():
    assert run(ENTRY_RULE, env(entry_error="train.py: no such file")) == [
        Hit(message="train.py: no such file", evidence={}, location=FILE)]
    assert run(ENTRY_RULE, env()) == []


# --- memory ------------------------------------------------------------------------------------------

def test_mem_info_with_and_without_a_requirement():
    assert run(MEM_INFO_RULE, env(memory_gb=(62.456, 31.234))) == [
        Hit(message="31.2 GB of 62.5 GB RAM available; pass --required-gb to judge it",
            evidence={"available_gb": 31.23, "total_gb": 62.46, "required_gb": None}, location=FILE)]
    assert run(MEM_INFO_RULE, env(memory_gb=(64.0, 30.0), required_gb=12.5)) == [
        Hit(message="30.0 GB of 64.0 GB RAM available; 12.5 GB required",
            evidence={"available_gb": 30.0, "total_gb": 64.0, "required_gb": 12.5}, location=FILE)]
    assert skip(MEM_INFO_RULE, env()) == "system memory could not be measured on this platform"


def test_mem_short_on_both_sides_of_the_requirement():
    assert skip(MEM_SHORT_RULE, env(memory_gb=(64.0, 8.0))) == "no --required-gb given"
    assert skip(MEM_SHORT_RULE, env(required_gb=8.0)) == "system memory could not be measured on this platform"
    assert run(MEM_SHORT_RULE, env(memory_gb=(64.0, 7.996), required_gb=8.0)) == [
        Hit(message="8.0 GB RAM available, 8 GB required (64.0 GB total)",
            evidence={"available_gb": 8.0, "required_gb": 8.0, "total_gb": 64.0}, location=FILE)]
    assert run(MEM_SHORT_RULE, env(memory_gb=(64.0, 8.0), required_gb=8.0)) == []


def test_mem_tight_margin_on_both_sides_and_never_when_short():
    assert skip(MEM_TIGHT_RULE, env(memory_gb=(64.0, 8.0))) == "no --required-gb given"
    assert skip(MEM_TIGHT_RULE, env(required_gb=8.0)) == "system memory could not be measured on this platform"
    # margin 0 (exactly the need) is tight; margin 3.99 is tight; 4 is not; short (margin < 0) is not.
    assert run(MEM_TIGHT_RULE, env(memory_gb=(64.0, 8.0), required_gb=8.0)) == [
        Hit(message="8.0 GB RAM available, 8 GB required: margin 0.0 GB < 4 GB",
            evidence={"available_gb": 8.0, "required_gb": 8.0, "margin_gb": 0.0}, location=FILE)]
    assert run(MEM_TIGHT_RULE, env(memory_gb=(64.0, 11.994), required_gb=8.0)) == [
        Hit(message="12.0 GB RAM available, 8 GB required: margin 4.0 GB < 4 GB",
            evidence={"available_gb": 11.99, "required_gb": 8.0, "margin_gb": 3.99}, location=FILE)]
    assert run(MEM_TIGHT_RULE, env(memory_gb=(64.0, 12.0), required_gb=8.0)) == []
    assert run(MEM_TIGHT_RULE, env(memory_gb=(64.0, 7.9), required_gb=8.0)) == []
    lim = TightLimits(min_margin_gb=2.5)
    assert run(MEM_TIGHT_RULE, env(memory_gb=(64.0, 10.5), required_gb=8.0), lim) == []
    assert [h.message for h in run(MEM_TIGHT_RULE, env(memory_gb=(64.0, 10.4), required_gb=8.0), lim)] == [
        "10.4 GB RAM available, 8 GB required: margin 2.4 GB < 2.5 GB"]


def test_mem_unknown_only_when_asked_and_unmeasured():
    assert run(MEM_UNKNOWN_RULE, env(required_gb=16.5)) == [
        Hit(message="--required-gb 16.5 given but system memory cannot be measured here",
            evidence={"required_gb": 16.5}, location=FILE)]
    assert run(MEM_UNKNOWN_RULE, env()) == []
    assert run(MEM_UNKNOWN_RULE, env(required_gb=16.5, memory_gb=(1.0, 1.0))) == []


# --- disk --------------------------------------------------------------------------------------------

def test_disk_rules_say_why_they_did_not_run():
    for rule in (DISK_INFO_RULE, DISK_SHORT_RULE):
        assert skip(rule, env(disk_free_gb=5.0, checkpoint_gb=1.0)) == "no --output-dir given"
        assert skip(rule, env(output_dir="out", checkpoint_gb=1.0)) == (
            "free space could not be measured (TP-ENV-DISK-UNKNOWN)")
    assert skip(DISK_SHORT_RULE, env(output_dir="out", disk_free_gb=5.0)) == "no --checkpoint-gb given"


def test_disk_info_with_and_without_checkpoint_size():
    assert run(DISK_INFO_RULE, env(output_dir="out", disk_probe="/data", disk_free_gb=123.456)) == [
        Hit(message="123.5 GB free at /data; pass --checkpoint-gb to judge it",
            evidence={"free_gb": 123.46, "probe": "/data", "checkpoint_gb": None, "keep": 1}, location=FILE)]
    assert run(DISK_INFO_RULE, env(output_dir="out", disk_probe="/data", disk_free_gb=50.0, checkpoint_gb=2.5,
                                   keep=3)) == [
        Hit(message="50.0 GB free at /data; 7.5 GB needed (2.5 GB x 3 kept)",
            evidence={"free_gb": 50.0, "probe": "/data", "checkpoint_gb": 2.5, "keep": 3}, location=FILE)]
    # keep 0 keeps one checkpoint at least (the one being written).
    assert run(DISK_INFO_RULE, env(output_dir="out", disk_probe="/d", disk_free_gb=50.0, checkpoint_gb=2.5,
                                   keep=0))[0].message == "50.0 GB free at /d; 2.5 GB needed (2.5 GB x 1 kept)"


def test_disk_short_on_both_sides_of_the_need():
    assert run(DISK_SHORT_RULE, env(output_dir="out", disk_probe="/data", disk_free_gb=7.49, checkpoint_gb=2.5,
                                    keep=3)) == [
        Hit(message="7.5 GB free at /data, 7.5 GB needed (2.5 GB x 3 kept)",
            evidence={"free_gb": 7.49, "needed_gb": 7.5, "checkpoint_gb": 2.5, "keep": 3}, location=FILE)]
    assert run(DISK_SHORT_RULE, env(output_dir="out", disk_probe="/data", disk_free_gb=7.5, checkpoint_gb=2.5,
                                    keep=3)) == []
    assert run(DISK_SHORT_RULE, env(output_dir="out", disk_probe="/d", disk_free_gb=2.4, checkpoint_gb=2.5,
                                    keep=0)) == [
        Hit(message="2.4 GB free at /d, 2.5 GB needed (2.5 GB x 1 kept)",
            evidence={"free_gb": 2.4, "needed_gb": 2.5, "checkpoint_gb": 2.5, "keep": 0}, location=FILE)]
    assert run(DISK_SHORT_RULE, env(output_dir="out", disk_probe="/d", disk_free_gb=2.6, checkpoint_gb=2.5,
                                    keep=0)) == []


def test_disk_unknown_only_when_asked_and_unmeasured():
    assert run(DISK_UNKNOWN_RULE, env(output_dir="/out/run1")) == [
        Hit(message="free space at /out/run1 could not be measured", evidence={"output_dir": "/out/run1"},
            location=FILE)]
    assert run(DISK_UNKNOWN_RULE, env()) == []
    assert run(DISK_UNKNOWN_RULE, env(output_dir="/out/run1", disk_free_gb=0.0)) == []


# --- TP-ENV-PRECISION-UNSUPPORTED-GPU -------------------------------------------------------------

ASKS = (PrecisionAsk(key="bf16", config="TrainingArguments", location=line(5)),
        PrecisionAsk(key="tf32", config="SFTConfig", location=line(9)))


def test_gpu_precision_says_why_it_did_not_run():
    assert skip(GPU_PRECISION_RULE, env(gpus=(Gpu(name="T4", capability=7.5),))) == (
        "the script's configs ask for neither bf16 nor tf32")
    assert skip(GPU_PRECISION_RULE, env(precision=ASKS, gpu_note="nvidia-smi not found")) == (
        "no GPU measured: nvidia-smi not found; bf16/tf32 support not checked")
    assert skip(GPU_PRECISION_RULE, env(precision=ASKS)) == (
        "no GPU measured: nvidia-smi listed none; bf16/tf32 support not checked")


def test_gpu_precision_every_ask_whole_on_the_best_gpu_below_ampere():
    gpus = (Gpu(name="Tesla P100", capability=6.0), Gpu(name="Tesla T4", capability=7.5),
            Gpu(name="Tesla V100", capability=7.0))
    got = run(GPU_PRECISION_RULE, env(precision=ASKS, gpus=gpus))
    assert got == [
        Hit(message="TrainingArguments(bf16=True) on Tesla T4 (compute capability 7.5 < 8, before Ampere): "
                    "TrainingArguments raises ValueError before training starts",
            evidence={"key": "bf16", "gpu": "Tesla T4", "compute_capability": 7.5, "gpus": 3,
                      "config": "TrainingArguments"}, location=line(5)),
        Hit(message="SFTConfig(tf32=True) on Tesla T4 (compute capability 7.5 < 8, before Ampere): SFTConfig raises "
                    "ValueError before training starts",
            evidence={"key": "tf32", "gpu": "Tesla T4", "compute_capability": 7.5, "gpus": 3, "config": "SFTConfig"},
            location=line(9)),
    ]


def test_gpu_precision_ampere_exactly_or_any_ampere_gpu_is_quiet():
    assert run(GPU_PRECISION_RULE, env(precision=ASKS, gpus=(Gpu(name="A100", capability=8.0),))) == []
    assert run(GPU_PRECISION_RULE, env(precision=ASKS, gpus=(Gpu(name="T4", capability=7.5),
                                                             Gpu(name="A10", capability=8.6)))) == []
    assert len(run(GPU_PRECISION_RULE, env(precision=ASKS, gpus=(Gpu(name="x", capability=7.99),)))) == 2


def test_a_relative_import_missing_itself_is_not_needed_by_another():
    # `.Xlib` missing "Xlib": the module itself (its leading dots aside), whatever letters follow the dots.
    p = probe(".Xlib", "module-not-found", missing_module="Xlib")
    assert [h.message for h in run(IMPORT_FAIL_RULE, env(imports_requested=True, probes=(p,)))] == [
        "import .Xlib: ModuleNotFoundError, no module named 'Xlib'"]


def test_mem_short_rounds_its_numbers_to_two_places():
    assert run(MEM_SHORT_RULE, env(memory_gb=(62.456, 7.123), required_gb=8.0)) == [
        Hit(message="7.1 GB RAM available, 8 GB required (62.5 GB total)",
            evidence={"available_gb": 7.12, "required_gb": 8.0, "total_gb": 62.46}, location=FILE)]


def test_disk_short_rounds_the_free_space_to_two_places():
    assert run(DISK_SHORT_RULE, env(output_dir="out", disk_probe="/d", disk_free_gb=2.345, checkpoint_gb=2.5)) == [
        Hit(message="2.3 GB free at /d, 2.5 GB needed (2.5 GB x 1 kept)",
            evidence={"free_gb": 2.35, "needed_gb": 2.5, "checkpoint_gb": 2.5, "keep": 1}, location=FILE)]
