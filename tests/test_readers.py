"""Readers: what they read from real log layouts, and where each record sits in its file.

trainer_state.json spans are checked against an oracle that works on the text alone
(the lines json.dump(indent=N) writes, or the element's own dump in a one-line file), so
a reader bug cannot hide behind the same arithmetic in the test.
"""

from __future__ import annotations

import builtins
import io
import json
import math
import os
import pickle
import shutil
from pathlib import Path
from typing import Any

import pytest

from conftest import HF_RUNS, LOGS, ids, judge, line_with, only, start_line
from trainproof_lsp.core.config import Config
from trainproof_lsp.judge.engine import doctor
from trainproof_lsp.core.model import EPOCH, EVAL_LOSS, GRAD_NORM, LOSS, LOSS_EPOCH, LR, Level, Run, Span, Verdict
from trainproof_lsp.readers.metrics import read_metrics_csv, read_metrics_json_array, read_metrics_jsonl
from trainproof_lsp.readers.trainer_state import read_trainer_state

# --- trainer_state.json: spans --------------------------------------------------------------


def _entries() -> list[dict[str, Any]]:
    """log_history as HF writes it: train entries, eval entries, the closing summary."""
    out: list[dict[str, Any]] = []
    for i in range(1, 7):
        step = 5 * i
        out.append({"epoch": round(step / 30, 4), "grad_norm": round(1.0 - 0.05 * i, 3),
                    "learning_rate": round(5e-5 * (1 - step / 30), 8), "loss": round(2.4 - 0.2 * i, 3),
                    "step": step})
        if step % 10 == 0:
            out.append({"epoch": round(step / 30, 4), "eval_loss": round(2.3 - 0.15 * i, 3),
                        "eval_runtime": 0.5, "eval_samples_per_second": 256.0, "eval_steps_per_second": 8.0,
                        "step": step})
    out.append({"epoch": 1.0, "step": 30, "total_flos": 1234.0, "train_loss": 1.9, "train_runtime": 12.5,
                "train_samples_per_second": 38.4, "train_steps_per_second": 2.4})
    return out


def _state(entries: list[dict[str, Any]], **top: Any) -> dict[str, Any]:
    state = {"best_global_step": 20, "best_metric": 1.7, "best_model_checkpoint": "out/checkpoint-20",
             "epoch": 1.0, "eval_steps": 10, "global_step": 30, "is_world_process_zero": True,
             "log_history": entries, "logging_steps": 5, "max_steps": 30, "num_train_epochs": 1,
             "stateful_callbacks": {"TrainerControl": {"args": {"should_save": True}, "attributes": {}}},
             "total_flos": 1234.0, "train_batch_size": 16}
    state.update(top)
    return state


def _write_state(folder: Path, state: dict[str, Any], indent: int | None) -> Path:
    path = folder / "trainer_state.json"
    path.write_text(json.dumps(state, indent=indent, sort_keys=True) + "\n", encoding="utf-8")
    return path


def _indented_oracle(path: Path, indent: int) -> list[Span]:
    """Spans of log_history's elements from json.dump(indent=N) text: between the
    `"log_history": [` line and its `]` (both at N spaces), each element's braces sit
    alone on their lines at 2N spaces."""
    pad = " " * (2 * indent)
    lines = path.read_text(encoding="utf-8").splitlines()
    first = lines.index(" " * indent + '"log_history": [')
    last = next(i for i in range(first, len(lines)) if lines[i] in (" " * indent + "]", " " * indent + "],"))
    starts = [i for i in range(first, last) if lines[i] == pad + "{"]
    ends = [i for i in range(first, last) if lines[i] in (pad + "}", pad + "},")]
    return [Span(s, 2 * indent, e, 2 * indent + 1) for s, e in zip(starts, ends, strict=True)]


def _spans(run: Run) -> list[Span | None]:
    return [run.record_spans.span(i) for i in range(len(run.record_spans.start_lines))]


@pytest.mark.parametrize("indent", [2, 4])
def test_pretty_trainer_state_entries_keep_their_line_ranges(tmp_path, indent):
    entries = _entries()
    path = _write_state(tmp_path, _state(entries), indent)
    run = read_trainer_state(path)
    expected = _indented_oracle(path, indent)
    assert len(expected) == len(entries)
    assert _spans(run) == expected
    # Every train loss point's record is the entry holding that step's loss.
    loss = run.series[LOSS]
    assert loss.steps == (5, 10, 15, 20, 25, 30)
    for step, record in zip(loss.steps, loss.records):
        assert entries[record]["step"] == step and "loss" in entries[record]


