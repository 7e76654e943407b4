"""The live verdict is the offline verdict: whenever a log is quiet (a poll that finds
nothing new, a stall, the end, Ctrl-C, `on_train_end`), what `watch` and the training
callbacks publish is exactly what `epoch` says about the same bytes; while the log
grows, the published full evaluation leaves out at most `IncrementalJudge.lag_bound`
records.

Hypothesis draws the logs (real shapes: a metric JSONL, Lightning's metrics.csv with
validation rows and resume-like step jumps, HF's trainer_state.json rewritten at each
checkpoint; runs that PASS, WARN and FAIL offline) and the append schedule (chunks cut
anywhere, inside a line or a UTF-8 sequence too, pauses, a stall, the ending). `watch`
runs its real loop in-process, with an injected clock and a `sleep` that plays the
schedule; a few real `trainproof-lsp watch` processes close the file."""

from __future__ import annotations

import io
import json
import math
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainproof_lsp.core.config import Config
from trainproof_lsp.guardian.hf import _HFMethods
from trainproof_lsp.guardian.incremental import Schedule, finding_key
from trainproof_lsp.guardian.lightning import _LightningMethods
from trainproof_lsp.guardian.watch import Watch, WatchOptions
from trainproof_lsp.judge.engine import epoch
from trainproof_lsp.core.model import Report

ROOT = Path(__file__).resolve().parents[1]
# Examples per property (each a whole watched run): enough to meet every kind, shape,
# ending and window many times over; TP_PROPERTY_EXAMPLES raises it for a long hunt.
EXAMPLES = int(os.environ.get("TP_PROPERTY_EXAMPLES", "40"))

# --- real-shaped logs ----------------------------------------------------------------------

SHAPES = ("pass", "spike", "diverge", "dead")
# What `epoch` says about each shape's whole log (checked in test_the_shapes_*): PASS,
# WARN and FAIL, and a FAIL only the whole history shows (TP-DEAD-RUN on a run that
# never learns: no tail window sees it).
EXPECTED = {"pass": "PASS", "spike": "WARN", "diverge": "FAIL", "dead": "FAIL"}
# The rules behind the worst findings (a divergence two thirds of the way in also leaves
# the run no lower at its end than at its start: TP-DEAD-RUN, beside or instead of it).
WORST = {"pass": set(), "spike": {"TP-LOSS-SPIKE"}, "diverge": {"TP-DIVERGE", "TP-DEAD-RUN"},
         "dead": {"TP-DEAD-RUN"}}


def healthy(i: int) -> float:
    return 0.8 + 3.0 / math.sqrt(1 + i / 10) * (1 + 0.02 * ((i * 7) % 5 - 2))


