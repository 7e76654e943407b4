"""The training config against the run's length: max_steps, or epochs x the rows of the
dataset the script names on disk / (batch x accumulation x processes), with values from the
call, HfArgumentParser dataclass defaults and a launch script's flags. The planned length
is proved against the real HF Trainer (a model of a few parameters, a few dozen steps)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from trainproof_lsp.core.config import Config
from trainproof_lsp.core.model import Level
from trainproof_lsp.judge.engine import judge_file
from trainproof_lsp.readers.script import read_script
from trainproof_lsp.rules._run_length import plan

BEST = "TP-SCRIPT-BEST-NEVER-SAVED"
SAVE = "TP-SCRIPT-NO-CHECKPOINT-SAVED"
EVAL = "TP-SCRIPT-EVAL-NEVER-RUN"
WARMUP = "TP-SCRIPT-WARMUP-EXCEEDS-RUN"
LOGGING = "TP-SCRIPT-LOGGING-EXCEEDS-RUN"


def dataset(folder: Path, rows: int, name: str = "data/train.jsonl") -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"text": f"row {i}"}) + "\n" for i in range(rows)), encoding="utf-8")
    return path


def script(folder: Path, keywords: str, data: str = 'load_dataset("json", data_files="data/train.jsonl")') -> Path:
    path = folder / "train.py"
    path.write_text("from datasets import load_dataset\n"
                    "from transformers import Trainer, TrainingArguments\n"
                    f"train = {data}\n"
                    f"args = TrainingArguments(output_dir=\"out\", {keywords})\n", encoding="utf-8")
    return path


def hits(path: Path, rule: str) -> list:
    return [f for f in judge_file(path, Config()).findings if f.id == rule]


def test_best_model_never_saved_with_the_default_save_steps_in_a_150_step_run(tmp_path):
    dataset(tmp_path, 400)
    keywords = 'eval_strategy="steps", eval_steps=20, load_best_model_at_end=True'
    path = script(tmp_path, keywords)
    (hit,) = hits(path, BEST)
    assert hit.level is Level.WARN
    assert hit.evidence == {"save_steps": 500.0, "planned_steps": 150, "exact": False, "config": "TrainingArguments"}
    assert hit.message == (
        "load_best_model_at_end=True but save_steps unset (default 500) and the run is at most 150 steps (3 epoch(s) "
        "x 50 steps: 400 rows of data/train.jsonl / batch 8 / accumulation 1, 1 process, assumed): no checkpoint "
        "is saved before the last step, so the best model by eval is never kept (load_best_model_at_end can only "
        "load the final state)")
    line = path.read_text().splitlines()[3]
    assert (hit.location.span.start_line, hit.location.span.start_char) == (3, line.index("True"))
    assert hit.related[0].location.span.start_line == 2  # the dataset named
    # the fix: save_steps at eval_steps, added after the last keyword
    (edit,) = hit.fix.edits
    assert edit.new_text == ", save_steps=20" and (edit.span.start_line, edit.span.start_char) == (3, len(line) - 1)
    assert not hits(path, SAVE)  # one finding, not two


@pytest.mark.parametrize("keywords,rule,fires", [
    ("", SAVE, True),  # 150 steps, default save_steps 500
    ("save_steps=100", SAVE, False),
    ("num_train_epochs=10", SAVE, False),  # 500 steps: saved once, at 500
    ("num_train_epochs=10, gradient_accumulation_steps=2", SAVE, True),  # 250 steps
    ('save_strategy="epoch"', SAVE, False),
    ("max_steps=499", SAVE, True),
    ("max_steps=500", SAVE, False),
    ('eval_strategy="steps", eval_steps=200', EVAL, True),
    ('eval_strategy="steps", eval_steps=150', EVAL, False),
    ('eval_strategy="steps"', EVAL, True),  # falls back to logging_steps 500
    ('eval_strategy="steps", logging_steps=10', EVAL, False),
    ("warmup_steps=150", WARMUP, True),
    ("warmup_steps=149", WARMUP, False),
    ("warmup_steps=0.5", WARMUP, False),  # a fraction of the run in transformers 5
    ("", LOGGING, True),  # default logging_steps 500
    ("logging_steps=150", LOGGING, False),
])
def test_each_interval_against_the_runs_length(tmp_path, keywords, rule, fires):
    dataset(tmp_path, 400)
    found = hits(script(tmp_path, keywords), rule)
    assert len(found) == (1 if fires else 0), [f.message for f in found]


def test_without_the_dataset_on_disk_the_check_says_why(tmp_path):
    path = script(tmp_path, "load_best_model_at_end=True")
    report = judge_file(path, Config())
    (check,) = [c for c in report.checks if c.group == BEST]
    assert not check.ran
    assert check.reason == "the run's length is unknown: the training dataset data/train.jsonl was not counted (not on disk)"


def test_hf_argument_parser_defaults_and_launch_flags_are_read(tmp_path):
    dataset(tmp_path, 400)
    (tmp_path / "train.py").write_text(
        "from dataclasses import dataclass, field\n"
        "from transformers import HfArgumentParser, TrainingArguments\n"
        "@dataclass\n"
        "class DataArguments:\n"
        '    train_file: str = field(default="data/train.jsonl")\n'
        "@dataclass\n"
        "class MyArguments(TrainingArguments):\n"
        "    load_best_model_at_end: bool = field(default=True)\n"
        "    save_steps: int = 500\n"
        "parser = HfArgumentParser((DataArguments, MyArguments))\n", encoding="utf-8")
    (tmp_path / "run.sh").write_text(
        "#!/bin/sh\nBATCH=4\n"
        "torchrun --nproc_per_node 2 train.py \\\n"
        "    --eval_strategy steps --eval_steps 25 \\\n"
        "    --per_device_train_batch_size $BATCH --num_train_epochs=2\n", encoding="utf-8")
    facts = read_script(tmp_path / "train.py")
    (config,) = facts.configs
    assert config.origin == "parser" and config.kwargs["save_steps"].value == 500
    assert config.kwargs["per_device_train_batch_size"].value == 4
    assert config.kwargs["eval_steps"].path == str(tmp_path / "run.sh")
    p = plan(facts, config)
    assert not isinstance(p, str) and p.steps == 100  # 2 epochs x 400 rows / 2 processes / batch 4
    (hit,) = hits(tmp_path / "train.py", BEST)
    assert hit.location.span.start_line == 7 and hit.evidence["planned_steps"] == 100
    assert hit.fix is None  # the value lives in a dataclass default: no mechanical edit


PROVE = """\
import json, sys, warnings
warnings.simplefilter("ignore")
import torch
from torch import nn
from transformers import Trainer, TrainingArguments

