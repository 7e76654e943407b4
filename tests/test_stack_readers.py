"""Logs that fine-tuning stacks write beside (or instead of) trainer_state.json, read as the
runs they are: LLaMA-Factory's trainer_log.jsonl, ms-swift's logging.jsonl, torchtune's
DiskLogger text files.

Every fixture here is written by the stack's own writer code (fixtures/writers/stack_logs.py:
LLaMA-Factory 0.9.5's LogCallback, ms-swift 4.6.0's logging callback, torchtune 0.6.1's
DiskLogger), run in a subprocess from .venv/writers (tests/writers.py): skipped with the
reason when they are not installed, a failure under TP_WRITERS=required (CI). The hand-made
lines left below are marked: the older ms-swift key and lines cut to test a reader's edges.
"""

from __future__ import annotations

import shutil
import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from curves import N, SICK, healthy
from conftest import ids, judge, write_jsonl
from writers import write_with
from trainproof_lsp.core.config import Config
from trainproof_lsp.core.model import LOSS, LR, STEP_TIME, THROUGHPUT, Verdict
from trainproof_lsp.judge.compare import compare
from trainproof_lsp.judge.engine import doctor
from trainproof_lsp.readers.detect import detect



def plain_twin(folder: Path, losses: list[float]) -> Path:
    """The same curve as plain metric JSONL: the rules the other formats are judged by."""
    rows = [{"step": 10 * (i + 1), "loss": v, "learning_rate": 2e-5} for i, v in enumerate(losses)]
    return write_jsonl(folder, rows, "plain.jsonl")


def finding_keys(report: Any) -> list[tuple[str, str]]:
    """The verdict-making findings (an INFO on a series the twin has not, e.g. throughput, aside)."""
    return sorted((f.id, f.level.value) for f in report.findings if f.level.value in ("FAIL", "WARN"))


# --- LLaMA-Factory ---------------------------------------------------------------------------

CURVES = {"healthy": healthy, **{name: curve for name, (curve, _rule) in SICK.items()}}


@pytest.fixture(scope="module")
def lf_runs(tmp_path_factory) -> Path:
    """Output folders as LLaMA-Factory leaves them: trainer_log.jsonl written by its
    LogCallback, trainer_state.json by transformers' TrainerState (one with a checkpoint)."""
    runs: dict[str, dict[str, Any]] = {name: {"losses": curve()} for name, curve in CURVES.items()}
    runs["healthy_ckpt"] = {"losses": healthy(), "checkpoint_at": 600}
    runs["healthy2"] = {"losses": healthy()}
    return write_with("llamafactory", tmp_path_factory.mktemp("llamafactory"), runs)


def llamafactory_folder(runs: Path, name: str, dest: Path) -> Path:
    """A copy of one written folder (a test may judge it beside files of its own)."""
    shutil.copytree(runs / name, dest)
    return dest


def test_llamafactory_log_is_read_as_a_run_with_its_steps(tmp_path, lf_runs):
    out = llamafactory_folder(lf_runs, "healthy", tmp_path / "out")
    log = out / "trainer_log.jsonl"
    first = json.loads(log.read_text(encoding="utf-8").splitlines()[0])
    assert first["current_steps"] == 10 and first["total_steps"] == 10 * N and "lr" in first
    assert detect(log, log.read_bytes()).format == "llamafactory-log"
    report = judge(log)
    assert report.verdict is Verdict.PASS, [(f.id, f.message) for f in report.findings]
    assert report.artefact.format == "llamafactory-log"
    from trainproof_lsp.judge.engine import read_run
    run = read_run(log, detect(log, log.read_bytes()))
    loss = run.get(LOSS)
    assert loss is not None and len(loss) == N and loss.steps[0] == 10 and loss.steps[-1] == 10 * N
    assert run.get(LR) is not None and len(run.get(LR) or ()) == N


def test_doctor_on_a_llamafactory_folder_is_one_run_whichever_file_is_read(tmp_path, lf_runs):
    out = llamafactory_folder(lf_runs, "healthy_ckpt", tmp_path / "out")
    outcome = doctor([out], Config())
    metrics = [r for r in outcome.reports if r.artefact.kind == "metrics"]
    assert len(metrics) == 1, [(r.artefact.path, r.artefact.format) for r in outcome.reports]
    (report,) = metrics
    assert report.verdict is Verdict.PASS
    assert set(report.artefact.sources) == {str(out / "trainer_state.json"), str(out / "trainer_log.jsonl"),
                                            str(out / "checkpoint-600" / "trainer_state.json")}
    assert str(out / "all_results.json") in {n.path for n in outcome.passed_over}
    # the two readers of the one run agree
    by_state, by_log = judge(out / "trainer_state.json"), judge(out / "trainer_log.jsonl")
    assert by_state.verdict is by_log.verdict is Verdict.PASS
    assert finding_keys(by_state) == finding_keys(by_log)