def test_one_line_trainer_state_entries_keep_their_columns(tmp_path):
    entries = _entries()
    entries[2]["note"] = "a string with } and { and \" inside"  # braces in strings are not structure
    path = _write_state(tmp_path, _state(entries), None)
    text = path.read_text(encoding="utf-8")
    run = read_trainer_state(path)
    expected, pos = [], 0
    for e in entries:
        dumped = json.dumps(e, sort_keys=True)
        start = text.index(dumped, pos)
        pos = start + len(dumped)
        expected.append(Span(0, start, 0, pos))
    assert _spans(run) == expected


def test_nan_and_infinity_tokens_are_read_and_keep_positions(tmp_path):
    entries = _entries()
    entries[3]["loss"] = math.nan  # step 15, written as the bare token NaN
    entries[3]["grad_norm"] = math.inf  # Infinity
    path = _write_state(tmp_path, _state(entries), 2)
    assert '"loss": NaN' in path.read_text() and '"grad_norm": Infinity' in path.read_text()
    run = read_trainer_state(path)
    assert _spans(run) == _indented_oracle(path, 2)
    loss = run.series[LOSS]
    i = loss.steps.index(15)
    assert math.isnan(loss.values[i]) and loss.records[i] == 3
    assert math.isinf(run.series[GRAD_NORM].values[i])
    report = judge(path)
    f = only(report, "TP-NAN")
    assert start_line(f) == _indented_oracle(path, 2)[3].start_line == line_with(path, '"loss": NaN') - 4
    assert f.evidence == {"first_step": 15, "count": 1, "points": 6}


@pytest.mark.parametrize("with_nan", [False, True], ids=["fast-decoder", "stdlib-fallback"])
def test_entries_without_a_step_are_noted_as_info(tmp_path, with_nan):
    entries = _entries()
    entries.insert(4, {"epoch": 0.5, "loss": 1.5})  # no step
    if with_nan:
        entries[-1]["train_loss"] = math.nan  # makes msgspec hand the file to the stdlib
    path = _write_state(tmp_path, _state(entries), 2)
    run = read_trainer_state(path)
    assert run.notes[0][0] == 4
    assert "without" in run.notes[0][1] and "step" in run.notes[0][1]
    assert 1.5 not in run.series[LOSS].values
    report = judge(path)
    f = only(report, "TP-SKIPPED-RECORDS")
    assert f.level is Level.INFO
    assert start_line(f) == _indented_oracle(path, 2)[4].start_line
    assert f.evidence == {"count": 1}
    # INFO never changes a verdict: what decides it is the log being too short to judge.
    assert report.verdict is Verdict.NOT_CHECKED and "the trend checks need at least 7, up to 10 as the loss's own noise requires" in report.reason


# --- trainer_state.json: meta ---------------------------------------------------------------

def test_trainer_state_meta_and_checkpoint_folders(tmp_path):
    path = _write_state(tmp_path, _state(_entries()), 2)
    for name in ("checkpoint-10", "checkpoint-20", "checkpoint-100"):
        (tmp_path / name).mkdir()
    (tmp_path / "checkpoint-30").write_text("a file, not a checkpoint folder")
    (tmp_path / "checkpoint-last").mkdir()
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "vocab_size": 32000}))
    meta = read_trainer_state(path).meta
    assert meta.max_steps == 30
    assert meta.logging_steps == 5
    assert meta.best_step == 20
    assert meta.best_checkpoint == "out/checkpoint-20"
    assert meta.checkpoint_steps == (10, 20, 100)
    assert meta.vocab_size == 32000
    assert meta.vocab_source == str(tmp_path / "config.json")


def test_best_step_comes_from_the_checkpoint_name_when_best_global_step_is_missing(tmp_path):
    state = _state(_entries())
    del state["best_global_step"]  # transformers before 4.46 did not write it
    meta = read_trainer_state(_write_state(tmp_path, state, 2)).meta
    assert meta.best_step == 20


