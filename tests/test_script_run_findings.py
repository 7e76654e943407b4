"""The three run-length rules of rules/script_run.py, each finding asserted whole (message,
place, evidence, related places, fix), in every file a value can come from (the call, a
launch script's flags), with each limit met exactly, and with several config calls in one
script. The planned length itself is proved against the real Trainer in
tests/test_script_run_length.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainproof_lsp.core.config import Config
from trainproof_lsp.judge.engine import judge_file

SAVE = "TP-SCRIPT-NO-CHECKPOINT-SAVED"
BEST = "TP-SCRIPT-BEST-NEVER-SAVED"
EVAL = "TP-SCRIPT-EVAL-NEVER-RUN"
IDS = (SAVE, BEST, EVAL)

HEAD = ('from datasets import load_dataset\nfrom transformers import TrainingArguments\n'
        'train = load_dataset("json", data_files="data/train.jsonl")\n')
RUN_100 = "the run is 100 steps (max_steps=100)"
RUN_150 = ("the run is at most 150 steps (3 epoch(s) x 50 steps: 400 rows of data/train.jsonl / batch 8 / "
           "accumulation 1, 1 process, assumed)")
COUNTED = ("the dataset counted: 3 epoch(s) x 50 steps: 400 rows of data/train.jsonl / batch 8 / accumulation 1, "
           "1 process, assumed")
NO_SAVE = ": no checkpoint is saved before the last step: a crash before then loses the whole run"
NEVER_KEPT = (": no checkpoint is saved before the last step, so the best model by eval is never kept "
              "(load_best_model_at_end can only load the final state)")
NEVER_EVAL = ": it never evaluates during training (at most once, at the last step)"


def _dataset(folder: Path, rows: int = 400) -> None:
    (folder / "data").mkdir(exist_ok=True)
    (folder / "data/train.jsonl").write_text("".join(json.dumps({"text": f"row {i}"}) + "\n" for i in range(rows)),
                                             encoding="utf-8")


def _findings(folder: Path, path: Path) -> list[tuple]:
    report = judge_file(path, Config())
    for c in report.checks:
        if c.group in IDS:
            assert (c.ran, c.reason) == (True, ""), (c.group, c.reason)

    def rel(p: str) -> str:
        return str(Path(p).relative_to(folder))

    return [(f.id, f.message, (rel(f.location.path), f.location.span.start_line, f.location.span.start_char),
             dict(f.evidence), [(rel(r.location.path), r.location.span.start_line, r.message) for r in f.related],
             f.fix and (f.fix.title, [(e.span.start_line, e.span.start_char, e.new_text) for e in f.fix.edits]))
            for f in report.findings if f.id in IDS]


def _script(folder: Path, calls: str) -> Path:
    _dataset(folder)
    path = folder / "train.py"
    path.write_text(HEAD + calls + "\n", encoding="utf-8")
    return path


def _ev(key: str, every: float, steps: int = 100, exact: bool = True) -> dict:
    return {key: every, "planned_steps": steps, "exact": exact, "config": "TrainingArguments"}


# the config call (line 3 of the script) -> every finding of the three rules
CASES = {
    'a = TrainingArguments(output_dir="o", max_steps=100, save_steps=200)': [
        (SAVE, "save_steps=200 but " + RUN_100 + NO_SAVE, ("train.py", 3, 64), _ev("save_steps", 200.0),
         [("train.py", 3, "the run is 100 steps")], None)],
    # the fix sets save_steps to eval_steps, inside the run
    'a = TrainingArguments(output_dir="o", max_steps=100, eval_strategy="steps", eval_steps=20, save_steps=200, '
    'load_best_model_at_end=True)': [
        (BEST, "load_best_model_at_end=True but save_steps=200 and " + RUN_100 + NEVER_KEPT, ("train.py", 3, 130),
         _ev("save_steps", 200.0), [("train.py", 3, "save_steps 200"), ("train.py", 3, "the run is 100 steps")],
         ("set save_steps to 20 (= eval_steps, inside the 100-step run)", [(3, 102, "20")]))],
    # an eval_steps of exactly the run's length is inside it: the fix may use it
    'a = TrainingArguments(output_dir="o", max_steps=100, eval_strategy="steps", eval_steps=100, save_steps=200, '
    'load_best_model_at_end=True)': [
        (BEST, "load_best_model_at_end=True but save_steps=200 and " + RUN_100 + NEVER_KEPT, ("train.py", 3, 131),
         _ev("save_steps", 200.0), [("train.py", 3, "save_steps 200"), ("train.py", 3, "the run is 100 steps")],
         ("set save_steps to 100 (= eval_steps, inside the 100-step run)", [(3, 103, "100")]))],
    # an eval_steps of exactly 1 is a step count; below 1 it is a fraction of the run: no fix from it
    'a = TrainingArguments(output_dir="o", max_steps=100, eval_strategy="steps", eval_steps=1, save_steps=200, '
    'load_best_model_at_end=True)': [
        (BEST, "load_best_model_at_end=True but save_steps=200 and " + RUN_100 + NEVER_KEPT, ("train.py", 3, 129),
         _ev("save_steps", 200.0), [("train.py", 3, "save_steps 200"), ("train.py", 3, "the run is 100 steps")],
         ("set save_steps to 1 (= eval_steps, inside the 100-step run)", [(3, 101, "1")]))],
    'a = TrainingArguments(output_dir="o", max_steps=100, eval_strategy="steps", eval_steps=0.5, save_steps=200, '
    'load_best_model_at_end=True)': [
        (BEST, "load_best_model_at_end=True but save_steps=200 and " + RUN_100 + NEVER_KEPT, ("train.py", 3, 131),
         _ev("save_steps", 200.0), [("train.py", 3, "save_steps 200"), ("train.py", 3, "the run is 100 steps")],
         None)],
    # the older spelling of eval_strategy, eval_steps from logging_steps (past the run: no fix)
    'a = TrainingArguments(output_dir="o", max_steps=100, evaluation_strategy="steps", logging_steps=200)': [
        (SAVE, "save_steps unset (default 500) but " + RUN_100 + NO_SAVE, ("train.py", 3, 4),
         _ev("save_steps", 500.0), [("train.py", 3, "the run is 100 steps")], None),
        (EVAL, 'eval_strategy "steps" with logging_steps=200 (eval_steps unset: it falls back to logging_steps) but '
         + RUN_100 + NEVER_EVAL, ("train.py", 3, 73), _ev("eval_steps", 200.0),
         [("train.py", 3, "the run is 100 steps")], None)],
    'a = TrainingArguments(output_dir="o", eval_strategy="steps", eval_steps=200)': [
        (SAVE, "save_steps unset (default 500) but " + RUN_150 + NO_SAVE, ("train.py", 3, 4),
         _ev("save_steps", 500.0, 150, False), [("train.py", 2, COUNTED)], None),
        (EVAL, 'eval_strategy "steps" with eval_steps=200 but ' + RUN_150 + NEVER_EVAL, ("train.py", 3, 72),
         _ev("eval_steps", 200.0, 150, False), [("train.py", 2, COUNTED)], None)],
    # the older eval spelling says nothing of the save strategy: it stays HF's "steps"
    'a = TrainingArguments(output_dir="o", max_steps=100, evaluation_strategy="epoch")': [
        (SAVE, "save_steps unset (default 500) but " + RUN_100 + NO_SAVE, ("train.py", 3, 4),
         _ev("save_steps", 500.0), [("train.py", 3, "the run is 100 steps")], None)],
    # without load_best_model_at_end the same fix: save at eval_steps
    'a = TrainingArguments(output_dir="o", max_steps=100, eval_strategy="steps", eval_steps=20, save_steps=200)': [
        (SAVE, "save_steps=200 but " + RUN_100 + NO_SAVE, ("train.py", 3, 102), _ev("save_steps", 200.0),
         [("train.py", 3, "the run is 100 steps")],
         ("set save_steps to 20 (= eval_steps, inside the 100-step run)", [(3, 102, "20")]))],
    # each limit met exactly: a save or an eval at the last step is inside the run
    'a = TrainingArguments(output_dir="o", max_steps=100, save_steps=100, eval_strategy="steps", eval_steps=100)': [],
    'a = TrainingArguments(output_dir="o", max_steps=100, save_steps=100, eval_strategy="steps", eval_steps=20, '
    'load_best_model_at_end=True)': [],
    'a = TrainingArguments(output_dir="o", max_steps=100, save_steps=101, eval_strategy="steps", eval_steps=101)': [
        (SAVE, "save_steps=101 but " + RUN_100 + NO_SAVE, ("train.py", 3, 64), _ev("save_steps", 101.0),
         [("train.py", 3, "the run is 100 steps")], None),
        (EVAL, 'eval_strategy "steps" with eval_steps=101 but ' + RUN_100 + NEVER_EVAL, ("train.py", 3, 103),
         _ev("eval_steps", 101.0), [("train.py", 3, "the run is 100 steps")], None)],
}


@pytest.mark.parametrize("calls", list(CASES))
def test_every_finding_whole(tmp_path, calls):
    assert _findings(tmp_path, _script(tmp_path, calls)) == CASES[calls]


# a call before the one that fires, in each way a call is passed over
BEFORE = [
    'TrainingArguments(output_dir="a", max_steps=100, save_strategy="epoch", eval_strategy="epoch")',
    'TrainingArguments(output_dir="a", max_steps=100, save_steps=50)',
    'TrainingArguments(output_dir="a", max_steps=100, save_steps=50, eval_strategy="steps", eval_steps=10, '
    'load_best_model_at_end=True)',
    'TrainingArguments(output_dir="a", max_steps=int(os.environ["N"]))',  # its length is unknown
]
LAST = {
    'b = TrainingArguments(output_dir="b", max_steps=100, eval_strategy="steps", eval_steps=200, '
    'save_steps=300, load_best_model_at_end=True)': [(BEST, 5, 100, 300.0), (EVAL, 5, 100, 200.0)],
    'b = TrainingArguments(output_dir="b", max_steps=100, save_steps=300)': [(SAVE, 5, 100, 300.0)],
}


@pytest.mark.parametrize("last", list(LAST))
@pytest.mark.parametrize("before", BEFORE)
def test_every_call_is_judged_whatever_the_one_before_it_did(tmp_path, before, last):
    path = _script(tmp_path, "import os\na = " + before + "\n" + last)
    assert sorted((i, line, evidence["planned_steps"], evidence.get("save_steps", evidence.get("eval_steps")))
                  for i, _, (_, line, _), evidence, _, _ in _findings(tmp_path, path)) == LAST[last]


def test_the_saved_steps_related_place_is_the_keyword_not_the_call(tmp_path):
    calls = ('a = TrainingArguments(output_dir="o", max_steps=100, eval_strategy="steps", eval_steps=20, '
             'save_steps=200, load_best_model_at_end=True)')
    (hit,) = [f for f in judge_file(_script(tmp_path, calls), Config()).findings if f.id == BEST]
    assert [(r.location.span.start_line, r.location.span.start_char) for r in hit.related] == [
        (3, calls.index("save_steps=200") + len("save_steps=")), (3, calls.index("max_steps=100") + len("max_steps="))]


def test_a_script_whose_every_length_is_unknown_says_why(tmp_path):
    path = tmp_path / "train.py"
    path.write_text('import os\nfrom transformers import TrainingArguments\n'
                    'a = TrainingArguments(output_dir="a", max_steps=int(os.environ["N"]))\n', encoding="utf-8")
    report = judge_file(path, Config())
    assert not [f for f in report.findings if f.id in IDS]
    reasons = {c.group: (c.ran, c.reason) for c in report.checks if c.group in IDS}
    assert set(reasons.values()) == {(False, "the run's length is unknown: max_steps is not known without running "
                                             'the script (max_steps=int(os.environ["N"]))')}, reasons


def _launch(folder: Path, flags: str) -> Path:
    _dataset(folder)
    path = folder / "train.py"
    path.write_text("from dataclasses import dataclass, field\n"
                    "from transformers import HfArgumentParser, TrainingArguments\n"
                    "@dataclass\n"
                    "class DataArguments:\n"
                    '    train_file: str = field(default="x.jsonl")\n'
                    "parser = HfArgumentParser((DataArguments, TrainingArguments))\n", encoding="utf-8")
    (folder / "run.sh").write_text("#!/bin/sh\npython train.py --train_file data/train.jsonl \\\n  " + flags + "\n",
                                   encoding="utf-8")
    return path


def test_values_from_a_launch_script_are_placed_in_it(tmp_path):
    assert _findings(tmp_path, _launch(tmp_path, "--max_steps 100 --save_steps 200")) == [
        (SAVE, "save_steps=200 but " + RUN_100 + NO_SAVE, ("run.sh", 2, 31), _ev("save_steps", 200.0),
         [("run.sh", 2, "the run is 100 steps")], None)]


def test_a_dataset_named_in_a_launch_script_is_placed_in_it(tmp_path):
    assert _findings(tmp_path, _launch(tmp_path, "--save_steps 200")) == [
        (SAVE, "save_steps=200 but " + RUN_150 + NO_SAVE, ("run.sh", 2, 15), _ev("save_steps", 200.0, 150, False),
         [("run.sh", 1, COUNTED)], None)]
