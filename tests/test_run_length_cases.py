"""rules/_run_length.py on scripts written here and read with read_script: each reason
`plan` cannot count a run (max_steps, epochs, batch or accumulation unknown or <= 0; no
training dataset; one not counted; several), the whole `Plan` when it can (each ceil:
rows over processes, over batch, over accumulation, fractional epochs; the launcher's
process count known, unknown, 0 or absent; HF's defaults), the values `setting`,
`default`, `number` and `Setting.said` give, and the whole `Edit` `set_keyword` makes (a
call with no keyword, with some, with a trailing comma, over several lines, with the
keyword present; none through a constant, an attribute set after the call, a launch flag
or `**` keywords), down to `_after_keyword` and `_within` at their edges."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from trainproof_lsp.core.model import Edit, Span
from trainproof_lsp.readers.script import ConfigCall, ScriptFacts, Value, read_script
from trainproof_lsp.rules._run_length import (Plan, Setting, _after_keyword, _within, default, editable, number,
                                              plan, set_keyword, setting)

LOAD = 'from datasets import load_dataset\ntrain = load_dataset("json", data_files={data})\n'
TRAIN = '"data/train.jsonl"'
# where "data/train.jsonl" is written in LOAD with data_files=TRAIN
TRAIN_SPAN = Span(1, 40, 1, 58)
# a config that HfArgumentParser fills from the command line of run.sh
PARSER = ("from transformers import HfArgumentParser, TrainingArguments\n"
          "parser = HfArgumentParser((TrainingArguments,))\n")


def jsonl(rows: int) -> str:
    return "".join(json.dumps({"text": f"row {i}"}) + "\n" for i in range(rows))


def read(folder: Path, source: str, files: dict[str, str] | None = None) -> ScriptFacts:
    """train.py holding `source` in `folder`, beside `files`, as read_script reads it."""
    for name, text in (files or {}).items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    (folder / "train.py").write_text(source, encoding="utf-8")
    return read_script(folder / "train.py")


def config(folder: Path, keywords: str, *, rows: int | None = None, data: str | None = None,
           after: str = "") -> tuple[ScriptFacts, ConfigCall]:
    """A script with `TrainingArguments(output_dir="out", <keywords>)` on its last line but
    `after`; with `rows` rows in data/train.jsonl, loaded when `data` (or `rows`) is given."""
    head = LOAD.format(data=data or TRAIN) if data is not None or rows is not None else ""
    files = {"data/train.jsonl": jsonl(rows)} if rows is not None else {}
    facts = read(folder, f'{head}args = TrainingArguments(output_dir="out", {keywords})\n{after}', files)
    (call,) = facts.configs
    return facts, call


def run_plan(folder: Path, keywords: str, *, rows: int | None = None, after: str = "") -> Plan | str:
    facts, call = config(folder, keywords, rows=rows, after=after)
    return plan(facts, call)


# -- why a run's length is not known -----------------------------------------------------------


@pytest.mark.parametrize("keywords,why", [
    ("max_steps=steps()", "max_steps is not known without running the script (max_steps=steps())"),
    ('max_steps="10"', 'max_steps is not known without running the script (max_steps="10")'),
    ("max_steps=True", "max_steps is not known without running the script (max_steps=True)"),
    # **cfg may hold max_steps: not even HF's default -1 is assumed
    ("**cfg", "max_steps is not known without running the script (max_steps unset (default None))"),
    ("max_steps=-1, **cfg", "not known without running the script: num_train_epochs unset (default None), "
                            "per_device_train_batch_size unset (default None), "
                            "gradient_accumulation_steps unset (default None)"),
    ("num_train_epochs=0", "not known without running the script: num_train_epochs=0"),
    ("num_train_epochs=-1", "not known without running the script: num_train_epochs=-1"),
    ("num_train_epochs=E", "not known without running the script: num_train_epochs=E"),
    ("per_device_train_batch_size=0", "not known without running the script: per_device_train_batch_size=0"),
    ("gradient_accumulation_steps=0", "not known without running the script: gradient_accumulation_steps=0"),
    ("num_train_epochs=E, per_device_train_batch_size=0, gradient_accumulation_steps=-2",
     "not known without running the script: num_train_epochs=E, per_device_train_batch_size=0, "
     "gradient_accumulation_steps=-2"),
])
def test_a_setting_the_source_does_not_fix_says_which(tmp_path, keywords, why):
    assert run_plan(tmp_path, keywords, rows=10) == why


@pytest.mark.parametrize("keywords,why", [
    # a fraction of a batch or of an accumulation step is a batch of 0 to the Trainer
    ("per_device_train_batch_size=0.5", "not known without running the script: per_device_train_batch_size=0.5"),
    ("gradient_accumulation_steps=1.5", "not known without running the script: gradient_accumulation_steps=1.5"),
    ('num_train_epochs=float("nan")', 'not known without running the script: num_train_epochs=float("nan")'),
    ("num_train_epochs=1e400", "not known without running the script: num_train_epochs=1e400"),
    ('max_steps=float("inf")', 'max_steps is not known without running the script (max_steps=float("inf"))'),
])
def test_a_value_that_is_no_count_of_batches_or_steps_gives_no_length(tmp_path, keywords, why):
    assert run_plan(tmp_path, keywords, rows=40) == why


def test_a_script_whose_values_give_no_length_is_judged_without_it(tmp_path):
    from trainproof_lsp.core.config import Config
    from trainproof_lsp.judge.engine import judge_file

    facts, _ = config(tmp_path, "per_device_train_batch_size=0.5, warmup_steps=10, logging_steps=10", rows=40)
    report = judge_file(Path(facts.path), Config())
    assert report.verdict.value == "PASS" and [f.id for f in report.findings] == []


def test_max_steps_set_after_the_call_is_named_by_its_assignment(tmp_path):
    assert run_plan(tmp_path, "", after="args.max_steps = steps()\n") == (
        "max_steps is not known without running the script (args.max_steps = steps())")
    facts, call = config(tmp_path, "", after="args.max_steps = 100\n")
    assert plan(facts, call) == Plan(steps=100, exact=True, how="args.max_steps = 100", max_steps=Value(
        known=True, value=100, span=Span(1, 0, 1, 20), text="args.max_steps = 100", assigned=True))


def test_a_value_whose_own_text_holds_an_equals_sign_is_said_and_edited_as_a_keyword(tmp_path):
    facts, call = config(tmp_path, 'learning_rate=lr(warm=True), logging_dir="runs=1"')
    assert setting(call, "learning_rate").said("learning_rate") == "learning_rate=lr(warm=True)"
    assert editable(call.kwargs["logging_dir"]) and not editable(replace(call.kwargs["logging_dir"], assigned=True))


@pytest.mark.parametrize("data,files,why", [
    (None, {}, 'no max_steps, and no dataset file the script names (load_dataset("json", data_files=...))'),
    # an eval split alone is no training data
    ('{"validation": "data/a.jsonl"}', {"data/a.jsonl": jsonl(4)},
     'no max_steps, and no dataset file the script names (load_dataset("json", data_files=...))'),
    ('"data/missing.jsonl"', {}, "the training dataset data/missing.jsonl was not counted (not on disk)"),
    ('["data/b.jsonl", "data/a.jsonl"]', {"data/a.jsonl": jsonl(4), "data/b.jsonl": jsonl(6)},
     "2 training datasets named (data/a.jsonl, data/b.jsonl)"),
    ('["data/c.jsonl", "data/b.jsonl", "data/a.jsonl"]',
     {"data/a.jsonl": jsonl(4), "data/b.jsonl": jsonl(6), "data/c.jsonl": jsonl(1)},
     "3 training datasets named (data/a.jsonl, data/b.jsonl, data/c.jsonl)"),
])
def test_without_one_counted_training_dataset_the_plan_says_why(tmp_path, data, files, why):
    head = LOAD.format(data=data) if data else ""
    facts = read(tmp_path, f'{head}args = TrainingArguments(output_dir="out")\n', files)
    assert plan(facts, facts.configs[0]) == why


@pytest.mark.parametrize("data,span", [
    ('["data/a.jsonl", "data/a.jsonl"]', Span(1, 57, 1, 71)),  # one file named twice is one dataset (the last)
    ('["data/a.jsonl", "data/missing.jsonl"]', Span(1, 41, 1, 55)),  # the one not on disk is not counted
])
def test_one_counted_training_dataset_is_the_one_planned(tmp_path, data, span):
    facts = read(tmp_path, LOAD.format(data=data) + 'args = TrainingArguments(output_dir="out")\n',
                 {"data/a.jsonl": jsonl(20)})
    assert plan(facts, facts.configs[0]) == Plan(
        steps=9, exact=False, dataset="data/a.jsonl", dataset_span=span,
        how="3 epoch(s) x 3 steps: 20 rows of data/a.jsonl / batch 8 / accumulation 1, 1 process, assumed")


# -- the length counted -------------------------------------------------------------------------


@pytest.mark.parametrize("keywords,steps,how", [
    ("max_steps=1", 1, "max_steps=1"),
    ("max_steps=250, num_train_epochs=E", 250, "max_steps=250"),  # max_steps decides alone
])
def test_a_positive_max_steps_is_the_exact_length(tmp_path, keywords, steps, how):
    facts, call = config(tmp_path, keywords, rows=10)
    assert plan(facts, call) == Plan(steps=steps, exact=True, how=how, max_steps=call.kwargs["max_steps"])
    assert call.kwargs["max_steps"].span == Span(2, 53, 2, 53 + len(str(steps)))


@pytest.mark.parametrize("rows,keywords,steps,how", [
    # HF's defaults: 3 epochs, batch 8, accumulation 1; max_steps 0 or -1 leaves it to the epochs
    (100, "", 39, "3 epoch(s) x 13 steps: 100 rows"),
    (100, "max_steps=0", 39, "3 epoch(s) x 13 steps: 100 rows"),
    (100, "max_steps=-1", 39, "3 epoch(s) x 13 steps: 100 rows"),
    # rows / batch: the last partial batch counts
    (10, "per_device_train_batch_size=5, num_train_epochs=1", 2, "1 epoch(s) x 2 steps: 10 rows"),
    (11, "per_device_train_batch_size=5, num_train_epochs=1", 3, "1 epoch(s) x 3 steps: 11 rows"),
    # batches / accumulation: the last partial update counts
    (12, "per_device_train_batch_size=4, gradient_accumulation_steps=3, num_train_epochs=1", 1,
     "1 epoch(s) x 1 steps: 12 rows"),
    (13, "per_device_train_batch_size=4, gradient_accumulation_steps=3, num_train_epochs=1", 2,
     "1 epoch(s) x 2 steps: 13 rows"),
    # epochs x steps per epoch, rounded up
    (10, "per_device_train_batch_size=1, num_train_epochs=0.2", 2, "0.2 epoch(s) x 10 steps: 10 rows"),
    (10, "per_device_train_batch_size=1, num_train_epochs=0.25", 3, "0.25 epoch(s) x 10 steps: 10 rows"),
    (10, "per_device_train_batch_size=1, num_train_epochs=0.01", 1, "0.01 epoch(s) x 10 steps: 10 rows"),
    # an empty dataset still takes a step per epoch
    (0, "per_device_train_batch_size=1, num_train_epochs=2", 2, "2 epoch(s) x 1 steps: 0 rows"),
])
def test_the_length_is_epochs_times_updates_per_epoch_rounded_up(tmp_path, rows, keywords, steps, how):
    facts, call = config(tmp_path, keywords, rows=rows)
    batch = setting(call, "per_device_train_batch_size").value
    accumulation = setting(call, "gradient_accumulation_steps").value
    assert plan(facts, call) == Plan(
        steps=steps, exact=False, dataset="data/train.jsonl", dataset_span=TRAIN_SPAN,
        how=f"{how} of data/train.jsonl / batch {batch} / accumulation {accumulation}, 1 process, assumed")


@pytest.mark.parametrize("launcher,steps,per_epoch,processes", [
    ("torchrun --nproc_per_node 2", 2, 2, "2 processes"),
    ("torchrun --nproc_per_node 3", 2, 2, "3 processes"),  # ceil(10 / 3) = 4 rows a process
    ("torchrun --nproc_per_node 1", 4, 4, "1 process"),
    ("torchrun --nproc_per_node 0", 4, 4, "1 process, assumed"),
    ("torchrun --nproc_per_node -1", 4, 4, "1 process, assumed"),
    ("torchrun --nproc_per_node true", 4, 4, "1 process, assumed"),
    ("torchrun --nproc_per_node $GPUS", 4, 4, "1 process, assumed"),
    ("python", 4, 4, "1 process, assumed"),
])
def test_the_launchers_process_count_divides_the_rows(tmp_path, launcher, steps, per_epoch, processes):
    launch = (f"#!/bin/sh\n{launcher} train.py \\\n"
              "  --train_file data/train.jsonl --per_device_train_batch_size 3 --num_train_epochs 2\n")
    facts = read(tmp_path, PARSER, {"data/train.jsonl": jsonl(10), "run.sh": launch})
    (call,) = facts.configs
    assert plan(facts, call) == Plan(
        steps=steps * 2, exact=False, dataset="data/train.jsonl", dataset_path=str(tmp_path / "run.sh"),
        dataset_span=Span(2, 15, 2, 31),
        how=f"2 epoch(s) x {per_epoch} steps: 10 rows of data/train.jsonl / batch 3 / accumulation 1, {processes}")


# -- settings -----------------------------------------------------------------------------------


@pytest.mark.parametrize("cls,key,value", [
    ("TrainingArguments", "logging_steps", 500),
    ("Seq2SeqTrainingArguments", "logging_steps", 500),
    ("SFTConfig", "logging_steps", 10),  # TRL logs every 10 steps
    ("DPOConfig", "logging_steps", 10),
    ("SFTConfig", "save_steps", 500),  # ... and keeps HF's other defaults
    ("SFTConfig", "num_train_epochs", 3.0),
    ("TrainingArguments", "save_strategy", "steps"),
    ("TrainingArguments", "eval_steps", None),  # no default kept
])
def test_the_default_of_a_keyword_the_config_does_not_set(tmp_path, cls, key, value):
    facts = read(tmp_path, f'args = {cls}(output_dir="out")\n')
    (call,) = facts.configs
    assert default(call, key) == value
    assert setting(call, key) == Setting(value=value, given=None)


def test_a_config_with_unknown_keywords_has_no_defaults(tmp_path):
    _, call = config(tmp_path, "**cfg")
    assert call.opaque
    assert setting(call, "save_steps") == Setting(value=None, given=None)
    assert setting(call, "output_dir") == Setting(value="out", given=call.kwargs["output_dir"])


@pytest.mark.parametrize("keywords,key,aliases,value,given", [
    ('save_strategy="EPOCH"', "save_strategy", (), "epoch", "save_strategy"),
    ("save_strategy=IntervalStrategy.STEPS", "save_strategy", (), "steps", "save_strategy"),
    ("save_strategy=S", "save_strategy", (), None, "save_strategy"),
    ("save_strategy=1", "save_strategy", (), 1, "save_strategy"),
    ('evaluation_strategy="Steps"', "eval_strategy", ("evaluation_strategy",), "steps", "evaluation_strategy"),
    ('eval_strategy="no", evaluation_strategy="steps"', "eval_strategy", ("evaluation_strategy",), "no",
     "eval_strategy"),
    ('hub_model_id="Org/Model"', "hub_model_id", (), "Org/Model", "hub_model_id"),  # only strategies are lowered
    ("save_steps=S", "save_steps", (), None, "save_steps"),
])
def test_a_keyword_as_written_is_the_setting(tmp_path, keywords, key, aliases, value, given):
    _, call = config(tmp_path, keywords)
    assert setting(call, key, *aliases) == Setting(value=value, given=call.kwargs[given])


def test_a_value_marked_unknown_is_not_trusted(tmp_path):
    """`known` decides, whatever a Value's `value` holds."""
    _, call = config(tmp_path, "save_steps=S")
    stale = replace(call.kwargs["save_steps"], value=100)
    call = replace(call, kwargs={**call.kwargs, "save_steps": stale})
    assert setting(call, "save_steps") == Setting(value=None, given=stale)


