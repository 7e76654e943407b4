"""Training stdout captured to a file (readers/stdout_log.py) and the fp16 loss-scale rules
(rules/loss_scale.py).

The HF Trainer's lines come from the real Trainer printing to a captured stdout (the
fixtures' tiny-Trainer recipes, fixtures/hf_runs/make_hf_runs.py); the sick-curve tests
print dicts the way transformers' PrinterCallback does (`print({k: f"{v:.4g}"})`, checked
against the real Trainer's output by the first test). DeepSpeed's loss-scaler lines are
written by DeepSpeed 0.19.8's own DynamicLossScaler between the dicts transformers'
PrinterCallback prints (fixtures/writers/stack_logs.py, from .venv/writers: tests/writers.py).
Megatron and nanoGPT are not installed here: their lines are made in the shape of their
writers' f-strings (megatron/training/training.py training_log, nanoGPT train.py).
"""

from __future__ import annotations

import contextlib
import io
import math
import sys
from pathlib import Path

import pytest

from curves import N, SICK, healthy
from conftest import ids, judge, only, write_jsonl
from writers import write_with
from trainproof_lsp.core.config import Config
from trainproof_lsp.core.model import EPOCH, EVAL_LOSS, GRAD_NORM, LOSS, LOSS_SCALE, LR, STEP_TIME, Level, Verdict
from trainproof_lsp.judge.engine import doctor, read_run
from trainproof_lsp.readers.detect import detect

ROOT = Path(__file__).resolve().parents[1]

# What a captured stdout holds besides the log lines: a tqdm bar redrawn with CRs, warnings.
NOISE = ["Loading checkpoint shards: 100%|##########| 2/2 [00:01<00:00,  1.20it/s]",
         "UserWarning: torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly."]


def hf_line(loss: float, i: int) -> str:
    # transformers' PrinterCallback: floats as f"{v:.4g}" strings, the dict's repr printed.
    logs = {"loss": loss, "grad_norm": 1.0, "learning_rate": 2e-5, "epoch": i / 40}
    return str({k: f"{v:.4g}" for k, v in logs.items()})


def hf_text(curve: list[float]) -> str:
    lines = list(NOISE)
    for i, v in enumerate(curve):
        lines.append(f"\r {i}%|#  | {i}/{len(curve)} [00:01<00:10]\r" + hf_line(v, i))
    return "\n".join(lines) + "\n"


def twin(tmp_path: Path, curve: list[float]):
    rows = [{"step": i + 1, "loss": v, "lr": 2e-5} for i, v in enumerate(curve)]
    return judge(write_jsonl(tmp_path, rows, "plain.jsonl"))


# --- the real HF Trainer ------------------------------------------------------------------