@pytest.mark.parametrize("case", sorted(SICK))
def test_a_sick_llamafactory_run_fails_by_the_same_rules_from_either_file(tmp_path, lf_runs, case):
    curve, rule = SICK[case]
    out = llamafactory_folder(lf_runs, case, tmp_path / "out")
    by_log, by_state = judge(out / "trainer_log.jsonl"), judge(out / "trainer_state.json")
    twin = judge(plain_twin(tmp_path, curve()))
    assert by_log.verdict is by_state.verdict is twin.verdict is Verdict.FAIL
    assert rule in ids(by_log)
    assert finding_keys(by_log) == finding_keys(twin) == finding_keys(by_state)
    # the finding cites the log's own line: one line a record, as the twin's
    got = next(f for f in by_log.findings if f.id == rule)
    want = next(f for f in twin.findings if f.id == rule)
    assert got.location.span is not None and want.location.span is not None
    assert got.location.span.start_line == want.location.span.start_line
    # the record cited is the point's own: line k holds the (k+1)th logged step
    line = (out / "trainer_log.jsonl").read_text(encoding="utf-8").splitlines()[got.location.span.start_line]
    assert json.loads(line)["current_steps"] == 10 * (want.location.span.start_line + 1)
    if case == "nan":
        assert json.loads(line)["current_steps"] == 710 and "NaN" in line
    outcome = doctor([out], Config())
    assert [r.verdict for r in outcome.reports if r.artefact.kind == "metrics"] == [Verdict.FAIL]


def test_a_llamafactory_folder_is_a_compare_baseline(tmp_path, lf_runs):
    base = llamafactory_folder(lf_runs, "healthy", tmp_path / "base")
    run = llamafactory_folder(lf_runs, "healthy2", tmp_path / "run")
    outcome = compare(base, [run], Config())
    assert all("holds" not in r.artefact.path for r in outcome.reports)
    assert not any("holds" in (f.message or "") for r in outcome.reports for f in r.findings), \
        [(f.id, f.message) for r in outcome.reports for f in r.findings]
    assert outcome.worst_verdict is Verdict.PASS, [(r.artefact.path, r.verdict, [(f.id, f.message) for f in r.findings])
                                    for r in outcome.reports]


# --- ms-swift -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def swift_runs(tmp_path_factory) -> Path:
    """logging.jsonl as ms-swift's ProgressCallbackNew writes it (add_train_message's
    N/M step, times and speed after the Trainer's logs, rounded to 8 places)."""
    runs = {name: {"losses": curve()} for name, curve in CURVES.items()}
    return write_with("swift", tmp_path_factory.mktemp("swift"), runs)


def swift_lines(losses: list[float]) -> list[dict[str, Any]]:
    """Hand-made: logging.jsonl in the shape of ms-swift releases before 3.x's
    `train_speed(s/it)`, with `train_speed(iter/s)` and the `memory(GiB)` a GPU run adds
    (the real writer, run here on CPU, writes neither)."""
    n = len(losses)
    rows: list[dict[str, Any]] = []
    for i, loss in enumerate(losses):
        step = 5 * (i + 1)
        rows.append({"loss": loss if math.isnan(loss) else round(loss, 8), "grad_norm": 1.3,
                     "learning_rate": round(1e-4 * (1 - i / n), 8), "memory(GiB)": 17.61,
                     "epoch": round(step / (5 * n), 8), "global_step/max_steps": f"{step}/{5 * n}",
                     "percentage": f"{100 * step / (5 * n):.2f}%", "elapsed_time": f"{2 * step}s",
                     "remaining_time": f"{2 * (5 * n - step)}s", "train_speed(iter/s)": 0.5})
    return rows


def test_swift_log_is_read_with_its_n_of_m_step(swift_runs):
    log = swift_runs / "healthy" / "logging.jsonl"
    first = json.loads(log.read_text(encoding="utf-8").splitlines()[0])
    assert first["global_step/max_steps"] == f"5/{5 * N}" and "train_speed(s/it)" in first
    assert detect(log, log.read_bytes()).format == "swift-log"
    report = judge(log)
    assert report.verdict is Verdict.PASS, [(f.id, f.message) for f in report.findings]
    from trainproof_lsp.judge.engine import read_run
    run = read_run(log, detect(log, log.read_bytes()))
    loss = run.get(LOSS)
    assert loss is not None and len(loss) == N and list(loss.steps[:2]) == [5, 10]
    assert run.get(STEP_TIME) is not None and run.get(LR) is not None
    assert run.meta.max_steps == 5 * N


