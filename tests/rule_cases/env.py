"""Cases for the env family: EnvFacts as the env command measures them (an import probe's
outcome per import line, memory, disk, the GPUs nvidia-smi lists), built here field by
field so each outcome is met exactly once."""

from __future__ import annotations

import dataclasses
from typing import Any

from trainproof_lsp.core.model import Location, Span
from trainproof_lsp.readers.envcheck import EnvFacts, Gpu, ImportProbe, PrecisionAsk
from trainproof_lsp.rules import Context

from . import Expect, FamilyCases, Fires, Quiet, RuleCases, straddle

SCRIPT = "train.py"


def at(line: int) -> Location:
    return Location(path=SCRIPT, span=Span(line, 0, line, 20))


def probe(module: str, outcome: str, *, line: int = 0, context: str = "module", **kw: Any) -> ImportProbe:
    return ImportProbe(module=module, names=kw.pop("names", ()), location=at(line), context=context, outcome=outcome, **kw)


OK = probe("json", "ok")


def imports(*probes: ImportProbe, **kw: Any) -> EnvFacts:
    return EnvFacts(path=SCRIPT, python="python3", imports_requested=True, probes=(OK, *probes), timeout_s=120.0, **kw)


def room(**kw: Any) -> EnvFacts:
    """No imports asked for: memory and disk only."""
    return EnvFacts(path=SCRIPT, python="python3", **kw)


MEM = (64.0, 20.0)  # total, available GB


def gpus(*capabilities: float, asks: tuple[str, ...] = ("bf16",)) -> EnvFacts:
    return room(gpus=tuple(Gpu(name=f"GPU-{c:g}", capability=c) for c in capabilities),
                precision=tuple(PrecisionAsk(key=k, config="TrainingArguments", location=at(7)) for k in asks))


def context(_: EnvFacts) -> Context:
    return Context()