@pytest.mark.parametrize("cfg, classes", [
    ({"architectures": ["BertForSequenceClassification"], "num_labels": 3, "vocab_size": 30522}, 3),
    ({"architectures": ["RobertaForTokenClassification"],
      "id2label": {"0": "O", "1": "B-PER", "2": "I-PER", "3": "B-LOC", "4": "I-LOC"}, "vocab_size": 50265}, 5),
    ({"architectures": ["LlavaForConditionalGeneration"], "text_config": {"vocab_size": 32064}}, 32064),
    ({"architectures": ["GPT2LMHeadModel"], "vocab_size": 64}, 64),
])
def test_classes_come_from_config_json_labels_for_classifiers(tmp_path, cfg, classes):
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    meta = read_trainer_state(_write_state(tmp_path, _state(_entries()), 2)).meta
    assert meta.vocab_size == classes


def test_a_checkpoint_copy_reads_meta_from_its_run_folder(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["GPT2LMHeadModel"], "vocab_size": 64}))
    for name in ("checkpoint-10", "checkpoint-20"):
        (tmp_path / name).mkdir()
    path = _write_state(tmp_path / "checkpoint-20", _state(_entries()[:5]), 2)
    meta = read_trainer_state(path).meta
    assert meta.checkpoint_steps == (10, 20)
    assert meta.vocab_size == 64


# --- the committed HF runs ----------------------------------------------------------------

def _entry_at(path: Path, span: Span) -> dict[str, Any]:
    """The log_history entry written on the lines a span covers."""
    lines = path.read_text(encoding="utf-8").splitlines()[span.start_line : span.end_line + 1]
    return json.loads("\n".join(lines).strip().rstrip(","))


def test_healthy_run_passes():
    report = judge(HF_RUNS / "healthy" / "trainer_state.json")
    assert report.verdict is Verdict.PASS
    assert [f.level for f in report.findings] == [Level.INFO]  # throughput only
    assert ids(report) == ["TP-THROUGHPUT"]


def test_healthy_run_entry_spans_match_the_text():
    path = HF_RUNS / "healthy" / "trainer_state.json"
    run = read_trainer_state(path)
    assert _spans(run) == _indented_oracle(path, 2)
    assert len(run.series[LOSS]) == 51
    assert run.meta.checkpoint_steps == (100, 200)
    assert run.meta.best_step == 200 and run.meta.best_checkpoint == "healthy/checkpoint-200"
    assert run.meta.vocab_size == 64


def test_hot_lr_run_diverges_at_the_entry_of_the_step_it_cites():
    path = HF_RUNS / "lr_hot_diverges" / "trainer_state.json"
    report = judge(path)
    assert report.verdict is Verdict.FAIL
    f = only(report, "TP-DIVERGE")
    assert f.level is Level.FAIL
    assert f.evidence["end_step"] == 120
    entry = _entry_at(path, f.location.span)
    assert entry["step"] == f.evidence["end_step"] and "loss" in entry
    (rel,) = f.related
    best = _entry_at(path, rel.location.span)
    assert best["step"] == f.evidence["best_step"] and "loss" in best
    assert f.evidence["ratio"] > 10


def test_zero_lr_run_fails_zero_lr():
    path = HF_RUNS / "lr_zero" / "trainer_state.json"
    report = judge(path)
    assert report.verdict is Verdict.FAIL
    f = only(report, "TP-ZERO-LR")
    assert f.evidence == {"points": 26, "first_step": 1, "last_step": 100}
    assert _entry_at(path, f.location.span)["learning_rate"] == 0.0


def test_overfit_run_warns_and_names_checkpoint_16():
    path = HF_RUNS / "overfit" / "trainer_state.json"
    report = judge(path)
    assert report.verdict is Verdict.WARN
    f = only(report, "TP-OVERFIT")
    assert f.evidence["best_step"] == 16 and f.evidence["best_checkpoint_exists"] is True
    assert "checkpoint-16 exists beside the log" in f.message
    (rel,) = f.related
    best = _entry_at(path, rel.location.span)
    assert best["step"] == 16 and "eval_loss" in best
    last = _entry_at(path, f.location.span)
    assert last["step"] == 160 and "eval_loss" in last


def test_nan_loss_run_fails_at_the_first_nan_entry():
    path = HF_RUNS / "nan_loss" / "trainer_state.json"
    report = judge(path)
    assert report.verdict is Verdict.FAIL
    f = only(report, "TP-NAN")
    assert f.evidence["first_step"] == 39
    entry = _entry_at(path, f.location.span)
    assert entry["step"] == 39 and math.isnan(entry["loss"])
    run = read_trainer_state(path)
    loss = run.series[LOSS]
    first_nan = next(i for i, v in enumerate(loss.values) if math.isnan(v))
    assert loss.steps[first_nan] == 39 and all(math.isfinite(v) for v in loss.values[:first_nan])


