"""Cases for the env family: EnvFacts as the env command measures them (an import probe's
outcome per import line, memory, disk, the GPUs nvidia-smi lists), built here field by
field so each outcome is met exactly once."""

from __future__ import annotations

import dataclasses
from typing import Any

from trainproof_lsp.core.model import Location, Span
from trainproof_lsp.readers.envcheck import ApiProbe, EnvFacts, Gpu, ImportProbe, PrecisionAsk, Signature
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


# TrainingArguments as an installed transformers would show it to the signature probe: its
# keyword parameters, and the string values its Enum-annotated fields take.
TRAINING_ARGUMENTS = Signature(
    outcome="ok", library="transformers", version="5.25.0", qualname="transformers.training_args.TrainingArguments",
    params=("output_dir", "eval_strategy", "save_strategy", "learning_rate", "processing_class"),
    choices=(("eval_strategy", ("no", "steps", "epoch"), False), ("save_strategy", ("no", "steps", "epoch", "best"), False)))


def api(keywords: str, signature: Signature = TRAINING_ARGUMENTS) -> EnvFacts:
    """The env facts of a script calling TrainingArguments(output_dir="out", <keywords>),
    read with ast, each library call beside the installed class's signature."""
    from .script import script
    facts = script(f"""
        from transformers import TrainingArguments

        args = TrainingArguments(output_dir="out", {keywords})
        """)
    return EnvFacts(path=facts.path, python="python3", imports_requested=True,
                    api=tuple(ApiProbe(call=c, path=facts.path, signature=signature) for c in facts.api_calls))


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

CASES.update({
    "TP-SCRIPT-API-UNKNOWN-KEYWORD": RuleCases(
        fires=Fires(subject=lambda: api('evaluation_strategy="steps", learnin_rate=2e-5, tokenizer=None'), hits=(Expect(message="TrainingArguments(evaluation_strategy=...): transformers 5.25.0 TrainingArguments takes no keyword 'evaluation_strategy' (renamed eval_strategy); the call raises TypeError before training starts",
                           evidence={'keyword': 'evaluation_strategy', 'class': 'transformers.training_args.TrainingArguments', 'library': 'transformers', 'version': '5.25.0', 'replacement': 'eval_strategy'}, line=2),
                     Expect(message="TrainingArguments(learnin_rate=...): transformers 5.25.0 TrainingArguments takes no keyword 'learnin_rate' (did you mean learning_rate?); the call raises TypeError before training starts",
                           evidence={'keyword': 'learnin_rate', 'class': 'transformers.training_args.TrainingArguments', 'library': 'transformers', 'version': '5.25.0', 'replacement': 'learning_rate'}, line=2),
                     Expect(message="TrainingArguments(tokenizer=...): transformers 5.25.0 TrainingArguments takes no keyword 'tokenizer' (renamed processing_class); the call raises TypeError before training starts",
                           evidence={'keyword': 'tokenizer', 'class': 'transformers.training_args.TrainingArguments', 'library': 'transformers', 'version': '5.25.0', 'replacement': 'processing_class'}, line=2),),
                    family=('TP-SCRIPT-API-UNKNOWN-KEYWORD', 'TP-SCRIPT-API-UNKNOWN-KEYWORD', 'TP-SCRIPT-API-UNKNOWN-KEYWORD')),
        quiet=(Quiet(subject=lambda: api('eval_strategy="steps", learning_rate=2e-5')),
               Quiet(subject=lambda: api("bogus=1", dataclasses.replace(TRAINING_ARGUMENTS, var_keyword=True))),
               Quiet(subject=lambda: room(), skip="no --entrypoint or --module")),
    ),
    "TP-SCRIPT-API-BAD-VALUE": RuleCases(
        fires=Fires(subject=lambda: api('eval_strategy="step", save_strategy="epochs"'), hits=(Expect(message='TrainingArguments(eval_strategy="step"): transformers 5.25.0 TrainingArguments accepts \'no\', \'steps\', \'epoch\' for eval_strategy (closest: \'steps\'); the call raises ValueError before training starts',
                           evidence={'keyword': 'eval_strategy', 'value': 'step', 'class': 'transformers.training_args.TrainingArguments', 'library': 'transformers', 'version': '5.25.0', 'closest': 'steps'}, line=2),
                     Expect(message='TrainingArguments(save_strategy="epochs"): transformers 5.25.0 TrainingArguments accepts \'no\', \'steps\', \'epoch\', \'best\' for save_strategy (closest: \'epoch\'); the call raises ValueError before training starts',
                           evidence={'keyword': 'save_strategy', 'value': 'epochs', 'class': 'transformers.training_args.TrainingArguments', 'library': 'transformers', 'version': '5.25.0', 'closest': 'epoch'}, line=2),),
                    family=('TP-SCRIPT-API-BAD-VALUE', 'TP-SCRIPT-API-BAD-VALUE')),
        quiet=Quiet(subject=lambda: api('eval_strategy="steps", save_strategy="epoch"')),
    ),
})