def test_an_older_swift_log_with_iterations_a_second_and_memory_is_read(tmp_path):
    log = write_jsonl(tmp_path, swift_lines(healthy()), "logging.jsonl")
    assert detect(log, log.read_bytes()).format == "swift-log"
    assert judge(log).verdict is Verdict.PASS
    from trainproof_lsp.judge.engine import read_run
    run = read_run(log, detect(log, log.read_bytes()))
    assert run.get(THROUGHPUT) is not None and "memory(GiB)" in run.unmapped


@pytest.mark.parametrize("case", sorted(SICK))
def test_a_sick_swift_run_fails_by_the_same_rules(tmp_path, swift_runs, case):
    curve, rule = SICK[case]
    log = swift_runs / case / "logging.jsonl"
    report, twin = judge(log), judge(plain_twin(tmp_path, curve()))
    assert report.verdict is twin.verdict is Verdict.FAIL
    assert rule in ids(report) and finding_keys(report) == finding_keys(twin)
    got = next(f for f in report.findings if f.id == rule)
    want = next(f for f in twin.findings if f.id == rule)
    assert got.location.span is not None and want.location.span is not None
    assert got.location.span.start_line == want.location.span.start_line
    line = json.loads(log.read_text(encoding="utf-8").splitlines()[got.location.span.start_line])
    assert line["global_step/max_steps"] == f"{5 * (want.location.span.start_line + 1)}/{5 * N}"
    if case == "nan":
        assert line["global_step/max_steps"] == f"355/{5 * N}" and math.isnan(line["loss"])


# --- torchtune ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def torchtune_runs(tmp_path_factory) -> Path:
    """DiskLogger's log_<unix time>.txt, with the payload torchtune's single-device recipes log."""
    runs = {name: {"losses": curve()} for name, curve in CURVES.items()}
    return write_with("torchtune", tmp_path_factory.mktemp("torchtune"), runs)


def torchtune_log(runs: Path, name: str) -> Path:
    (log,) = (runs / name).glob("log_*.txt")
    return log


def test_torchtune_log_is_read_as_a_run(torchtune_runs):
    log = torchtune_log(torchtune_runs, "healthy")
    assert log.read_text(encoding="utf-8").startswith("Step 1 | loss:2.")
    assert detect(log, log.read_bytes()).format == "torchtune-log"
    report = judge(log)
    assert report.verdict is Verdict.PASS, [(f.id, f.message) for f in report.findings]
    from trainproof_lsp.judge.engine import read_run
    run = read_run(log, detect(log, log.read_bytes()))
    loss = run.get(LOSS)
    assert loss is not None and len(loss) == N and loss.steps[:2] == (1, 2)
    assert run.get(THROUGHPUT) is not None and run.get(LR) is not None


@pytest.mark.parametrize("case", sorted(SICK))
def test_a_sick_torchtune_run_fails_by_the_same_rules(tmp_path, torchtune_runs, case):
    curve, rule = SICK[case]
    log = torchtune_log(torchtune_runs, case)
    rows = [{"step": i + 1, "loss": v, "lr": 2e-5} for i, v in enumerate(curve())]
    report, twin = judge(log), judge(write_jsonl(tmp_path, rows, "plain.jsonl"))
    assert report.verdict is twin.verdict is Verdict.FAIL
    assert rule in ids(report)
    got = next(f for f in report.findings if f.id == rule)
    want = next(f for f in twin.findings if f.id == rule)
    assert got.location.span is not None and want.location.span is not None
    assert got.location.span.start_line == want.location.span.start_line
    line = log.read_text(encoding="utf-8").splitlines()[got.location.span.start_line]
    assert line.startswith(f"Step {want.location.span.start_line + 1} | loss:")
    if case == "nan":
        assert line.startswith("Step 71 | loss:nan lr:2e-05 ")


# --- watch: each stack's log tailed as it grows -------------------------------------------

@pytest.mark.parametrize("case", ["healthy", "nan", "diverging"])
@pytest.mark.parametrize("stack, tailer", [("llamafactory", "_LineTailer"), ("swift", "_LineTailer"),
                                           ("torchtune", "_TextTailer")])