@pytest.fixture(scope="module")
def trainer_logs(tmp_path_factory) -> dict[str, Path]:
    """The fixtures' tiny-Trainer runs, their stdout captured to `<recipe>.log`."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    sys.path.insert(0, str(ROOT / "fixtures" / "hf_runs"))
    try:
        import make_hf_runs as recipe
    finally:
        sys.path.remove(str(ROOT / "fixtures" / "hf_runs"))
    from transformers import Trainer

    out = tmp_path_factory.mktemp("stdout")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    logs = {}
    try:
        for name in ("healthy", "lr_zero", "lr_hot_diverges", "nan_loss"):
            model, args, train, evals = getattr(recipe, name)()
            args.output_dir = str(out / name)
            args.save_strategy = "no"
            args.load_best_model_at_end = False
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                Trainer(model=model, args=args, train_dataset=train, eval_dataset=evals).train()
            logs[name] = out / f"{name}.log"
            logs[name].write_text(buf.getvalue(), encoding="utf-8")
    finally:
        torch.set_num_threads(threads)
    return logs


def test_the_trainers_printed_dicts_are_the_shape_read(trainer_logs):
    lines = trainer_logs["lr_zero"].read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("{'loss': '") and "'grad_norm': '" in lines[0] and "'epoch': '" in lines[0]
    run = read_run(trainer_logs["lr_zero"], detect(trainer_logs["lr_zero"], trainer_logs["lr_zero"].read_bytes()))
    assert run.format == "stdout-log"
    loss = run.get(LOSS)
    assert loss is not None and list(loss.steps) == list(range(1, len(loss) + 1))  # the dict's ordinal
    assert run.get(EPOCH) is not None and run.get(GRAD_NORM) is not None and run.get(LR) is not None
    assert "the x axis is the Nth HF Trainer loss dict" in run.notes[0][1]


def test_a_healthy_trainer_stdout_passes(trainer_logs):
    report = judge(trainer_logs["healthy"])
    assert report.verdict is Verdict.PASS, [(f.id, f.message) for f in report.findings]
    run = read_run(trainer_logs["healthy"], detect(trainer_logs["healthy"], trainer_logs["healthy"].read_bytes()))
    assert run.get(EVAL_LOSS) is not None and len(run.get(EVAL_LOSS) or ()) == 10


@pytest.mark.parametrize("name,rule", [("lr_zero", "TP-ZERO-LR"), ("lr_hot_diverges", "TP-DIVERGE"),
                                       ("nan_loss", "TP-NAN")])
def test_a_sick_trainer_stdout_fails(trainer_logs, name, rule):
    report = judge(trainer_logs[name])
    assert report.verdict is Verdict.FAIL and rule in ids(report), [(f.id, f.message) for f in report.findings]
    if name == "nan_loss":
        f = only(report, "TP-NAN")
        assert f.location.span is not None
        line = trainer_logs[name].read_text(encoding="utf-8").splitlines()[f.location.span.start_line]
        assert line.startswith("{'loss': 'nan'")
        assert not any(ln.startswith("{'loss': 'nan'")
                       for ln in trainer_logs[name].read_text(encoding="utf-8").splitlines()[:f.location.span.start_line])


# --- HF dicts in a noisy capture ---------------------------------------------------------

def test_hf_dicts_after_progress_bars_are_read_and_other_lines_counted(tmp_path):
    log = tmp_path / "nohup.out"
    log.write_text(hf_text(healthy()), encoding="utf-8")
    assert detect(log, log.read_bytes()[:65536]).format == "stdout-log"
    report = judge(log)
    assert report.verdict is Verdict.PASS
    note = only(report, "TP-SKIPPED-RECORDS").message
    assert f"read {N} training-log line(s) ({N} HF Trainer dict line(s)); 2 other line(s) passed over" in note
    assert "first at line 1" in note


@pytest.mark.parametrize("case", sorted(SICK))
def test_a_sick_hf_stdout_fails_by_the_same_rules(tmp_path, case):
    curve, rule = SICK[case]
    log = tmp_path / "train.log"
    log.write_text(hf_text(curve()), encoding="utf-8")
    report, plain = judge(log), twin(tmp_path, curve())
    assert report.verdict is plain.verdict is Verdict.FAIL
    got = only(report, rule)
    want = only(plain, rule)
    assert got.location.span is not None and want.location.span is not None
    # two noise lines before the first dict: record k is line k + 2
    assert got.location.span.start_line == want.location.span.start_line + len(NOISE)
    if case == "nan":
        # lines end at LF only (core/positions.py): the CR-redrawn bar shares the dict's line
        line = log.read_bytes().decode("utf-8").split("\n")[got.location.span.start_line]
        assert line.endswith("{'loss': 'nan', 'grad_norm': '1', 'learning_rate': '2e-05', 'epoch': '1.75'}")
        assert got.location.span.start_char == line.index("{")


def test_older_trainers_bare_floats_and_bare_nan_are_read(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("{'loss': 2.5, 'learning_rate': 5e-05, 'epoch': 0.01}\n"
                   "{'loss': nan, 'learning_rate': 5e-05, 'epoch': 0.02}\n"
                   "{'eval_loss': 2.4, 'eval_runtime': 0.5, 'epoch': 0.02}\n"
                   "{'train_runtime': 3.1, 'train_loss': 2.4, 'epoch': 0.02}\n", encoding="utf-8")
    run = read_run(log, detect(log, log.read_bytes()))
    loss = run.get(LOSS)
    assert loss is not None and loss.steps == (1, 2) and loss.values[0] == 2.5 and math.isnan(loss.values[1])
    ev = run.get(EVAL_LOSS)
    assert ev is not None and ev.steps == (2,) and ev.values == (2.4,)
    assert "1 other line(s) passed over" in run.notes[0][1]  # the train_runtime summary is no point
    assert only(judge(log), "TP-NAN").location.span.start_line == 1  # type: ignore[union-attr]


def test_a_dict_that_is_code_is_never_run(tmp_path):
    log = tmp_path / "train.log"
    marker = tmp_path / "ran"
    log.write_text(hf_text(healthy()) + f"{{'loss': __import__('pathlib').Path({str(marker)!r}).touch()}}\n",
                   encoding="utf-8")
    report = judge(log)
    assert not marker.exists()
    assert report.verdict is Verdict.PASS
    assert "1 other line(s) passed over" not in only(report, "TP-SKIPPED-RECORDS").message
    assert "3 other line(s) passed over" in only(report, "TP-SKIPPED-RECORDS").message


def test_a_log_without_training_lines_is_passed_over_not_judged(tmp_path):
    (tmp_path / "pip.log").write_text("Collecting torch\nInstalling collected packages: torch\n", encoding="utf-8")
    (tmp_path / "slurm-1234.out").write_text("srun: error: node1: task 0: Exited with exit code 1\n", encoding="utf-8")
    (tmp_path / "train.log").write_text(hf_text(healthy()), encoding="utf-8")
    outcome = doctor([tmp_path], Config())
    reports = {Path(r.artefact.path).name: r for r in outcome.reports}
    assert sorted(reports) == ["slurm-1234.out", "train.log"]
    passed = {Path(p.path).name: p.reason for p in outcome.passed_over}
    assert "pip.log" in passed and "without training-log lines" in passed["pip.log"] and "not a run" in passed["pip.log"]
    assert reports["train.log"].verdict is Verdict.PASS
    # named for what it is, so read whole: none of its lines is a training-log line
    assert reports["slurm-1234.out"].verdict is Verdict.NOT_CHECKED
    assert "no training-log lines in it" in reports["slurm-1234.out"].reason


# --- Megatron and nanoGPT ----------------------------------------------------------------

def megatron_line(it: int, total: int, loss: float, scale: float = 65536.0) -> str:
    return (f" [2024-05-01 10:00:00] iteration {it:8d}/{total:8d} | consumed samples: {it * 64:12d} | "
            f"elapsed time per iteration (ms): 412.3 | learning rate: {1e-4:.6E} | global batch size: 64 | "
            f"lm loss: {loss:.6E} | loss scale: {scale:.1f} | grad norm: 1.234 | "
            f"number of skipped iterations:   0 | number of nan iterations:   0 |")


def megatron_text(curve: list[float]) -> str:
    lines = ["> building GPT model ..."]
    for i, v in enumerate(curve, 1):
        lines.append(megatron_line(i * 10, len(curve) * 10, v))
        if i % 40 == 0:
            lines.append(f" validation loss at iteration {i * 10} | lm loss value: {v * 1.05:.6E} | "
                         f"lm loss PPL: {math.exp(v * 1.05) if math.isfinite(v) else v:.6E} | ")
    return "\n".join(lines) + "\n"


def test_megatron_lines_are_read_with_their_iterations(tmp_path):
    log = tmp_path / "slurm-77.out"
    log.write_text(megatron_text(healthy()), encoding="utf-8")
    run = read_run(log, detect(log, log.read_bytes()))
    loss, ev, scale = run.get(LOSS), run.get(EVAL_LOSS), run.get(LOSS_SCALE)
    assert loss is not None and loss.steps[:2] == (10, 20) and loss.values[0] == pytest.approx(2.5 * 0.98)
    assert ev is not None and ev.steps == (400, 800, 1200)
    assert scale is not None and set(scale.values) == {65536.0}
    assert run.get(STEP_TIME) is not None and run.get(STEP_TIME).values[0] == pytest.approx(0.4123)  # type: ignore[union-attr]
    assert run.meta.max_steps == N * 10
    assert judge(log).verdict is Verdict.PASS


@pytest.mark.parametrize("case", sorted(SICK))
def test_a_sick_megatron_run_fails_by_the_same_rules(tmp_path, case):
    curve, rule = SICK[case]
    log = tmp_path / "train.log"
    log.write_text(megatron_text(curve()), encoding="utf-8")
    report, plain = judge(log), twin(tmp_path, curve())
    assert report.verdict is Verdict.FAIL and rule in ids(report) and rule in ids(plain)
    if case == "nan":
        line = log.read_text(encoding="utf-8").split("\n")[only(report, rule).location.span.start_line]  # type: ignore[union-attr]
        assert "iteration      710/" in line and "lm loss: NAN |" in line


def nanogpt_text(curve: list[float]) -> str:
    lines = ["tokens per iteration will be: 8,192", "step 0: train loss 4.2000, val loss 4.2100"]
    for i, v in enumerate(curve, 1):
        lines.append(f"iter {i}: loss {v:.4f}, time 123.45ms, mfu 12.34%")
        if i % 40 == 0:
            lines.append(f"step {i}: train loss {v:.4f}, val loss {v * 1.05:.4f}")
    return "\n".join(lines) + "\n"


def test_nanogpt_lines_are_read_with_their_iterations(tmp_path):
    log = tmp_path / "train.log"
    log.write_text(nanogpt_text(healthy()), encoding="utf-8")
    run = read_run(log, detect(log, log.read_bytes()))
    loss, ev = run.get(LOSS), run.get(EVAL_LOSS)
    assert loss is not None and loss.steps[:3] == (1, 2, 3) and len(loss) == N
    assert ev is not None and ev.steps == (0, 40, 80, 120) and ev.values[0] == 4.21
    assert "steps as the lines state them" in run.notes[0][1]
    assert judge(log).verdict is Verdict.PASS


@pytest.mark.parametrize("case", sorted(SICK))
def test_a_sick_nanogpt_run_fails_by_the_same_rules(tmp_path, case):
    curve, rule = SICK[case]
    log = tmp_path / "train.log"
    log.write_text(nanogpt_text(curve()), encoding="utf-8")
    report = judge(log)
    assert report.verdict is Verdict.FAIL and rule in ids(report) and rule in ids(twin(tmp_path, curve()))
    if case == "nan":
        line = log.read_text(encoding="utf-8").split("\n")[only(report, rule).location.span.start_line]  # type: ignore[union-attr]
        assert line.startswith("iter 71: loss nan")


# --- DeepSpeed's loss scaler and the loss-scale rules -------------------------------------

def scaler(init_scale: int, overflows: list[bool], **kw: int) -> dict[str, object]:
    """A healthy HF run whose fp16 loss scaler is stepped through `overflows` after its
    fifth dict (update_scale(True) logs one OVERFLOW line; growth after `scale_window`
    clean steps logs none)."""
    return {"losses": healthy(), "init_scale": init_scale, "min_scale": 1, "overflows_after": 4,
            "overflows": overflows, **kw}


DS_RUNS = {
    "settles": scaler(65536, [True] * 5),  # 2^16 -> 2^11: start-up overflows
    "collapse": scaler(128, [True] * 4),  # 128 -> 8
    "three_falls": scaler(64, [True] * 3),
    "stays_above": scaler(256, [True] * 4),  # ends at 16
    # 128 -> 8, two clean steps grow it to 16 (no line), then 16 -> 8: one fall since
    "grows_between": scaler(128, [True] * 4 + [False, False, True], scale_window=1),
    "minimum": scaler(16, [True] * 5),  # 16 -> 1, then the scaler raises at its minimum
    "hysteresis": scaler(128, [True] * 3, delayed_shift=2),
}


@pytest.fixture(scope="module")
def ds_logs(tmp_path_factory) -> dict[str, Path]:
    out = write_with("deepspeed", tmp_path_factory.mktemp("deepspeed"), DS_RUNS)
    return {name: out / name / "train.log" for name in DS_RUNS}


def overflow_lines(log: Path) -> list[int]:
    return [i for i, ln in enumerate(log.read_text(encoding="utf-8").splitlines()) if "[deepspeed] OVERFLOW!" in ln]


def test_deepspeeds_own_overflow_lines_are_the_shape_read(ds_logs):
    lines = ds_logs["collapse"].read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("{'loss': '") and lines[5].endswith(
        "[INFO] [loss_scaler.py:266:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. "
        "Attempted loss scale: 128, reducing to 64")
    run = read_run(ds_logs["collapse"], detect(ds_logs["collapse"], ds_logs["collapse"].read_bytes()))
    # each line its attempted scale, then the one it reduced to
    assert run.format == "stdout-log"
    assert run.get(LOSS_SCALE).values == (128, 64, 64, 32, 32, 16, 16, 8)  # type: ignore[union-attr]


def test_start_up_overflows_settling_high_are_not_a_collapse(ds_logs):
    report = judge(ds_logs["settles"])
    assert report.verdict is Verdict.PASS and "TP-LOSS-SCALE-COLLAPSE" not in ids(report)
    assert any(c.group == "TP-LOSS-SCALE-COLLAPSE" and c.ran for c in report.checks)


def test_a_scale_halving_to_its_floor_warns_at_the_first_fall(ds_logs):
    log = ds_logs["collapse"]
    report = judge(log)
    assert report.verdict is Verdict.WARN
    f = only(report, "TP-LOSS-SCALE-COLLAPSE")
    assert f.level is Level.WARN
    assert f.message == ("loss scale fell 4 times in a row, from 128 to 8, with no growth between; "
                         "limits: 4 falls in a row ending at 8 or lower")
    falls = overflow_lines(log)
    assert falls == [5, 6, 7, 8]  # after the fifth dict, as written
    assert f.location.span is not None and f.location.span.start_line == falls[0]
    assert f.related[0].location.span is not None and f.related[0].location.span.start_line == falls[-1]
    assert f.evidence["falls"] == 4 and f.evidence["to_scale"] == 8.0


@pytest.mark.parametrize("name,why", [
    ("three_falls", "three falls are fewer than the limit"),
    ("stays_above", "four falls ending at 16 stay above the limit"),
    ("grows_between", "a growth (8 -> 16) breaks the streak: one fall since"),
])
def test_the_collapse_limits_each_side(ds_logs, name, why):
    report = judge(ds_logs[name])
    assert "TP-LOSS-SCALE-COLLAPSE" not in ids(report), why
    assert report.verdict is Verdict.PASS, why


def test_the_scaler_at_its_minimum_fails_on_its_line(ds_logs):
    log = ds_logs["minimum"]
    report = judge(log)
    assert report.verdict is Verdict.FAIL
    f = only(report, "TP-LOSS-SCALE-MIN")
    lines = log.read_text(encoding="utf-8").splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("Exception: Current loss scale already at minimum"))
    assert f.location.span is not None and f.location.span.start_line == at
    assert "(the last loss scale stated before it: 1)" in f.message
    assert "TP-LOSS-SCALE-COLLAPSE" in ids(report)


def test_a_hysteresis_overflow_is_read_as_no_fall(ds_logs):
    log = ds_logs["hysteresis"]
    assert "but hysteresis is 2. Reducing hysteresis to 1" in log.read_text(encoding="utf-8")
    run = read_run(log, detect(log, log.read_bytes()))
    assert run.get(LOSS_SCALE).values == (128, 128, 64, 64, 32)  # type: ignore[union-attr]


# --- watch: a captured stdout tailed as it grows ------------------------------------------------

@pytest.mark.parametrize("case", ["healthy", "nan"])
@pytest.mark.parametrize("writer", ["hf", "megatron", "nanogpt"])
def test_watch_tails_a_growing_stdout_as_epoch_reads_it(tmp_path, writer, case):
    from growing import same_findings, watch_growing, watched_report

    curve = healthy() if case == "healthy" else SICK[case][0]()
    text = {"hf": hf_text, "megatron": megatron_text, "nanogpt": nanogpt_text}[writer](curve)
    dest = tmp_path / "train.log"
    w = watch_growing(text.encode("utf-8"), dest, 31)  # cuts inside lines and inside a CR-redrawn bar
    (watched,) = w.logs.values()
    assert type(watched.tailer).__name__ == "_TextTailer"
    assert watched.tailer.lineno == text.count("\n")  # every line read once, as it was completed
    report, whole = watched_report(w), judge(dest)
    assert same_findings(report, whole)
    assert report.verdict is (Verdict.PASS if case == "healthy" else Verdict.FAIL)


def test_watch_reads_a_last_line_without_its_newline_when_settled(tmp_path):
    from growing import same_findings, watch_growing, watched_report

    text = nanogpt_text(SICK["nan"][0]()).rstrip("\n")  # the run died before its last newline
    dest = tmp_path / "train.log"
    w = watch_growing(text.encode("utf-8"), dest, 7)
    report, whole = watched_report(w), judge(dest)
    assert same_findings(report, whole) and report.verdict is Verdict.FAIL
    (watched,) = w.logs.values()
    assert watched.tailer.held == text.rsplit("\n", 1)[1].encode("utf-8")  # kept, never fed twice