def test_shuffled_labels_run_is_dead():
    report = judge(HF_RUNS / "shuffled_labels" / "trainer_state.json")
    assert report.verdict is Verdict.FAIL
    assert only(report, "TP-DEAD-RUN").level is Level.FAIL


def test_doctor_judges_a_run_folder_once_with_its_checkpoint_copies_as_sources():
    root = HF_RUNS / "healthy"
    outcome = doctor([root], Config())
    args, report = outcome.reports  # training_args.bin is walked as a pickle, then the run
    assert args.artefact.path == str(root / "checkpoint-100" / "training_args.bin")
    assert args.verdict is Verdict.PASS and args.findings == ()
    assert report.verdict is Verdict.PASS
    assert report.artefact.path == str(root / "trainer_state.json")
    assert report.artefact.sources == (str(root / "trainer_state.json"),
                                       str(root / "checkpoint-100" / "trainer_state.json"),
                                       str(root / "checkpoint-200" / "trainer_state.json"))
    assert str(root / "checkpoint-100" / "training_args.bin") not in {n.path for n in outcome.passed_over}
    assert outcome.not_judged == ()


def test_doctor_over_the_overfit_run_lists_all_twenty_checkpoint_copies():
    outcome = doctor([HF_RUNS / "overfit"], Config())
    (report,) = outcome.reports
    assert len(report.artefact.sources) == 21
    assert only(report, "TP-OVERFIT").evidence["best_step"] == 16


def test_doctor_never_unpickles_training_args(monkeypatch):
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("pickle used on a run folder")

    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(pickle, "Unpickler", refuse)
    outcome = doctor([HF_RUNS / "healthy"], Config())
    assert len(outcome.reports) == 2
    assert outcome.reports[0].artefact.path.endswith("training_args.bin")


def test_doctor_opens_training_args_only_to_walk_it(monkeypatch):
    """training_args.bin is a pickle: it is walked (opened for reading, its opcodes
    decoded), never unpickled — every pickle of a run folder is walked or named."""
    opened: list[str] = []
    real_io_open, real_os_open = io.open, os.open

    def watch_io_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        if str(file).endswith("training_args.bin"):
            opened.append(str(file))
        return real_io_open(file, *args, **kwargs)

    def watch_os_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        if str(file).endswith("training_args.bin"):
            opened.append(str(file))
        return real_os_open(file, *args, **kwargs)

    monkeypatch.setattr(io, "open", watch_io_open)
    monkeypatch.setattr(builtins, "open", watch_io_open)
    monkeypatch.setattr(os, "open", watch_os_open)
    monkeypatch.setattr(pickle, "load", None)
    monkeypatch.setattr(pickle, "loads", None)
    outcome = doctor([HF_RUNS / "healthy"], Config())
    assert not any(n.path.endswith("training_args.bin") for n in outcome.passed_over)
    assert opened and all(p.endswith("checkpoint-100/training_args.bin") for p in opened)
    assert outcome.reports[0].verdict is Verdict.PASS


# --- metric readers ------------------------------------------------------------------------

def _line_spans(run: Run) -> list[tuple[int, int]]:
    rs = run.record_spans
    return list(zip(rs.start_lines, rs.end_lines))


def test_wandb_export_reads_slash_names_and_the_underscore_step():
    path = LOGS / "wandb_export.jsonl"
    run = read_metrics_jsonl(path)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    loss = run.series[LOSS]
    assert loss.source_name == "train/loss"
    assert loss.steps == tuple(r["_step"] for r in rows if "train/loss" in r)
    assert loss.values == tuple(r["train/loss"] for r in rows if "train/loss" in r)
    assert run.series[EVAL_LOSS].source_name == "eval/loss"
    assert run.series[EVAL_LOSS].steps == tuple(r["_step"] for r in rows if "eval/loss" in r)
    assert run.series[LR].source_name == "train/learning_rate"
    assert run.series[GRAD_NORM].source_name == "train/grad_norm"
    assert run.series[EPOCH].source_name == "train/epoch"
    assert {"_runtime", "_timestamp", "eval/runtime"} <= set(run.unmapped)
    # One record per line; the eval row of step 4 is on its own line.
    assert _line_spans(run) == [(i, i) for i in range(len(rows))]
    i = run.series[EVAL_LOSS].records[0]
    assert run.record_spans.span(i).start_line == line_with(path, '"_step": 4,')
    assert judge(path).verdict is Verdict.PASS