class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Linear(2, 1)
    def forward(self, x=None, labels=None):
        out = self.w(x).squeeze(-1)
        return {"loss": ((out - labels) ** 2).mean(), "logits": out}

rows = [{"x": [float(i % 3), 1.0], "labels": float(i % 2)} for i in range(int(sys.argv[2]))]
class Data(torch.utils.data.Dataset):
    def __len__(self): return len(rows)
    def __getitem__(self, i): return {"x": torch.tensor(rows[i]["x"]), "labels": torch.tensor(rows[i]["labels"])}

out = []
for keywords in json.loads(sys.argv[3]):
    args = eval("TrainingArguments(output_dir=%r, report_to=[], use_cpu=True, disable_tqdm=True, " % sys.argv[1]
                + keywords + ")")
    t = Trainer(model=Tiny(), args=args, train_dataset=Data(), eval_dataset=Data())
    t.train()
    import os, shutil
    out.append({"max_steps": t.state.max_steps, "best": os.path.basename(t.state.best_model_checkpoint or ""),
                "evals": [e["step"] for e in t.state.log_history if "eval_loss" in e],
                "saved": sorted((d for d in os.listdir(sys.argv[1]) if d.startswith("checkpoint-")),
                                key=lambda d: int(d.split("-")[1]))})
    shutil.rmtree(sys.argv[1], ignore_errors=True)
print(json.dumps(out))
"""


def test_the_planned_length_is_the_real_trainers_and_its_best_model_is_never_kept(tmp_path):
    """The real Trainer over 37 rows: its max_steps is the planned length; with the default
    save_steps it evaluates every 4 steps but saves only at the last step, so the "best"
    model it loads is the last; the fix (save_steps=eval_steps) saves at every evaluation."""
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    rows = 37
    dataset(tmp_path, rows)
    configs = [
        'eval_strategy="steps", eval_steps=4, load_best_model_at_end=True, per_device_train_batch_size=4',
        'eval_strategy="steps", eval_steps=4, load_best_model_at_end=True, per_device_train_batch_size=4, '
        'save_steps=4',
        "per_device_train_batch_size=3, gradient_accumulation_steps=2, num_train_epochs=2.5",
    ]
    planned = []
    for keywords in configs:
        facts = read_script(script(tmp_path, keywords))
        p = plan(facts, facts.configs[0])
        assert not isinstance(p, str)
        planned.append(p.steps)
    proc = subprocess.run([sys.executable, "-c", PROVE, str(tmp_path / "out"), str(rows), json.dumps(configs)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    real = json.loads(proc.stdout.strip().splitlines()[-1])
    assert [r["max_steps"] for r in real] == planned == [30, 30, 18]
    assert real[0]["evals"] == [4, 8, 12, 16, 20, 24, 28, 30]
    assert real[0]["saved"] == ["checkpoint-30"] and real[0]["best"] == "checkpoint-30"  # only the last
    assert real[1]["saved"] == [f"checkpoint-{s}" for s in (4, 8, 12, 16, 20, 24, 28, 30)]  # the fix applied
    # and the rule says so exactly: on the first, not on the fixed one
    assert [len(hits(script(tmp_path, c), BEST)) for c in configs[:2]] == [1, 0]