def test_watch_tails_a_stacks_log_as_epoch_reads_it(tmp_path, request, stack, tailer, case):
    from growing import same_findings, watch_growing, watched_report

    runs = request.getfixturevalue({"llamafactory": "lf_runs", "swift": "swift_runs",
                                    "torchtune": "torchtune_runs"}[stack])
    src = (torchtune_log(runs, case) if stack == "torchtune"
           else runs / case / ("trainer_log.jsonl" if stack == "llamafactory" else "logging.jsonl"))
    dest = tmp_path / "out" / src.name
    w = watch_growing(src.read_bytes(), dest, 29)  # cuts inside lines: each held until its newline
    (watched,) = w.logs.values()
    assert type(watched.tailer).__name__ == tailer  # read incrementally, not again whole at each poll
    assert watched.tailer.live.records == N
    whole = judge(dest)
    assert same_findings(watched_report(w), whole)
    assert whole.verdict is (Verdict.PASS if case == "healthy" else Verdict.FAIL)
    if case != "healthy":
        assert SICK[case][1] in ids(watched_report(w))


def test_the_stacks_logs_give_their_planned_steps(tmp_path, lf_runs, swift_runs):
    """Each line states the run's planned steps (LLaMA-Factory `total_steps`, the M of
    ms-swift's "N/M"): compare aligns runs of different lengths on its fraction."""
    from trainproof_lsp.judge.engine import read_run

    lf = lf_runs / "healthy" / "trainer_log.jsonl"
    sw = swift_runs / "healthy" / "logging.jsonl"
    assert read_run(lf, detect(lf, lf.read_bytes())).meta.max_steps == 10 * N
    assert read_run(sw, detect(sw, sw.read_bytes())).meta.max_steps == 5 * N
    odd = write_jsonl(tmp_path, [{"global_step/max_steps": "5/x", "loss": 1.0}] * 3, "logging2.jsonl")
    assert read_run(odd, detect(odd, odd.read_bytes())).meta.max_steps is None


# --- what the stacks save of their arguments ---------------------------------------------

def test_a_swift_classifiers_args_json_gives_its_classes(tmp_path):
    """ms-swift's args.json (BaseArguments.save_args) names num_labels for a seq_cls run:
    the loss bound is ln(3), not a vocabulary's; a language model's names no size."""
    from trainproof_lsp.judge.engine import read_run

    runs = write_with("swift", tmp_path, {
        "cls": {"losses": healthy(), "args": {"task_type": "seq_cls", "num_labels": 3, "max_steps": 5 * N}},
        "lm": {"losses": healthy(), "args": {"task_type": "causal_lm", "num_labels": None, "max_steps": 5 * N}}})
    for name, want in (("cls", 3), ("lm", None)):
        assert json.loads((runs / name / "args.json").read_text(encoding="utf-8"))["task_type"] in ("seq_cls", "causal_lm")
        log = runs / name / "logging.jsonl"
        meta = read_run(log, detect(log, log.read_bytes())).meta
        assert meta.vocab_size == want, name
        assert meta.vocab_source == (str(runs / name / "args.json") if want else None)


def test_a_torchtune_config_above_its_logs_folder_gives_its_classes(tmp_path):
    """torchtune's save_config writes torchtune_config.yaml in output_dir; DiskLogger logs
    to output_dir/logs as the recipes set it."""
    from trainproof_lsp.judge.engine import read_run

    config = {"model": {"_component_": "torchtune.models.llama3_2.llama3_2_1b", "num_classes": 4},
              "dtype": "bf16", "max_steps_per_epoch": 10}
    runs = write_with("torchtune", tmp_path, {"cls": {"losses": healthy(), "config": config, "log_dir": "logs"}})
    (log,) = (runs / "cls" / "logs").glob("log_*.txt")
    assert "num_classes: 4" in (runs / "cls" / "torchtune_config.yaml").read_text(encoding="utf-8")
    meta = read_run(log, detect(log, log.read_bytes())).meta
    assert meta.vocab_size == 4 and meta.vocab_source == str(runs / "cls" / "torchtune_config.yaml")


@pytest.mark.parametrize("text", ['{"task_type": "seq_cls", "num_labels": true}', '{"task_type": "seq_cls", "num_labels": 1}',
                                  '["seq_cls", 3]', '{"task_type": "seq_cls", "num_labels": 3', '{"num_labels": 3}'])
def test_an_args_json_that_names_no_classifier_gives_none(tmp_path, text):
    from trainproof_lsp.readers.adjacent import classes_from_swift_args

    (tmp_path / "args.json").write_text(text, encoding="utf-8")
    assert classes_from_swift_args(tmp_path / "args.json") is None