@pytest.mark.parametrize("value,expected", [
    (3, 3.0), (2.5, 2.5), (0, 0.0), (-1, -1.0), (True, None), (False, None), ("3", None), (None, None),
])
def test_a_number_is_an_int_or_float_not_a_bool(value, expected):
    assert number(Setting(value=value, given=None)) == expected


def test_a_setting_says_itself_as_written_or_as_its_default(tmp_path):
    facts, call = config(tmp_path, "save_steps=50, learning_rate=LR", after="args.logging_steps = 5\n")
    assert setting(call, "save_steps").said("save_steps") == "save_steps=50"
    assert setting(call, "learning_rate").said("learning_rate") == "learning_rate=LR"
    assert setting(call, "logging_steps").said("logging_steps") == "args.logging_steps = 5"
    assert setting(call, "eval_steps").said("eval_steps") == "eval_steps unset (default None)"
    assert setting(call, "max_steps").said("max_steps") == "max_steps unset (default -1)"
    assert setting(call, "save_strategy").said("save_strategy") == "save_strategy unset (default 'steps')"


# -- edits --------------------------------------------------------------------------------------


def test_editable_is_a_value_written_at_the_call(tmp_path):
    facts = read(tmp_path, 'N = 5\nargs = TrainingArguments(output_dir="out", save_steps=N, max_steps=10)\n'
                           "args.logging_steps = 5\n")
    (call,) = facts.configs
    assert [editable(call.kwargs[k]) for k in ("max_steps", "save_steps", "logging_steps")] == [True, False, False]
    assert editable(None) is False