def test_wandb_rows_prefer_the_trainer_global_step_over_the_underscore_step(tmp_path):
    path = tmp_path / "history.jsonl"
    rows = [{"_step": i, "train/global_step": 50 * (i + 1), "train/loss": 2.0 - 0.1 * i} for i in range(5)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert read_metrics_jsonl(path).series[LOSS].steps == (50, 100, 150, 200, 250)


def test_jsonl_with_global_step(tmp_path):
    path = tmp_path / "log.jsonl"
    rows = [{"global_step": 8 * (i + 1), "loss": 1.0 + 1 / (i + 1), "lr": 1e-4} for i in range(6)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = read_metrics_jsonl(path)
    assert run.series[LOSS].steps == (8, 16, 24, 32, 40, 48)
    assert run.series[LR].source_name == "lr"


def test_jsonl_lines_that_are_not_objects_are_read_past_and_noted(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text('{"step": 1, "loss": 2.0}\nnot json\n{"step": 2, "loss": 1.9}\n[1, 2]\n'
                    '{"step": 3, "loss": 1.8}\n{"step": 4, "loss": "oops"}\n{"step": 5, "loss": 1.7}\n')
    run = read_metrics_jsonl(path)
    assert run.series[LOSS].steps == (1, 2, 3, 5)
    assert _line_spans(run) == [(0, 0), (2, 2), (4, 4), (5, 5), (6, 6)]
    report = judge(path)
    f = only(report, "TP-SKIPPED-RECORDS")
    assert f.level is Level.INFO and f.evidence == {"count": 2}
    assert report.verdict is Verdict.NOT_CHECKED and report.reason.startswith(
        "too short to judge the loss curve: 4 finite loss points")


def test_lightning_csvlogger_rows_fill_only_their_own_columns():
    path = LOGS / "lightning_csvlogger_metrics.csv"
    run = read_metrics_csv(path)
    loss = run.series[LOSS]
    assert loss.source_name == "train_loss_step"
    assert loss.steps == (9, 19, 29, 39, 49, 59, 69, 79, 89)
    assert loss.values[:3] == (2.312, 2.1045, 1.9873)
    ev = run.series[EVAL_LOSS]
    assert ev.source_name == "val_loss"
    assert ev.steps == (29, 59, 89) and ev.values == (1.9511, 1.7012, 1.6235)
    lr = run.series[LR]
    assert lr.source_name == "lr-AdamW"
    assert lr.steps == (0, 20, 40, 60) and lr.values == (0.001, 0.001, 0.0008, 0.0006)
    assert run.series[EPOCH].source_name == "epoch"
    # The per-epoch view of the train loss is its own series (trend rules judge it).
    assert run.series[LOSS_EPOCH].source_name == "train_loss_epoch"
    assert run.unmapped == ()
    # Positions are the file's lines (the header is line 0).
    span = run.record_spans.span
    assert span(loss.records[1]).start_line == line_with(path, ",19,,2.1045,,")
    assert span(ev.records[0]).start_line == line_with(path, ",,,1.9511")
    assert span(lr.records[2]).start_line == line_with(path, ",40,0.0008,")
    assert span(loss.records[1]).end_char == len(",19,,2.1045,,") + 1
    # 9 step losses falling steadily: enough for the trend test at their own noise (7 is the
    # floor, rules/_views.py), so the curve is judged, and the PASS says what ran.
    report = judge(path)
    assert report.verdict is Verdict.PASS
    assert {c.group for c in report.checks if c.ran} >= {"TP-DEAD-RUN", "TP-DIVERGE", "TP-FLAT"}


def test_keras_csvlogger_uses_the_epoch_as_the_step():
    path = LOGS / "keras_csvlogger.csv"
    run = read_metrics_csv(path)
    loss = run.series[LOSS]
    assert loss.steps == (0, 1, 2, 3, 4, 5)
    assert loss.values[0] == 2.3025851249694824
    assert run.series[EVAL_LOSS].values[-1] == 1.5514538288116455
    assert EPOCH not in run.series  # the epoch is the step here, not a second series
    assert _line_spans(run) == [(i, i) for i in range(1, 7)]
    assert judge(path).verdict is Verdict.NOT_CHECKED  # 6 epochs: too short for the trend checks


@pytest.mark.parametrize("indent", [2, None], ids=["pretty", "one-line"])
def test_json_array_of_records_keeps_each_element_position(tmp_path, indent):
    records = [{"step": 10 * (i + 1), "loss": round(2.0 - 0.1 * i, 2)} for i in range(8)]
    records[5]["loss"] = math.nan
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps(records, indent=indent))
    run = read_metrics_json_array(path)
    text = path.read_text()
    if indent is None:
        expected, pos = [], 0
        for r in records:
            start = text.index(json.dumps(r), pos)
            pos = start + len(json.dumps(r))
            expected.append(Span(0, start, 0, pos))
    else:
        lines = text.splitlines()
        starts = [i for i, line in enumerate(lines) if line == "  {"]
        ends = [i for i, line in enumerate(lines) if line in ("  }", "  },")]
        expected = [Span(s, 2, e, 3) for s, e in zip(starts, ends, strict=True)]
    assert _spans(run) == expected
    report = judge(path)
    assert report.artefact.format == "metrics-json"
    f = only(report, "TP-NAN")
    assert f.location.span == expected[5]
    assert f.evidence["first_step"] == 60


def test_csv_with_a_quoted_comma(tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_text('step,loss,note\n10,2.0,"warm, restart"\n20,1.8,plain\n30,1.6,"a, b, c"\n')
    run = read_metrics_csv(path)
    assert run.series[LOSS].values == (2.0, 1.8, 1.6)
    assert run.unmapped == ("note",)
    assert run.notes == ()
    assert _line_spans(run) == [(1, 1), (2, 2), (3, 3)]
    assert run.record_spans.span(0).end_char == len('10,2.0,"warm, restart"')


def test_csv_record_with_a_quoted_newline_starts_on_its_first_line(tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_text('step,loss,note\n10,2.0,plain\n20,1.8,"two\nlines"\n\n30,1.6,plain\n')
    run = read_metrics_csv(path)
    assert run.series[LOSS].steps == (10, 20, 30)
    assert _line_spans(run) == [(1, 1), (2, 3), (5, 5)]  # line 4 is blank
    assert run.record_spans.span(1).end_char == len('lines"')


@pytest.mark.parametrize("name, text", [
    ("metrics.csv", "step,accuracy,f1\n1,0.5,0.4\n2,0.6,0.5\n"),
    ("metrics.jsonl", '{"step": 1, "accuracy": 0.5, "f1": 0.4}\n{"step": 2, "accuracy": 0.6, "f1": 0.5}\n'),
])
def test_a_layout_without_a_loss_is_not_checked_and_names_its_columns(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    report = judge(path)
    assert report.verdict is Verdict.NOT_CHECKED
    assert report.reason == (f"{path}: no loss column to judge (columns seen: accuracy, f1, step); map one with "
                             '`[tool.trainproof] columns = {loss = "NAME"}` (or eval_loss = ...) or `--column loss=NAME`')
    assert ids(report) == ["TP-NOT-CHECKED"]


def test_the_committed_nan_fixture_fails_at_step_40():
    path = LOGS / "nan_at_step_40.jsonl"
    report = judge(path)
    f = only(report, "TP-NAN")
    assert start_line(f) == line_with(path, '"step": 40,') == 3
    assert f.evidence == {"first_step": 40, "count": 7, "points": 10}
    assert only(report, "TP-NAN-GRAD").evidence == {"first_step": 40, "streak": 7, "at_end": True}


def test_readers_accept_a_copy_outside_the_repository(tmp_path):
    # Positions and verdicts do not depend on where the file lives.
    copy = tmp_path / "run" / "trainer_state.json"
    copy.parent.mkdir()
    shutil.copy(HF_RUNS / "lr_zero" / "trainer_state.json", copy)
    report = judge(copy)
    original = judge(HF_RUNS / "lr_zero" / "trainer_state.json")
    assert only(report, "TP-ZERO-LR").location.span == only(original, "TP-ZERO-LR").location.span
    # Without the run's config.json the uniform-guess check says why it could not run.
    assert any(c.group == "TP-LOSS-ABOVE-UNIFORM" and not c.ran for c in report.checks)
