"""Logs that fine-tuning stacks write beside (or instead of) trainer_state.json, read as the
runs they are: LLaMA-Factory's trainer_log.jsonl, ms-swift's logging.jsonl, torchtune's
DiskLogger text files.

LLaMA-Factory's logs are written by its own LogCallback (the `writers` extra) driven with
transformers' TrainerState; without it those tests are skipped with the reason. ms-swift and
torchtune need their whole stacks to import their writers (modelscope; torchao of their
release): their lines are made here in the shape their writers' source gives
(swift/trainers/patcher.py add_train_message + ProgressCallbackNew.on_log;
torchtune/training/metric_logging.py DiskLogger.log_dict), and when the package is
installed its source is read to check that shape.
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from curves import N, SICK, healthy
from conftest import ids, judge, write_jsonl
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

def llamafactory_folder(out: Path, losses: list[float], *, checkpoint_at: int | None = None) -> Path:
    """An output folder as LLaMA-Factory leaves it: trainer_log.jsonl written by its
    LogCallback, trainer_state.json by transformers' TrainerState, a checkpoint copy."""
    callbacks = pytest.importorskip("llamafactory.train.callbacks",
                                    reason="LLaMA-Factory not installed (pip install -e '.[writers]')")
    from transformers import TrainerControl, TrainerState

    out.mkdir(parents=True, exist_ok=True)
    args = SimpleNamespace(should_save=True, output_dir=str(out), overwrite_output_dir=False)
    state = TrainerState(max_steps=10 * len(losses), logging_steps=10)
    control = TrainerControl()
    cb = callbacks.LogCallback()
    cb.on_train_begin(args, state, control)
    for i, loss in enumerate(losses):
        state.global_step = 10 * (i + 1)
        state.epoch = state.global_step / (10 * len(losses)) * 3
        state.log_history.append({"loss": loss, "grad_norm": 1.0, "learning_rate": 2e-5 * (1 - i / len(losses)),
                                  "epoch": state.epoch, "step": state.global_step})
        cb.on_log(args, state, control)
        if checkpoint_at is not None and state.global_step == checkpoint_at:
            (out / f"checkpoint-{checkpoint_at}").mkdir()
            state.save_to_json(str(out / f"checkpoint-{checkpoint_at}" / "trainer_state.json"))
    cb.on_train_end(args, state, control)  # waits for the writer thread
    state.save_to_json(str(out / "trainer_state.json"))
    (out / "all_results.json").write_text(json.dumps({"epoch": 3.0, "train_loss": 1.2}), encoding="utf-8")
    return out


def test_llamafactory_log_is_read_as_a_run_with_its_steps(tmp_path):
    out = llamafactory_folder(tmp_path / "out", healthy())
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


def test_doctor_on_a_llamafactory_folder_is_one_run_whichever_file_is_read(tmp_path):
    out = llamafactory_folder(tmp_path / "out", healthy(), checkpoint_at=600)
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
def test_a_sick_llamafactory_run_fails_by_the_same_rules_from_either_file(tmp_path, case):
    curve, rule = SICK[case]
    out = llamafactory_folder(tmp_path / "out", curve())
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
    if case == "nan":
        line = (out / "trainer_log.jsonl").read_text(encoding="utf-8").splitlines()[got.location.span.start_line]
        assert json.loads(line)["current_steps"] == 710 and "NaN" in line
    outcome = doctor([out], Config())
    assert [r.verdict for r in outcome.reports if r.artefact.kind == "metrics"] == [Verdict.FAIL]


def test_a_llamafactory_folder_is_a_compare_baseline(tmp_path):
    base = llamafactory_folder(tmp_path / "base", healthy())
    run = llamafactory_folder(tmp_path / "run", healthy())
    outcome = compare(base, [run], Config())
    assert all("holds" not in r.artefact.path for r in outcome.reports)
    assert not any("holds" in (f.message or "") for r in outcome.reports for f in r.findings), \
        [(f.id, f.message) for r in outcome.reports for f in r.findings]
    assert outcome.worst_verdict is Verdict.PASS, [(r.artefact.path, r.verdict, [(f.id, f.message) for f in r.findings])
                                    for r in outcome.reports]


# --- ms-swift -----------------------------------------------------------------------------