CASES: dict[str, RuleCases] = {
    "TP-ENV-IMPORT-FAIL": RuleCases(
        fires=Fires(subject=lambda: imports(
            probe("transformers", "module-not-found", line=2, missing_module="tokenizers", exc_type="ModuleNotFoundError"),
            probe("torch.nn", "missing-name", line=3, names=("Flash",), missing_names=("Flash",), exc_type="ImportError"),
            probe("mylib", "exception", line=4, exc_type="RuntimeError", detail="CUDA driver too old", where="mylib.py:9")),
            hits=(Expect(message="import transformers: ModuleNotFoundError, no module named 'tokenizers' (needed by transformers)",
                           evidence={'module': 'transformers', 'names': '', 'outcome': 'module-not-found', 'exception': 'ModuleNotFoundError', 'missing_module': 'tokenizers', 'missing_names': '', 'raised_at': '', 'context': 'module'}, line=2),
                     Expect(message="from torch.nn import Flash: torch.nn has no 'Flash' (ImportError)",
                           evidence={'module': 'torch.nn', 'names': 'Flash', 'outcome': 'missing-name', 'exception': 'ImportError', 'missing_module': '', 'missing_names': 'Flash', 'raised_at': '', 'context': 'module'}, line=3),
                     Expect(message='import mylib: RuntimeError: CUDA driver too old (raised at mylib.py:9)',
                           evidence={'module': 'mylib', 'names': '', 'outcome': 'exception', 'exception': 'RuntimeError', 'missing_module': '', 'missing_names': '', 'raised_at': 'mylib.py:9', 'context': 'module'}, line=4),),
                    family=('TP-ENV-IMPORT-FAIL', 'TP-ENV-IMPORT-FAIL', 'TP-ENV-IMPORT-FAIL')),
        quiet=(Quiet(subject=lambda: imports(probe("yaml", "module-not-found", line=5, context="optional"))),
               Quiet(subject=lambda: room(), skip="no --entrypoint or --module")),
    ),
    "TP-ENV-IMPORT-LAZY-FAIL": RuleCases(
        fires=Fires(subject=lambda: imports(probe("wandb", "module-not-found", line=12, context="function")), hits=(Expect(message="import wandb: ModuleNotFoundError, no module named 'wandb'; it fails when its function first runs",
                           evidence={'module': 'wandb', 'names': '', 'outcome': 'module-not-found', 'exception': '', 'missing_module': '', 'missing_names': '', 'raised_at': '', 'context': 'function'}, line=12),),
                    family=('TP-ENV-IMPORT-LAZY-FAIL',)),
        quiet=Quiet(subject=lambda: imports(probe("wandb", "ok", line=12, context="function"))),
    ),
    "TP-ENV-IMPORT-OPTIONAL-MISSING": RuleCases(
        fires=Fires(subject=lambda: imports(probe("apex", "module-not-found", line=3, context="optional")), hits=(Expect(message="import apex: ModuleNotFoundError, no module named 'apex'; the script catches it and runs without",
                           evidence={'module': 'apex', 'names': '', 'outcome': 'module-not-found', 'exception': '', 'missing_module': '', 'missing_names': '', 'raised_at': '', 'context': 'optional'}, line=3),),
                    family=('TP-ENV-IMPORT-OPTIONAL-MISSING',)),
        quiet=Quiet(subject=lambda: imports(probe("apex", "ok", line=3, context="optional"))),
    ),
    "TP-ENV-IMPORT-CRASH": RuleCases(
        fires=Fires(subject=lambda: imports(probe("native_ext", "crash", line=2, signal="SIGSEGV", detail="Segmentation fault")),
                    hits=(Expect(message='import native_ext: the interpreter died by SIGSEGV, no Python exception; last output: Segmentation fault',
                           evidence={'module': 'native_ext', 'names': '', 'outcome': 'crash', 'exception': '', 'missing_module': '', 'missing_names': '', 'raised_at': '', 'context': 'module', 'signal': 'SIGSEGV'}, line=2),),
                    family=('TP-ENV-IMPORT-CRASH',)),
        quiet=Quiet(subject=lambda: imports(probe("native_ext", "ok", line=2))),
    ),
    "TP-ENV-IMPORT-EXIT": RuleCases(
        fires=Fires(subject=lambda: imports(probe("cli_tool", "exit", line=2, exc_type="SystemExit", detail="sys.exit(2)", exit_code=2),
                                            probe("other", "exit", line=3, exit_code=1)), hits=(Expect(message='import cli_tool: the module ends the interpreter on import (sys.exit(2))',
                           evidence={'module': 'cli_tool', 'names': '', 'outcome': 'exit', 'exception': 'SystemExit', 'missing_module': '', 'missing_names': '', 'raised_at': '', 'context': 'module', 'exit_code': 2}, line=2),
                     Expect(message='import other: the module ends the interpreter on import (os._exit(1) or a native exit)',
                           evidence={'module': 'other', 'names': '', 'outcome': 'exit', 'exception': '', 'missing_module': '', 'missing_names': '', 'raised_at': '', 'context': 'module', 'exit_code': 1}, line=3),),
                    family=('TP-ENV-IMPORT-EXIT', 'TP-ENV-IMPORT-EXIT')),
        quiet=Quiet(subject=lambda: imports(probe("cli_tool", "ok", line=2))),
    ),
    "TP-ENV-IMPORT-TIMEOUT": RuleCases(
        fires=Fires(subject=lambda: imports(probe("slow_import", "timeout", line=2)), hits=(Expect(message='import slow_import: no result after 120s; the import was killed',
                           evidence={'module': 'slow_import', 'names': '', 'outcome': 'timeout', 'exception': '', 'missing_module': '', 'missing_names': '', 'raised_at': '', 'context': 'module', 'timeout_s': 120.0}, line=2),),
                    family=('TP-ENV-IMPORT-TIMEOUT',)),
        quiet=(Quiet(subject=lambda: imports(probe("slow_import", "ok", line=2))),
               Quiet(subject=lambda: dataclasses.replace(imports(), python_error="python9: cannot run"),
                     skip="the interpreter could not be run")),
    ),
    "TP-ENV-PYTHON-UNUSABLE": RuleCases(
        fires=Fires(subject=lambda: dataclasses.replace(imports(), python_error="python9: cannot run (No such file or directory)"),
                    hits=(Expect(message='python9: cannot run (No such file or directory)',
                           evidence={'python': 'python3'}, line=None),),
                    family=('TP-ENV-PYTHON-UNUSABLE',)),
        quiet=Quiet(subject=lambda: imports()),
    ),
    "TP-ENV-CWD-MISSING": RuleCases(
        fires=Fires(subject=lambda: dataclasses.replace(imports(), cwd="/no/such/dir", cwd_missing=True), hits=(Expect(message='working directory /no/such/dir does not exist; imports not checked',
                           evidence={'cwd': '/no/such/dir'}, line=None),),
                    family=('TP-ENV-CWD-MISSING',)),
        quiet=Quiet(subject=lambda: dataclasses.replace(imports(), cwd="/tmp")),
    ),
    "TP-ENV-ENTRYPOINT-UNREADABLE": RuleCases(
        fires=Fires(subject=lambda: dataclasses.replace(imports(), entry_error="train.py:3:1: not valid Python: invalid syntax"),
                    hits=(Expect(message='train.py:3:1: not valid Python: invalid syntax',
                           evidence={}, line=None),),
                    family=('TP-ENV-ENTRYPOINT-UNREADABLE',)),
        quiet=Quiet(subject=lambda: imports()),
    ),
    "TP-ENV-MEM-INFO": RuleCases(
        fires=Fires(subject=lambda: room(memory_gb=MEM, required_gb=12.0), hits=(Expect(message='20.0 GB of 64.0 GB RAM available; 12 GB required',
                           evidence={'available_gb': 20.0, 'total_gb': 64.0, 'required_gb': 12.0}, line=None),),
                    family=('TP-ENV-MEM-INFO',)),
        quiet=Quiet(subject=lambda: room(), skip="could not be measured"),
    ),
    "TP-ENV-MEM-INSUFFICIENT": RuleCases(
        fires=Fires(subject=lambda: room(memory_gb=MEM, required_gb=24.0), hits=(Expect(message='20.0 GB RAM available, 24 GB required (64.0 GB total)',
                           evidence={'available_gb': 20.0, 'required_gb': 24.0, 'total_gb': 64.0}, line=None),),
                    family=('TP-ENV-MEM-INFO', 'TP-ENV-MEM-INSUFFICIENT')),
        quiet=(Quiet(subject=lambda: room(memory_gb=MEM, required_gb=20.0)), Quiet(subject=lambda: room(memory_gb=MEM),
                                                                                 skip="no --required-gb")),
    ),
    "TP-ENV-MEM-TIGHT": RuleCases(
        fires=Fires(subject=lambda: room(memory_gb=MEM, required_gb=18.0), hits=(Expect(message='20.0 GB RAM available, 18 GB required: margin 2.0 GB < 4 GB',
                           evidence={'available_gb': 20.0, 'required_gb': 18.0, 'margin_gb': 2.0}, line=None),),
                    family=('TP-ENV-MEM-INFO', 'TP-ENV-MEM-TIGHT')),
        quiet=(Quiet(subject=lambda: room(memory_gb=MEM, required_gb=8.0)), Quiet(subject=lambda: room(memory_gb=MEM, required_gb=24.0)),
               Quiet(subject=lambda: room(required_gb=8.0), skip="could not be measured")),
        straddles=(straddle("min_margin_gb", 4.0, lambda m: room(memory_gb=MEM, required_gb=20.0 - m), fire=3.9, quiet=4.1),),
    ),
    "TP-ENV-MEM-UNKNOWN": RuleCases(
        fires=Fires(subject=lambda: room(required_gb=12.0), hits=(Expect(message='--required-gb 12 given but system memory cannot be measured here',
                           evidence={'required_gb': 12.0}, line=None),),
                    family=('TP-ENV-MEM-UNKNOWN',)),
        quiet=(Quiet(subject=lambda: room(memory_gb=MEM, required_gb=12.0)), Quiet(subject=lambda: room())),
    ),
    "TP-ENV-DISK-INFO": RuleCases(
        fires=Fires(subject=lambda: room(output_dir="out", disk_probe="/data", disk_free_gb=50.0, checkpoint_gb=5.0, keep=3),
                    hits=(Expect(message='50.0 GB free at /data; 15 GB needed (5 GB x 3 kept)',
                           evidence={'free_gb': 50.0, 'probe': '/data', 'checkpoint_gb': 5.0, 'keep': 3}, line=None),),
                    family=('TP-ENV-DISK-INFO',)),
        quiet=(Quiet(subject=lambda: room(), skip="no --output-dir"),
               Quiet(subject=lambda: room(output_dir="out"), skip="free space could not be measured")),
    ),
    "TP-ENV-DISK-INSUFFICIENT": RuleCases(
        fires=Fires(subject=lambda: room(output_dir="out", disk_probe="/data", disk_free_gb=12.0, checkpoint_gb=5.0, keep=3),
                    hits=(Expect(message='12.0 GB free at /data, 15 GB needed (5 GB x 3 kept)',
                           evidence={'free_gb': 12.0, 'needed_gb': 15.0, 'checkpoint_gb': 5.0, 'keep': 3}, line=None),),
                    family=('TP-ENV-DISK-INFO', 'TP-ENV-DISK-INSUFFICIENT')),
        quiet=(Quiet(subject=lambda: room(output_dir="out", disk_probe="/data", disk_free_gb=15.0, checkpoint_gb=5.0, keep=3)),
               Quiet(subject=lambda: room(output_dir="out", disk_probe="/data", disk_free_gb=15.0), skip="no --checkpoint-gb")),
    ),
    "TP-ENV-DISK-UNKNOWN": RuleCases(
        fires=Fires(subject=lambda: room(output_dir="out"), hits=(Expect(message='free space at out could not be measured',
                           evidence={'output_dir': 'out'}, line=None),),
                    family=('TP-ENV-DISK-UNKNOWN',)),
        quiet=(Quiet(subject=lambda: room(output_dir="out", disk_probe="/data", disk_free_gb=15.0)), Quiet(subject=lambda: room())),
    ),
    "TP-ENV-PRECISION-UNSUPPORTED-GPU": RuleCases(
        fires=Fires(subject=lambda: gpus(7.5, 7.0, asks=("bf16", "tf32")), hits=(Expect(message='TrainingArguments(bf16=True) on GPU-7.5 (compute capability 7.5 < 8, before Ampere): TrainingArguments raises ValueError before training starts',
                           evidence={'key': 'bf16', 'gpu': 'GPU-7.5', 'compute_capability': 7.5, 'gpus': 2, 'config': 'TrainingArguments'}, line=7),
                     Expect(message='TrainingArguments(tf32=True) on GPU-7.5 (compute capability 7.5 < 8, before Ampere): TrainingArguments raises ValueError before training starts',
                           evidence={'key': 'tf32', 'gpu': 'GPU-7.5', 'compute_capability': 7.5, 'gpus': 2, 'config': 'TrainingArguments'}, line=7),),
                    family=('TP-ENV-PRECISION-UNSUPPORTED-GPU', 'TP-ENV-PRECISION-UNSUPPORTED-GPU')),
        quiet=(Quiet(subject=lambda: gpus(7.5, 8.9)), Quiet(subject=lambda: gpus(7.5, asks=()), skip="neither bf16 nor tf32"),
               Quiet(subject=lambda: gpus(), skip="no GPU measured")),
    ),
}

FAMILY = FamilyCases(cases=CASES, context=context)