# axolotl's config schema as the probe child reads it from an installed axolotl's
# AxolotlInputConfig.model_fields: a few of its field names, and an alias (model_type).
AXOLOTL_SCHEMA = Signature(
    outcome="ok", library="axolotl", version="0.19.0", qualname="axolotl.utils.schemas.config.AxolotlInputConfig",
    params=("base_model", "type_of_model", "model_type", "datasets", "sequence_len", "adapter", "lora_r",
            "lora_alpha", "micro_batch_size", "learning_rate"))


def axolotl(text: str) -> EnvFacts:
    """The env facts of `env --entrypoint config.yml` on an axolotl config, its top-level
    keys bound to the installed schema's fields."""
    from pathlib import Path

    from trainproof_lsp.readers.script import ApiCall
    from trainproof_lsp.readers.yaml_api import AXOLOTL_CLASS, AXOLOTL_MODULE, read_yaml_config

    config = read_yaml_config(Path("config.yml"), data=text.encode("utf-8"))
    call = ApiCall(written="config.yml", module=AXOLOTL_MODULE, attr=AXOLOTL_CLASS, span=Span(0, 0, 0, 0),
                   keywords=config.keys)
    return EnvFacts(path="config.yml", python="python3", imports_requested=True,
                    api=(ApiProbe(call=call, path="config.yml", signature=AXOLOTL_SCHEMA),))


AXOLOTL_GOOD = ("base_model: NousResearch/Llama-2-7b-hf\nmodel_type: LlamaForCausalLM\nadapter: lora\nlora_r: 8\n"
                "lora_alpha: 16\ndatasets:\n  - path: mhenrichsen/alpaca_2k_test\n    type: alpaca\n")

CASES.update({
    "TP-CONFIG-KEY-IGNORED": RuleCases(
        fires=Fires(subject=lambda: axolotl(AXOLOTL_GOOD.replace("lora_alpha: 16", "lora_alhpa: 16") + "warmup: 10\n"),
                    hits=(Expect(message="config.yml: 'lora_alhpa' is no key of axolotl 0.19.0's config schema (did you mean lora_alpha?); axolotl ignores it, so the setting never takes effect",
                                 evidence={'key': 'lora_alhpa', 'schema': 'axolotl.utils.schemas.config.AxolotlInputConfig', 'library': 'axolotl', 'version': '0.19.0', 'closest': 'lora_alpha'}, line=4),
                          Expect(message="config.yml: 'warmup' is no key of axolotl 0.19.0's config schema; axolotl ignores it, so the setting never takes effect",
                                 evidence={'key': 'warmup', 'schema': 'axolotl.utils.schemas.config.AxolotlInputConfig', 'library': 'axolotl', 'version': '0.19.0', 'closest': ''}, line=8),),
                    family=('TP-CONFIG-KEY-IGNORED', 'TP-CONFIG-KEY-IGNORED')),
        quiet=(Quiet(subject=lambda: axolotl(AXOLOTL_GOOD)),
               Quiet(subject=lambda: api("bogus=1"), skip="no axolotl config given"),
               Quiet(subject=lambda: room(), skip="no --entrypoint or --module")),
    ),
})

FAMILY = FamilyCases(cases=CASES, context=context)