def swift_lines(losses: list[float], *, seconds_per_step: bool = False) -> list[dict[str, Any]]:
    """logging.jsonl as ms-swift writes it: the Trainer's logs (rounded to 8 places), then
    add_train_message's progress, time and memory keys."""
    n = len(losses)
    rows: list[dict[str, Any]] = []
    for i, loss in enumerate(losses):
        step = 5 * (i + 1)
        row: dict[str, Any] = {"loss": loss if math.isnan(loss) else round(loss, 8), "grad_norm": 1.3,
                               "learning_rate": round(1e-4 * (1 - i / n), 8), "memory(GiB)": 17.61,
                               "epoch": round(step / (5 * n), 8),
                               "global_step/max_steps": f"{step}/{5 * n}",
                               "percentage": f"{100 * step / (5 * n):.2f}%",
                               "elapsed_time": f"{2 * step}s", "remaining_time": f"{2 * (5 * n - step)}s"}
        if seconds_per_step:
            row["train_speed(s/it)"] = 2.0
        else:
            row["train_speed(iter/s)"] = 0.5
        rows.append(row)
    return rows


def test_swift_line_shape_is_the_writers(tmp_path):
    spec = importlib.util.find_spec("swift")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("ms-swift not installed: the shape is checked against its source when it is")
    source = (Path(list(spec.submodule_search_locations)[0]) / "trainers" / "patcher.py").read_text(encoding="utf-8")
    for key in ("'global_step/max_steps'", "f'{state.global_step}/{state.max_steps}'", "'memory(GiB)'",
                "'elapsed_time'", "'remaining_time'", "'logging.jsonl'"):
        assert key in source, key


@pytest.mark.parametrize("seconds_per_step", [False, True])
def test_swift_log_is_read_with_its_n_of_m_step(tmp_path, seconds_per_step):
    log = write_jsonl(tmp_path, swift_lines(healthy(), seconds_per_step=seconds_per_step), "logging.jsonl")
    assert detect(log, log.read_bytes()).format == "swift-log"
    report = judge(log)
    assert report.verdict is Verdict.PASS, [(f.id, f.message) for f in report.findings]
    from trainproof_lsp.judge.engine import read_run
    run = read_run(log, detect(log, log.read_bytes()))
    loss = run.get(LOSS)
    assert loss is not None and len(loss) == N and list(loss.steps[:2]) == [5, 10]
    assert run.get(STEP_TIME if seconds_per_step else THROUGHPUT) is not None
    assert "memory(GiB)" in run.unmapped


@pytest.mark.parametrize("case", sorted(SICK))
def test_a_sick_swift_run_fails_by_the_same_rules(tmp_path, case):
    curve, rule = SICK[case]
    log = write_jsonl(tmp_path, swift_lines(curve()), "logging.jsonl")
    report, twin = judge(log), judge(plain_twin(tmp_path, curve()))
    assert report.verdict is twin.verdict is Verdict.FAIL
    assert rule in ids(report) and finding_keys(report) == finding_keys(twin)
    got = next(f for f in report.findings if f.id == rule)
    want = next(f for f in twin.findings if f.id == rule)
    assert got.location.span is not None and want.location.span is not None
    assert got.location.span.start_line == want.location.span.start_line


# --- torchtune ---------------------------------------------------------------------------

def torchtune_text(losses: list[float]) -> str:
    """DiskLogger.log_dict's lines: `Step N | ` then `name:value ` per metric, then a newline."""
    out = []
    for i, loss in enumerate(losses):
        payload = {"loss": loss, "lr": 2e-5, "tokens_per_second_per_gpu": 1532.7, "grad_norm": 0.8}
        out.append(f"Step {i + 1} | " + "".join(f"{k}:{v} " for k, v in payload.items()) + "\n")
    return "".join(out)


def test_torchtune_line_shape_is_the_writers():
    spec = importlib.util.find_spec("torchtune")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("torchtune not installed: the shape is checked against its source when it is")
    source = (Path(list(spec.submodule_search_locations)[0]) / "training" / "metric_logging.py").read_text(
        encoding="utf-8")
    for key in ('self._file.write(f"Step {step} | ")', 'self._file.write(f"{name}:{data} ")',
                'filename = f"log_{unix_timestamp}.txt"'):
        assert key in source, key