def loss(shape: str, i: int, n: int) -> float:
    if shape == "pass":
        value = healthy(i)
    elif shape == "spike":  # one spike the run recovers from: TP-LOSS-SPIKE (WARN)
        value = healthy(i) * (6.0 if i == n // 2 else 1.0)
    elif shape == "diverge":  # TP-DIVERGE
        value = healthy(i) * (1 + max(0, i - n * 2 // 3) / 5)
    else:  # "dead": noisy, never better than at the start: TP-DEAD-RUN
        value = 4.16 * (1 + 0.03 * ((i * 7) % 5 - 2)) + 0.0005 * i
    return round(value, 6)


def steps(n: int, jumps: str) -> list[int]:
    """Logged steps: 1, 2, ...; "fwd" jumps ahead a third of the way in (a run resumed
    from a late checkpoint, as the 197,035-step metrics.csv did); "back" also rewinds
    two thirds of the way in (resumed from an earlier checkpoint: TP-STEP-ORDER)."""
    out, s = [], 0
    for i in range(n):
        s += 1
        if jumps in ("fwd", "back") and i == n // 3:
            s += 196_000
        if jumps == "back" and i == 2 * n // 3:
            s -= n // 6
        out.append(s)
    return out


@dataclass(frozen=True, kw_only=True)
class Log:
    kind: str  # "jsonl" | "csv" | "trainer_state"
    shape: str
    n: int
    jumps: str = ""

    @property
    def name(self) -> str:
        return {"jsonl": "metrics.jsonl", "csv": "metrics.csv", "trainer_state": "trainer_state.json"}[self.kind]

    def entries(self) -> list[dict[str, Any]]:
        """The logged points, as HF's log_history entries (train rows, and an eval entry
        every 40 records)."""
        out: list[dict[str, Any]] = []
        for i, s in enumerate(steps(self.n, self.jumps)):
            out.append({"epoch": round(i / 100, 4), "grad_norm": round(1.0 + (i % 7) / 10, 3),
                        "learning_rate": 1e-3, "loss": loss(self.shape, i, self.n), "step": s})
            if i % 40 == 39:
                out.append({"epoch": round(i / 100, 4), "eval_loss": round(loss("pass", i, self.n) * 1.1, 6),
                            "step": s})
        return out

    def text(self) -> bytes:
        """The whole log as its writer leaves it (append-only kinds)."""
        if self.kind == "jsonl":
            return "".join(json.dumps(e) + "\n" for e in self.entries()).encode()
        if self.kind == "csv":  # Lightning's CSVLogger: sorted columns, blanks where nothing was logged
            rows = ["epoch,lr-AdamW,step,train_loss_step,val_loss"]
            for e in self.entries():
                if "loss" in e:
                    rows.append(f"{int(e['epoch'])},{e['learning_rate']},{e['step']},{e['loss']},")
                else:
                    rows.append(f"{int(e['epoch'])},,{e['step']},,{e['eval_loss']}")
            return ("\n".join(rows) + "\n").encode()
        raise ValueError(self.kind)

    def state(self, k: int) -> bytes:
        """trainer_state.json as HF writes it at a checkpoint after k entries (indent 2)."""
        history = self.entries()[:k]
        return json.dumps({"global_step": history[-1]["step"] if history else 0, "logging_steps": 1,
                           "log_history": history}, indent=2).encode()


def verdict(report: Report | None) -> tuple[str, Any]:
    """What must agree: the verdict and its FAIL/WARN rule ids (the messages name the
    points, which agree too when the records do; they are compared where exact)."""
    if report is None:
        return ("NOT-CHECKED", ())
    return finding_key(report)


def offline(path: Path) -> Report:
    (report,) = epoch(path, Config()).reports
    return report


@pytest.mark.parametrize("kind", ["jsonl", "csv", "trainer_state"])
@pytest.mark.parametrize("shape", SHAPES)
def test_the_shapes_give_pass_warn_and_fail_offline(tmp_path, kind, shape):
    log = Log(kind=kind, shape=shape, n=300, jumps="fwd")
    path = tmp_path / log.name
    path.write_bytes(log.state(len(log.entries())) if kind == "trainer_state" else log.text())
    report = offline(path)
    assert report.verdict.value == EXPECTED[shape], report
    worst = {f.id for f in report.findings if f.level.value == report.verdict.value}
    assert worst <= WORST[shape] and bool(worst) == (shape != "pass"), report


# --- watch, in-process ---------------------------------------------------------------------

@st.composite
def schedules(draw: Any, kinds: tuple[str, ...] = ("jsonl", "csv", "trainer_state")) -> tuple[Log, list[Any], str]:
    """(log, actions, ending). Actions: ("write", bytes-end) appends up to that byte (or
    rewrites trainer_state.json, possibly cut short); ("wait", seconds) lets polls pass
    with nothing new (a stall when longer than the stall timeout)."""
    kind = draw(st.sampled_from(kinds))
    log = Log(kind=kind, shape=draw(st.sampled_from(SHAPES)), n=draw(st.integers(60, 260)),
              jumps=draw(st.sampled_from(["", "fwd", "back"]) if kind == "csv" else st.sampled_from(["", "fwd"])))
    actions: list[Any] = []
    if kind == "trainer_state":
        total = len(log.entries())
        ks = sorted(set(draw(st.lists(st.integers(1, total), min_size=1, max_size=8))) | {total})
        for k in ks:
            whole = len(log.state(k))
            if draw(st.booleans()):  # caught mid-write: a prefix of the new file first
                actions.append(("state", k, draw(st.integers(1, whole - 1))))
                actions.append(("wait", draw(st.sampled_from([0.5, 1.0, 3.0, 10.0]))))
            actions.append(("state", k, whole))
            if draw(st.booleans()):
                actions.append(("wait", draw(st.sampled_from([0.5, 1.0, 3.0, 10.0]))))
    else:
        size = len(log.text())
        cuts = sorted(set(draw(st.lists(st.integers(1, size), min_size=1, max_size=25))) | {size})
        for end in cuts:
            actions.append(("write", end))
            if draw(st.integers(0, 3)) == 0:
                actions.append(("wait", draw(st.sampled_from([0.5, 1.0, 3.0, 10.0]))))
    ending = draw(st.sampled_from(["ctrl-c-in-wait", "ctrl-c-in-poll", "end"]))
    if draw(st.booleans()):  # the writer's last bytes never come: the log ends mid-line
        actions = actions[:-1] or actions
    return log, actions, ending


class Player:
    """Plays a schedule as the watch's `sleep`: each call is the time between two polls,
    in which the writer does the next action. After a poll that followed an action-less
    wait (a quiet poll), the published verdict must be epoch's on the file."""

    def __init__(self, log: Log, path: Path, actions: list[Any], ending: str) -> None:
        self.log, self.path, self.actions, self.ending = log, path, list(actions), ending
        self.now = 0.0
        self.watch: Watch | None = None
        self.quiet_checks = 0
        self.lag_checks = 0
        self.last_was_quiet = False
        self.done = False

    def clock(self) -> float:
        return self.now

    def apply(self, action: Any) -> None:
        if action[0] == "write":
            data = self.log.text()[: action[1]]
            with self.path.open("ab") as fh:
                fh.write(data[self.path.stat().st_size if self.path.exists() else 0:])
        else:  # ("state", k, cut): HF rewrites the file whole
            self.path.write_bytes(self.log.state(action[1])[: action[2]])

    def check(self) -> None:
        w = self.watch
        assert w is not None
        watched = w.logs.get(str(self.path))
        if self.last_was_quiet:
            assert verdict(watched.report if watched else None) == verdict(offline(self.path)), \
                (self.now, self.path.read_bytes()[-200:])
            self.quiet_checks += 1
        if watched is not None and watched.judge.judged is not None and not watched.error:
            records = watched.tailer.live.records
            assert watched.judge.judged[0] >= records - watched.judge.lag_bound(records)
            self.lag_checks += 1

    def sleep(self, seconds: float) -> None:
        self.check()
        self.now += seconds
        if self.actions:
            action = self.actions.pop(0)
            if action[0] == "wait":
                self.now += action[1]
                self.last_was_quiet = True
            else:
                self.apply(action)
                self.last_was_quiet = False
            return
        self.last_was_quiet = True
        if self.done:
            assert self.watch is not None
            if self.ending == "end":
                self.now += 1e9  # past the watch's max_seconds: it ends after this poll
            elif self.ending == "ctrl-c-in-wait":
                raise KeyboardInterrupt  # what the handler raises in the wait
            elif self.ending == "ctrl-c-in-poll":
                # Ctrl-C lands while the next poll runs: noted, the loop ends after it.
                self.watch.interrupts.requested = True
        self.done = True


def run_watch(tmp_path: Path, log: Log, actions: list[Any], ending: str, schedule: Schedule) -> tuple[Watch, Player]:
    path = tmp_path / log.name
    player = Player(log, path, actions, ending)
    player.apply(player.actions.pop(0))  # the log exists with its first bytes: watch starts
    out = io.StringIO()
    w = Watch(path, Config(), WatchOptions(interval=1.0, stall_timeout=5.0, schedule=schedule),
              out=out, err=out, clock=player.clock, sleep=player.sleep)
    player.watch = w
    w.run(max_seconds=10_000.0 if ending == "end" else None)
    return w, player


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                    HealthCheck.too_slow])
@given(plan=schedules(), window=st.sampled_from([16, 48, 128]))
def test_watch_final_and_quiet_verdicts_are_epochs_on_the_same_bytes(tmp_path_factory, plan, window):
    log, actions, ending = plan
    tmp = tmp_path_factory.mktemp("watch")
    w, player = run_watch(tmp, log, actions, ending, Schedule(tail_window=window))
    path = tmp / log.name
    outcome = w.outcome()
    (final,) = outcome.reports or (None,)
    assert verdict(final) == verdict(offline(path)), (ending, path.read_bytes()[-300:])
    assert player.quiet_checks >= 1


def test_a_dead_run_appended_fast_is_fail_at_the_stall_not_pass(tmp_path):
    """The issue's run: a resumed Lightning metrics.csv that `epoch` FAILs (TP-DEAD-RUN),
    appended 100 rows at a time; no tail window shows it, and the watch said PASS to the
    end. Now the stall settles it: FAIL, and --until-fail's FAIL is confirmed."""
    log = Log(kind="csv", shape="dead", n=1100, jumps="fwd")
    text = log.text()
    lines = text.splitlines(keepends=True)
    path = tmp_path / log.name
    actions: list[Any] = [("write", len(b"".join(lines[:end]))) for end in range(1, len(lines), 100)]
    actions += [("write", len(text)), ("wait", 10.0)]
    player = Player(log, path, actions, "end")
    player.apply(player.actions.pop(0))
    out = io.StringIO()
    w = Watch(path, Config(), WatchOptions(interval=1.0, stall_timeout=5.0, until_fail=True, confirm=10_000),
              out=out, err=out, clock=player.clock, sleep=player.sleep)
    player.watch = w
    outcome = w.run(max_seconds=60.0)
    (report,) = outcome.reports
    assert report.verdict.value == "FAIL" and "TP-DEAD-RUN" in {f.id for f in report.findings}
    assert w.failed is not None and "confirmed (the log stalled)" in out.getvalue()
    assert verdict(report) == verdict(offline(path))


# --- the callbacks -------------------------------------------------------------------------

@st.composite
def callback_runs(draw: Any) -> tuple[Log, list[int], str, int | None]:
    """(log, the entries after which a checkpoint is saved, policy, where training is
    cut short by an exception/Ctrl-C: None for a normal end)."""
    log = Log(kind="trainer_state", shape=draw(st.sampled_from(SHAPES)), n=draw(st.integers(40, 260)),
              jumps=draw(st.sampled_from(["", "fwd"])))
    total = len(log.entries())
    saves = sorted(set(draw(st.lists(st.integers(1, total), max_size=5))))
    policy = draw(st.sampled_from(["warn", "stop_on_fail"]))
    cut = draw(st.one_of(st.none(), st.integers(1, total)))
    return log, saves, policy, cut


def _hf_log(entry: dict[str, Any]) -> dict[str, Any]:
    """The on_log dict of a log_history entry (HF adds "step" to it in the history)."""
    return {k: v for k, v in entry.items() if k != "step"}


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(run=callback_runs(), window=st.sampled_from([16, 128]))
def test_hf_callback_verdicts_at_checkpoints_and_the_end_are_epochs_on_trainer_state(tmp_path_factory, run,
                                                                                     window):
    log, saves, policy, _ = run
    tmp = tmp_path_factory.mktemp("hf")
    cb = _HFMethods(policy=policy, config=Config(), schedule=Schedule(tail_window=window), echo=False)
    args = SimpleNamespace(output_dir=str(tmp))
    state = SimpleNamespace(global_step=0, is_world_process_zero=True, log_history=[])
    control = SimpleNamespace(should_training_stop=False)
    cb.on_train_begin(args, state, control, model=None)
    path = tmp / "trainer_state.json"
    for k, entry in enumerate(log.entries(), 1):
        state.global_step = entry["step"]
        state.log_history.append(entry)
        cb.on_log(args, state, control, logs=_hf_log(entry))
        if k in saves:  # a checkpoint: HF writes trainer_state.json, then calls on_save
            path.write_bytes(log.state(k))
            cb.on_save(args, state, control)
            assert verdict(cb.guardian.report) == verdict(offline(path)), k
        if control.should_training_stop:
            break
    cb.on_train_end(args, state, control)
    path.write_bytes(log.state(len(state.log_history)))
    assert verdict(cb.guardian.report) == verdict(offline(path))
    if cb.stop is not None:  # a stop is a FAIL on the whole log as it stood
        assert offline(path).verdict.value == "FAIL"


class _Optimizer:
    def __init__(self, lr: float) -> None:
        self.param_groups = [{"lr": lr}]


class _Trainer(SimpleNamespace):
    """What the Lightning callback reads of a trainer."""


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(run=callback_runs(), window=st.sampled_from([16, 128]))
def test_lightning_callback_final_verdict_is_epochs_on_its_metrics_csv(tmp_path_factory, run, window):
    log, _, policy, cut = run
    log = Log(kind="csv", shape=log.shape, n=log.n, jumps=log.jumps)
    tmp = tmp_path_factory.mktemp("pl")
    cb = _LightningMethods(policy=policy, config=Config(), schedule=Schedule(tail_window=window),
                           every_n_steps=1, echo=False)
    trainer = _Trainer(log_dir=str(tmp), is_global_zero=True, global_step=0, log_every_n_steps=1,
                       callback_metrics={}, optimizers=[_Optimizer(1e-3)], sanity_checking=False, should_stop=False)
    cb.on_fit_start(trainer, None)
    written = []  # the entries CSVLogger has written: the callback saw each as it was logged
    for k, entry in enumerate(log.entries(), 1):
        trainer.global_step = entry["step"]
        if "loss" in entry:
            trainer.callback_metrics = {"train_loss_step": entry["loss"]}
            trainer.optimizers[0].param_groups[0]["lr"] = entry["learning_rate"]
            cb.on_train_batch_end(trainer, None, None, None, k)
        else:
            trainer.callback_metrics = {"val_loss": entry["eval_loss"]}
            cb.on_validation_end(trainer, None)
        written.append(entry)
        if trainer.should_stop:
            break
        if cut is not None and k == cut:  # Ctrl-C (or an error) ends the fit here
            cb.on_exception(trainer, None, KeyboardInterrupt())
            break
    else:
        cb.on_train_end(trainer, None)
    if trainer.should_stop:
        cb.on_train_end(trainer, None)
    partial = Log(kind="csv", shape=log.shape, n=log.n, jumps=log.jumps)
    path = tmp / "metrics.csv"
    path.write_bytes(csv_of(partial, written))
    assert verdict(cb.guardian.report) == verdict(offline(path))


def csv_of(log: Log, entries: list[dict[str, Any]]) -> bytes:
    full = log.text().decode().splitlines(keepends=True)
    return "".join(full[: 1 + len(entries)]).encode()


# --- real processes ------------------------------------------------------------------------

DEADLINE = 120.0  # a safety net only: each case ends in about a second


@pytest.mark.parametrize("shape,kind", [("dead", "csv"), ("spike", "jsonl"), ("pass", "csv")])
def test_a_real_watch_ended_by_sigint_prints_epochs_verdict(tmp_path, shape, kind):
    log = Log(kind=kind, shape=shape, n=400, jumps="fwd")
    path = tmp_path / log.name
    text = log.text()
    path.write_bytes(text[:1000])
    proc = subprocess.Popen([sys.executable, "-m", "trainproof_lsp", "watch", str(path), "--interval", "0.05"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    first = proc.stdout.readline()  # "watching ...": the handler is in place
    assert "watching" in first, first
    with path.open("ab") as fh:  # the rest in pieces cut mid-line, as fast as it goes
        for i in range(1000, len(text), 777):
            fh.write(text[i:i + 777])
            fh.flush()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=DEADLINE)
    final = [x for x in out.splitlines() if x.startswith("== ")]
    expect = offline(path)
    assert final == [f"== {path}: {expect.verdict.value}" + (f": {expect.reason}" if expect.reason else "")], out
    assert proc.returncode == {"FAIL": 1, "NOT-CHECKED": 2}.get(expect.verdict.value, 0)
    assert "Traceback" not in err and "stopped (Ctrl-C)" in out
