"""`trainproof-lsp watch`: tails growing logs reading only appended bytes, prints verdict
changes, reports stalls, exits 1 on a confirmed FAIL with --until-fail, and leaves
quietly on Ctrl-C."""

from __future__ import annotations

import io
import json
import math
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from trainproof_lsp.core.config import Config
from trainproof_lsp.judge.engine import judge_event_files, judge_file
from trainproof_lsp.guardian import watch as watch_mod
from trainproof_lsp.guardian.watch import Watch, WatchOptions
from trainproof_lsp.output.render import report_json
from trainproof_lsp.readers.tfevents import (
    encode_file_version_event,
    encode_scalar_event,
    frame_record,
)

ROOT = Path(__file__).resolve().parents[1]


def loss_at(step: int, diverge_at: int | None = None) -> float:
    base = 0.8 + 3.0 / math.sqrt(1 + step / 10) * (1 + 0.02 * ((step * 7) % 5 - 2))
    if diverge_at is not None and step > diverge_at:
        base *= 1 + (step - diverge_at) / 5
    return round(base, 6)


def line(step: int, diverge_at: int | None = None) -> str:
    return json.dumps({"step": step, "loss": loss_at(step, diverge_at), "learning_rate": 1e-3}) + "\n"


# A generous bound for a CLI that should answer in well under a second: only a hung
# watch ever reaches it, and then the test fails instead of hanging the suite.
DEADLINE = 120.0


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Cli:
    """`trainproof-lsp watch ARGS` with its stdout and stderr read by two threads as the
    lines come, so a test waits for what the watch says (an event), not for the clock."""

    def __init__(self, *args: str, pause_at: str = "", ignore_sigint: bool = False,
                 stages: bool = False) -> None:
        env = {**os.environ, "TRAINPROOF_WATCH_STAGES": "1"} if stages else None
        if pause_at or ignore_sigint:
            command = [sys.executable, "-c", CHILD, pause_at or "-", "1" if ignore_sigint else "0", "watch", *args]
        else:
            command = [sys.executable, "-m", "trainproof_lsp", "watch", *args]
        # SIGINT at its default in the child, as a terminal starts a command: a test run that
        # was itself started in the background (`cmd &` in a script) ignores SIGINT, and every
        # child inherits that, so before its handler is in place Python would ignore the
        # signal the test sends. The inherited-ignore case is ignore_sigint's, set explicitly.
        self.proc = subprocess.Popen(command, cwd=ROOT, env=env, preexec_fn=_sigint_default,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: dict[str, list[str]] = {"out": [], "err": []}
        self.changed = threading.Condition()
        self.readers = [threading.Thread(target=self._read, args=(stream, name), daemon=True)
                        for stream, name in ((self.proc.stdout, "out"), (self.proc.stderr, "err"))]
        for t in self.readers:
            t.start()

    def _read(self, stream, name: str) -> None:
        for text in iter(stream.readline, ""):
            with self.changed:
                self.lines[name].append(text)
                self.changed.notify_all()
        with self.changed:
            self.changed.notify_all()

    def wait_for(self, wanted: str, stream: str = "out") -> str:
        """The first line of `stream` holding `wanted`; fails if the watch ends (or
        DEADLINE passes) without saying it."""
        def found() -> str | None:
            return next((x for x in self.lines[stream] if wanted in x), None)

        with self.changed:
            ok = self.changed.wait_for(lambda: found() is not None or not any(t.is_alive() for t in self.readers),
                                       timeout=DEADLINE)
            got = found()
        assert got is not None, f"the watch did not say {wanted!r} (ok={ok}): {self.lines}"
        return got

    def finish(self) -> tuple[int, str, str]:
        """Wait for the watch to exit: (exit code, stdout, stderr)."""
        try:
            code = self.proc.wait(timeout=DEADLINE)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        for t in self.readers:
            t.join(timeout=DEADLINE)
        return code, "".join(self.lines["out"]), "".join(self.lines["err"])


# `trainproof-lsp ARGS...` as `python -m trainproof_lsp` runs it, with two test hooks:
# argv[1], a module name, pauses the start-up just before that module is imported (the
# child says "stage import NAME" and waits for a signal there, with Python's own SIGINT
# handler: the KeyboardInterrupt rises inside that import); argv[2] == "1" starts the
# command with SIGINT ignored, as a shell script's background job (`cmd &`) inherits it.
CHILD = r"""
import os, runpy, signal, sys
pause_at, ignore = sys.argv[1], sys.argv[2] == "1"
if ignore:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # inherited across exec, as from a shell's `&`
    os.execv(sys.executable, [sys.executable, "-m", "trainproof_lsp", *sys.argv[3:]])

class Pause:
    def find_spec(self, name, path=None, target=None):
        if name == pause_at:
            sys.meta_path.remove(self)
            print(f"stage import {name}", file=sys.stderr, flush=True)
            signal.pause()
        return None

sys.meta_path.insert(0, Pause())
sys.argv = ["trainproof-lsp", *sys.argv[3:]]
runpy.run_module("trainproof_lsp", run_name="__main__", alter_sys=True)
"""


CONFIRM = 20  # records a FAIL must stand before --until-fail exits (passed as --confirm)


def test_until_fail_exits_1_once_the_divergence_is_confirmed(tmp_path):
    log = tmp_path / "metrics.jsonl"  # not there yet: the watch is started before training
    # Confirmed by CONFIRM more records, or by the log stalling (when the writer outran the
    # polls and the FAIL was first seen with the last record): either way, exit 1.
    watch = Cli(str(log), "--until-fail", "--interval", "0.1", "--json", "--confirm", str(CONFIRM),
                "--stall-timeout", "1")
    watch.wait_for("waiting for", "err")  # the watch is up: only now does training start
    last = 81 + CONFIRM + 30  # the writer stops here
    with log.open("a", encoding="utf-8") as fh:
        for step in range(1, last + 1):
            text = line(step, diverge_at=80)
            fh.write(text[:7])  # a partial line first: the watcher must wait for the rest
            fh.flush()
            fh.write(text[7:])
            fh.flush()
    code, out, err = watch.finish()
    assert code == 1, err
    assert "confirmed" in err and "exiting" in err and "Traceback" not in err
    events = [json.loads(x) for x in out.splitlines()]
    verdicts = [e for e in events if e["event"] == "verdict"]
    assert verdicts[-1]["verdict"] == "FAIL"
    assert 80 < verdicts[-1]["step"] <= last and {"TP-DIVERGE"} & {f["id"] for f in verdicts[-1]["findings"]}


def test_a_healthy_growing_log_keeps_the_watch_running_and_ctrl_c_ends_it_quietly(tmp_path):
    log = tmp_path / "metrics.jsonl"
    log.write_text(line(1), encoding="utf-8")
    watch = Cli(str(log), "--until-fail", "--interval", "0.1")
    watch.wait_for("watching")  # polling, with its Ctrl-C handling in place
    with log.open("a", encoding="utf-8") as fh:
        for step in range(2, 150):
            fh.write(line(step))
            fh.flush()
    watch.wait_for(": PASS")  # the log was judged...
    assert watch.proc.poll() is None, "a healthy run must not end the watch"  # ...and the watch goes on
    watch.proc.send_signal(signal.SIGINT)
    code, out, err = watch.finish()
    assert code == 0, (out, err)
    assert "Traceback" not in err and "stopped (Ctrl-C)" in out
    assert f"{log}: step" in out and ": PASS" in out and ": FAIL" not in out


def test_a_log_that_does_not_exist_yet_is_waited_for(tmp_path):
    log = tmp_path / "output" / "metrics.jsonl"  # not even its folder yet
    watch = Cli(str(log), "--until-fail", "--interval", "0.1", "--stall-timeout", "1")
    watch.wait_for(f"waiting for {log} to appear")
    assert watch.proc.poll() is None
    log.parent.mkdir()
    log.write_text("".join(line(s, diverge_at=40) for s in range(1, 40 + CONFIRM + 30)), encoding="utf-8")
    code, out, err = watch.finish()
    assert code == 1, (out, err)
    assert f"watching {log}" in out and f"{log}: step" in out and "FAIL" in out
    assert "Traceback" not in err


def test_ctrl_c_while_waiting_for_a_log_exits_2_quietly(tmp_path):
    log = tmp_path / "never.jsonl"
    watch = Cli(str(log), "--interval", "0.1")
    watch.wait_for("waiting for")
    watch.proc.send_signal(signal.SIGINT)
    code, out, err = watch.finish()
    assert code == 2 and "stopped (Ctrl-C)" in out and "no such file or folder" in out, (out, err)
    assert "Traceback" not in err


def test_a_file_that_is_no_log_exits_2_at_once(tmp_path):
    data = tmp_path / "weights.safetensors"
    data.write_bytes(b"\x00" * 16)
    code, out, err = Cli(str(data)).finish()
    assert code == 2 and "NOT-CHECKED" in out and "Traceback" not in err


def _watch(target: Path, **opts) -> tuple[Watch, io.StringIO]:
    out = io.StringIO()
    return Watch(target, Config(), WatchOptions(**opts), out=out, err=out), out


def test_only_appended_bytes_are_read_and_a_partial_line_waits(tmp_path, monkeypatch):
    log = tmp_path / "metrics.jsonl"
    text = "".join(line(s) for s in range(1, 301))
    cut = len(text) - 20
    log.write_text(text[:cut], encoding="utf-8")
    read = []
    real_open = open

    class Counting:
        def __init__(self, fh):
            self.fh = fh

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

        def seek(self, n):
            return self.fh.seek(n)

        def read(self, n=-1):
            data = self.fh.read(n)
            read.append(len(data))
            return data

    monkeypatch.setattr(watch_mod, "open", lambda p, mode="r", *a, **k: Counting(real_open(p, mode, *a, **k)),
                        raising=False)
    w, _ = _watch(log)
    w.poll_once()
    live = w.logs[str(log)].tailer.live
    assert live.records == 299  # the cut last line is held back
    with log.open("a", encoding="utf-8") as fh:
        fh.write(text[cut:])
    w.poll_once()
    w.poll_once()  # nothing new: nothing but the head check is read
    assert live.records == 300
    head_checks = sum(1 for n in read if n <= 256)
    assert sum(read) <= len(text) + 256 * head_checks
    # What was read in pieces is what the reader reads whole: same report, byte for byte.
    whole = judge_file(log, Config())
    assert report_json(w.logs[str(log)].report) == report_json(whole)


def test_csv_rows_match_the_reader_and_a_rewritten_header_is_read_again(tmp_path):
    log = tmp_path / "metrics.csv"
    rows = [f"{s},{loss_at(s)},0.001" for s in range(1, 120)]
    log.write_text("step,train_loss_step,lr-Adam\n" + "\n".join(rows[:60]) + "\n", encoding="utf-8")
    w, _ = _watch(log)
    w.poll_once()
    with log.open("a", encoding="utf-8") as fh:
        fh.write("\n".join(rows[60:]) + "\n")
    w.poll_once()
    assert report_json(w.logs[str(log)].report) == report_json(judge_file(log, Config()))
    # Lightning's CSVLogger rewrites the file with a wider header when a metric appears.
    log.write_text("step,train_loss_step,lr-Adam,val_loss\n" + "\n".join(r + "," for r in rows) + "\n"
                   + f"120,{loss_at(120)},0.001,1.5\n", encoding="utf-8")
    w.poll_once()
    assert report_json(w.logs[str(log)].report) == report_json(judge_file(log, Config()))


def test_trainer_state_is_read_again_only_when_it_changes(tmp_path, monkeypatch):
    state = tmp_path / "checkpoint-10" / "trainer_state.json"
    state.parent.mkdir()

    def write(n: int, folder: Path) -> None:
        folder.mkdir(exist_ok=True)
        hist = [{"step": s, "loss": loss_at(s), "learning_rate": 1e-3} for s in range(1, n + 1)]
        (folder / "trainer_state.json").write_text(json.dumps({"log_history": hist, "logging_steps": 1},
                                                              indent=2), encoding="utf-8")

    write(40, state.parent)
    reads = []
    real = watch_mod.read_trainer_state
    monkeypatch.setattr(watch_mod, "read_trainer_state", lambda p, d: reads.append(p) or real(p, d))
    w, _ = _watch(tmp_path)
    for _ in range(3):
        w.poll_once()
    assert len(reads) == 1
    write(80, tmp_path / "checkpoint-20")  # a newer checkpoint is the live log now
    w.poll_once()
    w.poll_once()
    assert len(reads) == 2 and reads[-1] == tmp_path / "checkpoint-20" / "trainer_state.json"
    assert w.logs[str(tmp_path / "trainer_state.json")].tailer.live.records == 80


def test_event_file_records_are_read_from_the_last_offset(tmp_path):
    path = tmp_path / "events.out.tfevents.1.host"
    records = [frame_record(encode_file_version_event(1000.0))]
    for s in range(1, 200):
        records.append(frame_record(encode_scalar_event("train/loss", s, loss_at(s, diverge_at=150), 1000.0 + s)))
    blob = b"".join(records)
    path.write_bytes(blob[:5000 + 7])  # ends inside a record: a writer mid-flush
    w, _ = _watch(path)
    w.poll_once()
    tail = w.logs[str(path)].tailer
    first = tail.live.records
    assert 0 < first < 199 and tail.offset < 5007
    with path.open("ab") as fh:
        fh.write(blob[5007:])
    w.poll_once()
    assert tail.live.records == 199
    whole = judge_event_files([path], Config())
    got = w.logs[str(path)].report
    assert got.verdict == whole.verdict
    assert [f.id for f in got.findings] == [f.id for f in whole.findings]
    assert [f.location.byte_offset for f in got.findings] == [f.location.byte_offset for f in whole.findings]


def test_a_stalled_log_is_reported_and_so_is_its_growth(tmp_path):
    log = tmp_path / "metrics.jsonl"
    log.write_text("".join(line(s) for s in range(1, 30)), encoding="utf-8")
    now = [0.0]
    out = io.StringIO()
    w = Watch(log, Config(), WatchOptions(stall_timeout=5.0, json=True), out=out, err=io.StringIO(),
              clock=lambda: now[0])
    w.poll_once()
    now[0] = 4.0
    w.poll_once()
    now[0] = 6.0
    w.poll_once()
    now[0] = 60.0
    w.poll_once()  # said once, not on every poll
    with log.open("a", encoding="utf-8") as fh:
        fh.write(line(30))
    w.poll_once()
    events = [json.loads(x) for x in out.getvalue().splitlines()]
    kinds = [e["event"] for e in events]
    assert kinds == ["verdict", "stall", "resume"], kinds
    assert events[1]["seconds"] == 6.0 and events[1]["step"] == 29


def test_a_folder_watch_waits_for_a_log_and_never_reads_its_own_stream(tmp_path):
    (tmp_path / "trainproof-verdict.jsonl").write_text('{"event": "verdict"}\n', encoding="utf-8")
    w, out = _watch(tmp_path)
    w.poll_once()
    assert not w.logs
    (tmp_path / "version_0").mkdir()
    (tmp_path / "version_0" / "metrics.jsonl").write_text(line(1) + line(2), encoding="utf-8")
    w.poll_once()
    assert list(w.logs) == [str(tmp_path / "version_0" / "metrics.jsonl")]
    # Judged as soon as it appears: two points are too short for the trend checks.
    assert "NOT-CHECKED" in out.getvalue() and "2 finite loss points" in out.getvalue()


@pytest.mark.parametrize("garbage", [b"\x00\x01\x02 not a log\n", b"{not json}\n[1, 2]\n"])
def test_garbage_in_a_growing_log_is_read_past_not_a_traceback(tmp_path, garbage):
    log = tmp_path / "metrics.jsonl"
    log.write_bytes(b"".join(line(s).encode() for s in range(1, 20)) + garbage)
    w, out = _watch(log)
    w.poll_once()
    report = w.logs[str(log)].report
    assert report is not None
    # Exactly what the CLI says about the same bytes: NUL bytes make the file NOT-CHECKED,
    # lines that are not JSON objects are read past (TP-SKIPPED-RECORDS).
    assert report_json(report) == report_json(judge_file(log, Config()))
    assert report.verdict.value == ("NOT-CHECKED" if b"\x00" in garbage else "PASS")
    assert "Traceback" not in out.getvalue()


def test_with_until_fail_a_fail_in_a_log_that_stops_growing_is_final(tmp_path):
    log = tmp_path / "metrics.jsonl"
    log.write_text("".join(line(s, diverge_at=60) for s in range(1, 75)), encoding="utf-8")
    now = [0.0]
    w = Watch(log, Config(), WatchOptions(until_fail=True, stall_timeout=5.0, confirm=100), out=io.StringIO(),
              err=io.StringIO(), clock=lambda: now[0])
    w.poll_once()
    assert w.logs[str(log)].report.verdict.value == "FAIL" and w.failed is None  # 100 more records wanted
    now[0] = 6.0
    w.poll_once()  # ...but the log stalled: the FAIL can no longer change
    assert w.failed is not None


def test_json_mode_says_why_a_path_cannot_be_watched(tmp_path):
    data = tmp_path / "weights.safetensors"
    data.write_bytes(b"\x00" * 16)
    code, out, _ = Cli(str(data), "--json").finish()
    event = json.loads(out)
    assert code == 2 and event["event"] == "verdict" and event["verdict"] == "NOT-CHECKED"
    assert str(data) in event["reason"]


def test_a_watch_given_up_before_the_log_appears_says_no_such_file(tmp_path):
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    out = io.StringIO()
    w = Watch(tmp_path / "nope.jsonl", Config(), WatchOptions(interval=1.0), out=out, err=out,
              clock=lambda: now[0], sleep=sleep)
    outcome = w.run(max_seconds=5)
    (report,) = outcome.reports
    assert report.verdict.value == "NOT-CHECKED" and "no such file or folder" in report.reason
    assert out.getvalue().count("waiting for") == 1


def test_tensor_scalars_whose_metadata_came_in_an_earlier_chunk_are_still_read(tmp_path):
    pytest.importorskip("tensorboard")
    pytest.importorskip("numpy")
    from tests.tfevents_writers import (
        DT_FLOAT,
        scalars_metadata,
        tensor_event,
        tensor_proto,
        write_tb_events,
    )

    # TF2's shape: tensor scalars, the `scalars` metadata only on each tag's first event.
    events = [tensor_event(tag, s, 1000.0 + s, tensor_proto(DT_FLOAT, loss_at(s, diverge_at=120) * k, content=False),
                           metadata=scalars_metadata() if s == 1 else None)
              for s in range(1, 160) for tag, k in (("train/loss", 1.0), ("train/grad_norm", 0.5))]
    source = Path(write_tb_events(str(tmp_path / "writer"), events))
    blob = source.read_bytes()
    path = tmp_path / "live" / source.name
    path.parent.mkdir()
    w, _ = _watch(path)
    for cut in (len(blob) // 5, len(blob) // 2 + 3, len(blob)):  # later chunks lack the metadata
        path.write_bytes(blob[:cut])
        w.poll_once()
    got = w.logs[str(path)].report
    whole = judge_event_files([path], Config())
    assert w.logs[str(path)].tailer.live.points() == sum(len(s) for s in
                                                         [*whole_series(path).values()])
    assert [f.id for f in got.findings] == [f.id for f in whole.findings] and got.verdict == whole.verdict


def whole_series(path: Path) -> dict:
    from trainproof_lsp.readers.tensorboard import read_event_files

    run, _ = read_event_files([path])
    return dict(run.series)


def test_an_hf_output_folder_run_is_named_as_doctor_names_it(tmp_path):
    from trainproof_lsp.judge.engine import doctor

    out_dir = tmp_path / "output"
    for n in (10, 20):  # checkpoints only: the top-level trainer_state.json comes at the end
        folder = out_dir / f"checkpoint-{n}"
        folder.mkdir(parents=True)
        hist = [{"step": s, "loss": loss_at(s), "learning_rate": 1e-3} for s in range(1, 2 * n + 1)]
        (folder / "trainer_state.json").write_text(json.dumps({"log_history": hist}, indent=2), encoding="utf-8")
    w, out = _watch(out_dir)
    w.poll_once()
    (report,) = doctor([out_dir], Config()).reports
    name = str(out_dir / "checkpoint-20" / "trainer_state.json")
    assert report.artefact.path == name
    assert out.getvalue().startswith(f"{name}: step 40: PASS")
    assert [r.artefact.path for r in w.outcome().reports] == [name]


# --- SIGINT at every stage of start-up -----------------------------------------------------

# Modules the start-up imports, in order: the command line (imported by the launcher,
# outside cli.main), the engine it loads, the watch (imported inside cli.main).
IMPORT_STAGES = ["trainproof_lsp.cli", "trainproof_lsp.judge.engine", "trainproof_lsp.guardian.watch"]


@pytest.mark.parametrize("module", IMPORT_STAGES)
def test_sigint_while_the_start_up_imports_exits_2_without_a_traceback(tmp_path, module):
    log = tmp_path / "metrics.jsonl"
    log.write_text(line(1), encoding="utf-8")
    watch = Cli(str(log), "--interval", "0.1", pause_at=module)
    watch.wait_for(f"stage import {module}", "err")  # paused just before that import
    watch.proc.send_signal(signal.SIGINT)
    code, out, err = watch.finish()
    assert code == 2, (out, err)
    assert err.strip().splitlines()[-1] == "trainproof-lsp: interrupted" and "Traceback" not in err, err


# Stages the watch announces (TRAINPROOF_WATCH_STAGES=1) once its handler is in place:
# the handler, the wait for a log that is not there yet, the first poll, the first wait
# between polls, the settling at the end. With SIGINT inherited ignored too: the watch
# installs its handler whatever it inherited.


@pytest.mark.parametrize("ignore_sigint", [False, True], ids=["default", "inherited-ignored"])
@pytest.mark.parametrize("stage", ["handler", "waiting"])
def test_sigint_before_the_log_appears_exits_2_quietly(tmp_path, stage, ignore_sigint):
    log = tmp_path / "later.jsonl"
    watch = Cli(str(log), "--interval", "0.1", stages=True, ignore_sigint=ignore_sigint)
    watch.wait_for("stage handler" if stage == "handler" else "waiting for", "err" if stage == "handler" else "out")
    watch.proc.send_signal(signal.SIGINT)
    code, out, err = watch.finish()
    assert code == 2 and "stopped (Ctrl-C)" in out and "no such file or folder" in out, (out, err)
    assert "Traceback" not in err


@pytest.mark.parametrize("ignore_sigint", [False, True], ids=["default", "inherited-ignored"])
@pytest.mark.parametrize("stage", ["poll", "nap"])
def test_sigint_while_watching_ends_with_the_whole_logs_verdict(tmp_path, stage, ignore_sigint):
    """SIGINT in the first poll or the first wait between polls: the watch ends, judging
    the whole log — a FAIL (exit 1) that a 10-point tail window alone never shows."""
    log = tmp_path / "metrics.jsonl"
    dead = [4.16 * (1 + 0.03 * ((i * 7) % 5 - 2)) + 0.0005 * i for i in range(300)]
    log.write_text("".join(json.dumps({"step": i + 1, "loss": v}) + "\n" for i, v in enumerate(dead)),
                   encoding="utf-8")
    watch = Cli(str(log), "--interval", "0.1", stages=True, ignore_sigint=ignore_sigint)
    watch.wait_for(f"stage {stage}", "err")
    watch.proc.send_signal(signal.SIGINT)
    code, out, err = watch.finish()
    offline = judge_file(log, Config())
    assert offline.verdict.value == "FAIL"
    assert code == 1 and "stopped (Ctrl-C)" in out and f"== {log}: FAIL" in out, (out, err)
    assert "Traceback" not in err


def test_a_second_ctrl_c_while_settling_ends_at_once_with_the_last_published_verdicts(tmp_path, monkeypatch):
    log = tmp_path / "metrics.jsonl"
    log.write_text("".join(line(s) for s in range(1, 200)), encoding="utf-8")

    def ctrl_c(seconds: float) -> None:
        raise KeyboardInterrupt  # the first Ctrl-C, in the wait after the first poll

    out = io.StringIO()
    w = Watch(log, Config(), WatchOptions(interval=1.0), out=out, err=out, sleep=ctrl_c)

    def second_ctrl_c() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(w, "settle_all", second_ctrl_c)
    outcome = w.run()
    assert "stopped (Ctrl-C)" in out.getvalue() and "interrupted again" in out.getvalue()
    (report,) = outcome.reports
    assert report.verdict.value == "PASS"


def test_ctrl_c_during_a_poll_is_noted_and_the_loop_ends_after_it(tmp_path, monkeypatch):
    """The handler raises only in the wait: a Ctrl-C during a poll must not tear a log
    half read into its columns; the loop ends once the poll is done."""
    log = tmp_path / "metrics.jsonl"
    log.write_text("".join(line(s) for s in range(1, 50)), encoding="utf-8")
    out = io.StringIO()
    naps = []
    w = Watch(log, Config(), WatchOptions(interval=1.0), out=out, err=out, sleep=naps.append)
    real_poll = w.poll_once

    def poll_with_ctrl_c() -> None:
        w.interrupts(signal.SIGINT, None)  # lands mid-poll: noted, not raised
        real_poll()

    monkeypatch.setattr(w, "poll_once", poll_with_ctrl_c)
    outcome = w.run()
    assert naps == [] and "stopped (Ctrl-C)" in out.getvalue()
    assert w.logs[str(log)].tailer.live.records == 49 and outcome.reports[0].verdict.value == "PASS"


# --- paths that are not regular files -------------------------------------------------------

def test_a_fifo_or_a_dev_zero_log_is_not_checked_at_once(tmp_path):
    fifo = tmp_path / "metrics.jsonl"
    os.mkfifo(fifo)
    zero = tmp_path / "trainer_state.json"
    zero.symlink_to("/dev/zero")
    for target, what in ((fifo, "a FIFO (named pipe)"), (zero, "a character device (through a symlink)")):
        code, out, err = Cli(str(target), "--interval", "0.1").finish()
        assert code == 2 and "Traceback" not in err and "MemoryError" not in err, (out, err)
        assert out.strip().splitlines()[-1] == (f"== {target}: NOT-CHECKED: {target}: {what}, not a regular file: "
                                                "only regular files are read"), out


def test_a_log_swapped_for_a_fifo_or_dev_zero_while_watched_is_not_checked(tmp_path):
    log = tmp_path / "metrics.jsonl"
    log.write_text("".join(line(s) for s in range(1, 40)), encoding="utf-8")
    w, out = _watch(log)
    w.poll_once()
    assert w.logs[str(log)].report.verdict.value == "PASS"
    log.unlink()
    os.mkfifo(log)
    done = threading.Event()
    threading.Thread(target=lambda: (w.poll_once(), done.set()), daemon=True).start()
    assert done.wait(DEADLINE), "a poll blocked on a FIFO"
    report = w.logs[str(log)].report
    assert report.verdict.value == "NOT-CHECKED" and report.reason == (
        f"{log}: a FIFO (named pipe), not a regular file: only regular files are read")
    log.unlink()
    log.symlink_to("/dev/zero")
    w.poll_once()
    assert w.logs[str(log)].report.reason.endswith("a character device (through a symlink), not a regular file: "
                                                   "only regular files are read")


def test_a_folder_with_a_fifo_named_like_a_log_says_so(tmp_path):
    os.mkfifo(tmp_path / "metrics.jsonl")
    w, out = _watch(tmp_path)
    w.poll_once()
    (report,) = w.outcome().reports
    assert report.verdict.value == "NOT-CHECKED" and "a FIFO (named pipe), not a regular file" in report.reason
    assert out.getvalue().count("NOT-CHECKED") == 1


def test_a_log_over_its_size_cap_is_not_checked_as_epoch_says(tmp_path):
    from trainproof_lsp.core.caps import Caps

    log = tmp_path / "metrics.jsonl"
    log.write_text("".join(line(s) for s in range(1, 40)), encoding="utf-8")
    config = Config(caps=Caps(max_log_mb=1))
    out = io.StringIO()
    w = Watch(log, config, WatchOptions(), out=out, err=out)
    w.poll_once()
    assert w.logs[str(log)].report.verdict.value == "PASS"
    with log.open("a", encoding="utf-8") as fh:
        fh.write(" " * (1 << 20) + "\n")
    w.poll_once()
    report = w.logs[str(log)].report
    assert report.verdict.value == "NOT-CHECKED" and "over the cap of 1 MiB for a log (max_log_mb)" in report.reason
    assert judge_file(log, config).verdict.value == "NOT-CHECKED"