def test_a_launch_flag_is_not_editable_and_a_parsers_config_gets_no_edit(tmp_path):
    launch = "#!/bin/sh\npython train.py --save_steps 100\n"
    facts = read(tmp_path, PARSER, {"run.sh": launch})
    (call,) = facts.configs
    assert editable(call.kwargs["save_steps"]) is False
    assert set_keyword(facts, call, "save_steps", "20") is None
    assert set_keyword(facts, call, "max_steps", "20") is None


@pytest.mark.parametrize("source,edit", [
    # no keyword: the new one goes before ")"
    ("args = TrainingArguments()\n", Edit(span=Span(0, 25, 0, 25), new_text="max_steps=10")),
    ("x = 1\nargs = TrainingArguments(\n)\n", Edit(span=Span(2, 0, 2, 0), new_text="max_steps=10")),
    ("args = TrainingArguments(\n    )\n", Edit(span=Span(1, 4, 1, 4), new_text="max_steps=10")),
    # after the last keyword, on the first line or later, with or without a trailing comma
    ('args = TrainingArguments(output_dir="o")\n', Edit(span=Span(0, 39, 0, 39), new_text=", max_steps=10")),
    ('args = TrainingArguments(output_dir="o",)\n', Edit(span=Span(0, 39, 0, 39), new_text=", max_steps=10")),
    ('x = 1\nargs = TrainingArguments(output_dir="o", save_steps=5)\n',
     Edit(span=Span(1, 53, 1, 53), new_text=", max_steps=10")),
    ('args = TrainingArguments(\n    output_dir="o",\n    save_steps=50,\n)\n',
     Edit(span=Span(2, 17, 2, 17), new_text=", max_steps=10")),
    ('args = TrainingArguments(\n    save_steps=50, output_dir="out-dir"\n    )\n',
     Edit(span=Span(1, 39, 1, 39), new_text=", max_steps=10")),
    # spaces around "="
    ('args = TrainingArguments(output_dir= "o")\n', Edit(span=Span(0, 40, 0, 40), new_text=", max_steps=10")),
    ('args = TrainingArguments(output_dir ="o")\n', Edit(span=Span(0, 40, 0, 40), new_text=", max_steps=10")),
    # a value whose own text holds "=" is a keyword like any other
    ('args = TrainingArguments(output_dir="o", save_steps=every(n=5))\n',
     Edit(span=Span(0, 62, 0, 62), new_text=", max_steps=10")),
    # the keywords of a **dict(...) written in the call
    ("args = TrainingArguments(**dict(save_steps=5))\n", Edit(span=Span(0, 44, 0, 44), new_text=", max_steps=10")),
    # present: its value is replaced
    ('args = TrainingArguments(output_dir="o", max_steps=500)\n',
     Edit(span=Span(0, 51, 0, 51 + 3), new_text="10")),
])
def test_set_keyword_edits_the_call(tmp_path, source, edit):
    facts = read(tmp_path, source)
    assert set_keyword(facts, facts.configs[0], "max_steps", "10") == edit


