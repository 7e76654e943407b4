"""Training stdout captured to a file (readers/stdout_log.py) and the fp16 loss-scale rules
(rules/loss_scale.py).

The HF Trainer's lines come from the real Trainer printing to a captured stdout (the
fixtures' tiny-Trainer recipes, fixtures/hf_runs/make_hf_runs.py); the sick-curve tests
print dicts the way transformers' PrinterCallback does (`print({k: f"{v:.4g}"})`, checked
against the real Trainer's output by the first test). Megatron, nanoGPT and DeepSpeed are
not installed here: their lines are made in the shape of their writers' f-strings
(megatron/training/training.py training_log, nanoGPT train.py, deepspeed
runtime/fp16/loss_scaler.py update_scale).
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

def ds_overflow(tried: int, after: int) -> str:
    # deepspeed/runtime/fp16/loss_scaler.py DynamicLossScaler.update_scale, through its logger
    return (f"[2024-05-01 10:00:00,000] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 "
            f"Skipping step. Attempted loss scale: {tried}, reducing to {after}")


def with_overflows(scales: list[tuple[int, int]], tail: str = "") -> str:
    """A healthy HF run with DeepSpeed overflow lines after its first dicts."""
    curve = healthy()
    lines = [hf_line(v, i) for i, v in enumerate(curve[:5])]
    lines += [ds_overflow(a, b) for a, b in scales]
    lines += [hf_line(v, i) for i, v in enumerate(curve[5:], 5)]
    return "\n".join(lines) + "\n" + tail


def halvings(start: int, count: int) -> list[tuple[int, int]]:
    return [(start >> k, start >> (k + 1)) for k in range(count)]


def test_start_up_overflows_settling_high_are_not_a_collapse(tmp_path):
    log = tmp_path / "train.log"
    log.write_text(with_overflows(halvings(65536, 5)), encoding="utf-8")  # 2^16 -> 2^11
    report = judge(log)
    assert report.verdict is Verdict.PASS and "TP-LOSS-SCALE-COLLAPSE" not in ids(report)
    assert any(c.group == "TP-LOSS-SCALE-COLLAPSE" and c.ran for c in report.checks)


def test_a_scale_halving_to_its_floor_warns_at_the_first_fall(tmp_path):
    log = tmp_path / "train.log"
    log.write_text(with_overflows(halvings(128, 4)), encoding="utf-8")  # 128 -> 8
    report = judge(log)
    assert report.verdict is Verdict.WARN
    f = only(report, "TP-LOSS-SCALE-COLLAPSE")
    assert f.level is Level.WARN
    assert f.message == ("loss scale fell 4 times in a row, from 128 to 8, with no growth between; "
                         "limits: 4 falls in a row ending at 8 or lower")
    assert f.location.span is not None and f.location.span.start_line == 5
    assert f.related[0].location.span is not None and f.related[0].location.span.start_line == 8
    assert f.evidence["falls"] == 4 and f.evidence["to_scale"] == 8.0


@pytest.mark.parametrize("scales,why", [
    (halvings(64, 3), "three falls are fewer than the limit"),
    (halvings(256, 4), "four falls ending at 16 stay above the limit"),
    (halvings(128, 4) + [(16, 8)], "a growth (8 -> 16) breaks the streak: one fall since"),
])
def test_the_collapse_limits_each_side(tmp_path, scales, why):
    log = tmp_path / "train.log"
    log.write_text(with_overflows(scales), encoding="utf-8")
    assert "TP-LOSS-SCALE-COLLAPSE" not in ids(judge(log)), why


def test_the_scaler_at_its_minimum_fails_on_its_line(tmp_path):
    tail = ("Traceback (most recent call last):\n"
            "Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.\n")
    log = tmp_path / "nohup.out"
    log.write_text(with_overflows(halvings(16, 4), tail), encoding="utf-8")
    report = judge(log)
    assert report.verdict is Verdict.FAIL
    f = only(report, "TP-LOSS-SCALE-MIN")
    assert f.location.span is not None and f.location.span.start_line == 5 + 4 + N - 5 + 1
    assert "(the last loss scale stated before it: 1)" in f.message
    assert "TP-LOSS-SCALE-COLLAPSE" in ids(report)


def test_a_hysteresis_overflow_is_read_as_no_fall(tmp_path):
    lines = halvings(128, 2) + [(32, 16)]
    text = with_overflows(lines).replace(
        ds_overflow(64, 32) + "\n",
        ds_overflow(64, 32) + "\n[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 32, but "
                              "hysteresis is 2. Reducing hysteresis to 1\n")
    log = tmp_path / "train.log"
    log.write_text(text, encoding="utf-8")
    run = read_run(log, detect(log, log.read_bytes()))
    assert run.get(LOSS_SCALE).values == (128, 64, 64, 32, 32, 32, 16)  # type: ignore[union-attr]


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