def test_torchtune_log_is_read_as_a_run(tmp_path):
    log = tmp_path / "log_1700000000.txt"
    log.write_text(torchtune_text(healthy()), encoding="utf-8")
    assert detect(log, log.read_bytes()).format == "torchtune-log"
    report = judge(log)
    assert report.verdict is Verdict.PASS, [(f.id, f.message) for f in report.findings]
    from trainproof_lsp.judge.engine import read_run
    run = read_run(log, detect(log, log.read_bytes()))
    assert len(run.get(LOSS) or ()) == N and run.get(THROUGHPUT) is not None and run.get(LR) is not None


@pytest.mark.parametrize("case", sorted(SICK))
def test_a_sick_torchtune_run_fails_by_the_same_rules(tmp_path, case):
    curve, rule = SICK[case]
    log = tmp_path / "log_1700000000.txt"
    log.write_text(torchtune_text(curve()), encoding="utf-8")
    rows = [{"step": i + 1, "loss": v, "lr": 2e-5} for i, v in enumerate(curve())]
    report, twin = judge(log), judge(write_jsonl(tmp_path, rows, "plain.jsonl"))
    assert report.verdict is twin.verdict is Verdict.FAIL
    assert rule in ids(report)
    got = next(f for f in report.findings if f.id == rule)
    want = next(f for f in twin.findings if f.id == rule)
    assert got.location.span is not None and want.location.span is not None
    assert got.location.span.start_line == want.location.span.start_line
    if case == "nan":
        assert log.read_text(encoding="utf-8").splitlines()[got.location.span.start_line].startswith("Step 71 | loss:nan")


# --- watch: each stack's log tailed as it grows -------------------------------------------

def llamafactory_lines(losses: list[float]) -> list[dict[str, Any]]:
    """trainer_log.jsonl rows in LogCallback.on_log's shape (None values dropped)."""
    n = len(losses)
    return [{"current_steps": 10 * (i + 1), "total_steps": 10 * n, "loss": loss, "lr": 2e-5,
             "epoch": round(3 * (i + 1) / n, 2), "percentage": round(100 * (i + 1) / n, 2),
             "elapsed_time": "0:00:42", "remaining_time": "0:10:00"} for i, loss in enumerate(losses)]


def _stack_log(folder: Path, stack: str, losses: list[float]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if stack == "llamafactory":
        return write_jsonl(folder, llamafactory_lines(losses), "trainer_log.jsonl")
    if stack == "swift":
        return write_jsonl(folder, swift_lines(losses), "logging.jsonl")
    log = folder / "log_1700000000.txt"
    log.write_text(torchtune_text(losses), encoding="utf-8")
    return log


@pytest.mark.parametrize("case", ["healthy", "nan", "diverging"])
@pytest.mark.parametrize("stack, tailer", [("llamafactory", "_LineTailer"), ("swift", "_LineTailer"),
                                           ("torchtune", "_TextTailer")])
def test_watch_tails_a_stacks_log_as_epoch_reads_it(tmp_path, stack, tailer, case):
    from growing import same_findings, watch_growing, watched_report

    losses = healthy() if case == "healthy" else SICK[case][0]()
    src = _stack_log(tmp_path / "src", stack, losses)
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


def test_the_stacks_logs_give_their_planned_steps(tmp_path):
    """Each line states the run's planned steps (LLaMA-Factory `total_steps`, the M of
    ms-swift's "N/M"): compare aligns runs of different lengths on its fraction."""
    from trainproof_lsp.judge.engine import read_run

    lf = write_jsonl(tmp_path, llamafactory_lines(healthy()), "trainer_log.jsonl")
    sw = write_jsonl(tmp_path, swift_lines(healthy()), "logging.jsonl")
    assert read_run(lf, detect(lf, lf.read_bytes())).meta.max_steps == 10 * N
    assert read_run(sw, detect(sw, sw.read_bytes())).meta.max_steps == 5 * N
    odd = write_jsonl(tmp_path, [{"global_step/max_steps": "5/x", "loss": 1.0}] * 3, "logging2.jsonl")
    assert read_run(odd, detect(odd, odd.read_bytes())).meta.max_steps is None