@pytest.mark.parametrize("source", [
    'N = 500\nargs = TrainingArguments(output_dir="o", max_steps=N)\n',  # through a constant
    'args = TrainingArguments(output_dir="o")\nargs.max_steps = 500\n',  # set after the call
    "args = TrainingArguments(**cfg)\n",  # **cfg may hold anything
    'args = TrainingArguments(**{"output_dir": "o"})\n',  # keys of a dict: no `name=` to follow
    # keywords of a dict(...) written elsewhere
    'EXTRA = dict(save_steps=5)\nargs = TrainingArguments(**EXTRA)\n',
])
def test_set_keyword_makes_no_edit_it_cannot_place(tmp_path, source):
    facts = read(tmp_path, source)
    assert set_keyword(facts, facts.configs[0], "max_steps", "10") is None


def test_after_keyword_reads_the_text_before_a_value(tmp_path):
    facts = read(tmp_path, "# save_steps: 5\n# save_steps =5\n")
    assert len(facts.source_lines) == 3
    assert _after_keyword(facts, Span(1, 14, 1, 15), "save_steps") is True
    assert _after_keyword(facts, Span(1, 14, 1, 15), "eval_steps") is False
    assert _after_keyword(facts, Span(0, 14, 0, 15), "save_steps") is False  # ":" is not "="
    # lines the script does not have
    assert [_after_keyword(facts, Span(line, 0, line, 1), "save_steps") for line in (-1, 3, 4, 40)] == [False] * 4


@pytest.mark.parametrize("inner,within", [
    (Span(1, 5, 2, 8), True),  # the same span
    (Span(1, 6, 2, 7), True),
    (Span(1, 4, 2, 8), False),  # starts one before
    (Span(1, 5, 2, 9), False),  # ends one after
    (Span(0, 9, 1, 7), False),  # starts a line before
    (Span(2, 1, 3, 0), False),  # ends a line after
    (Span(1, 4, 2, 9), False),
])
def test_within_includes_both_ends(inner, within):
    assert _within(inner, Span(1, 5, 2, 8)) is within
