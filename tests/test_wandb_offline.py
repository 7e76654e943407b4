"""W&B offline runs (`wandb/offline-run-*/run-<id>.wandb`) read without `wandb`.

The runs are written by the real writer: the `wandb` SDK in offline mode (`wandb.init(mode=
"offline")` + `wandb.log`, no network), in a child process, once for the module. The
reader (readers/wandb_offline.py) never imports wandb; these tests use wandb's own protobuf
classes only to check, independently, the record a finding cites.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from curves import N, SICK, healthy
from growing import watch_growing
from conftest import ids, judge, run_cli, write_jsonl
from trainproof_lsp.core.config import Config
from trainproof_lsp.core.model import EVAL_LOSS, LOSS, LR, Level, Verdict
from trainproof_lsp.judge.engine import doctor
from trainproof_lsp.readers.detect import detect
from trainproof_lsp.readers.wandb_offline import BLOCK, FILE_HEADER, WandbFeed, scan_wandb_offline

pytest.importorskip("wandb", reason="the W&B SDK (the peers extra) writes these fixtures")

# Each run logs the curve at global steps 10, 20, ... as HF's WandbCallback names it, with
# an eval loss every 20th point and the model config the callback adds to the run config.
_WRITER = r"""
import json, math, sys, wandb
runs = json.loads(sys.stdin.read())
for name, spec in runs.items():
    run = wandb.init(mode="offline", project="tp", dir=spec["dir"], name=name,
                     config={"vocab_size": 32000, "max_steps": 10 * len(spec["losses"]), "logging_steps": 10,
                             "learning_rate": 2e-5})
    for i, loss in enumerate(spec["losses"]):
        step = 10 * (i + 1)
        print({"loss": f"{float(loss):.4g}", "epoch": f"{step / 400:.4g}"})  # the console W&B captures too
        wandb.log({"train/loss": float(loss), "train/learning_rate": 2e-5 * (1 - i / len(spec["losses"])),
                   "train/global_step": step, "train/epoch": step / 400})
        if (i + 1) % 20 == 0:
            wandb.log({"eval/loss": float(loss) + 0.1, "train/global_step": step})
    run.finish()
"""


def _write_runs(root: Path, curves: dict[str, list[float]]) -> dict[str, Path]:
    spec = {name: {"dir": str(root / name), "losses": [v if v == v else "NaN" for v in losses]}
            for name, losses in curves.items()}
    for s in spec.values():
        Path(s["dir"]).mkdir(parents=True)
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_DISABLE_GIT": "true",
           "WANDB_CONFIG_DIR": str(root / "config"), "WANDB_CACHE_DIR": str(root / "cache")}
    # json cannot carry NaN as a float: the child turns "NaN" back into float("nan").
    proc = subprocess.run([sys.executable, "-c", _WRITER], input=json.dumps(spec), text=True, env=env,
                          cwd=root, capture_output=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = {}
    for name in curves:
        found = sorted((root / name / "wandb").glob("offline-run-*/run-*.wandb"))
        assert len(found) == 1, found
        out[name] = found[0]
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("wandb")
    return _write_runs(root, {"healthy": healthy(), **{name: curve() for name, (curve, _) in SICK.items()}})


def plain_twin(folder: Path, losses: list[float]) -> Path:
    rows = [{"step": 10 * (i + 1), "loss": v, "learning_rate": 2e-5} for i, v in enumerate(losses)]
    return write_jsonl(folder, rows, "plain.jsonl")


def finding_keys(report: Any) -> list[tuple[str, str]]:
    return sorted((f.id, f.level.value) for f in report.findings if f.level.value in ("FAIL", "WARN"))


def record_at(path: Path, offset: int) -> Any:
    """The record whose first chunk is at `offset`, parsed by wandb's own protobuf classes
    (an independent reading of what a finding cites)."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    parts, pos = [], offset
    while True:  # a record cut across a block boundary: its FIRST ... LAST chunks, joined
        left = BLOCK - pos % BLOCK
        if left < 7:
            pos += left
            continue
        _, length, kind = struct.unpack_from("<IHB", data, pos)
        parts.append(data[pos + 7:pos + 7 + length])
        pos += 7 + length
        if kind in (1, 4):
            break
    record = wandb_internal_pb2.Record()
    record.ParseFromString(b"".join(parts))
    return record


def history_values(record: Any) -> dict[str, str]:
    return {(item.key or "/".join(item.nested_key)): item.value_json for item in record.history.item}


# --- the healthy run ---------------------------------------------------------------------

def test_the_offline_run_file_is_detected_by_name_and_by_its_header(runs):
    path = runs["healthy"]
    head = path.read_bytes()[:64]
    assert head.startswith(FILE_HEADER)
    assert detect(path, head).format == "wandb-offline"
    assert detect(path.with_name("no_suffix"), head).format == "wandb-offline"


def test_a_healthy_offline_run_is_its_history(runs, tmp_path):
    scan = scan_wandb_offline(runs["healthy"])
    run = scan.run
    assert scan.problem is None and scan.history == N + N // 20
    loss = run.series[LOSS]
    assert list(loss.steps) == [10 * (i + 1) for i in range(N)]
    assert list(loss.values) == healthy()  # doubles round-trip through W&B's JSON exactly
    assert loss.source_name == "train/loss"
    assert list(run.series[EVAL_LOSS].steps) == [200 * (k + 1) for k in range(N // 20)]
    assert run.series[LR].values[0] == 2e-5
    assert run.meta.vocab_size == 32000 and run.meta.max_steps == 10 * N and run.meta.logging_steps == 10
    assert run.meta.vocab_source == f"{runs['healthy']} (W&B run config)"
    report = judge(runs["healthy"])
    twin = judge(plain_twin(tmp_path, healthy()))
    assert report.verdict is twin.verdict is Verdict.PASS
    assert report.artefact.format == "wandb-offline"


def test_doctor_on_the_project_folder_judges_the_offline_run_once(runs):
    project = runs["healthy"].parents[2]  # <project>/wandb/offline-run-*/run-*.wandb
    assert (project / "wandb" / "latest-run").is_symlink()
    outcome = doctor([project], Config())
    metrics = [r for r in outcome.reports if r.artefact.kind == "metrics"]
    assert [(r.artefact.path, r.verdict) for r in metrics] == [(str(runs["healthy"]), Verdict.PASS)]
    # the run's captured console (the printed dicts) is the same run: passed over, with why
    console = runs["healthy"].parent / "files" / "output.log"
    assert "{'loss': '2.45'" in console.read_text(encoding="utf-8")
    assert (str(console), "the W&B run's captured console: its run is judged once, from the run's "
                          "run-<id>.wandb") in [(n.path, n.reason) for n in outcome.passed_over]
    assert judge(console).verdict is Verdict.PASS  # given by itself, it is read as the stdout it is
    code, out, _ = run_cli("doctor", str(project))
    assert code == 0 and f"{runs['healthy']}: PASS" in out


# --- sick runs: the same rules as any other format, at the record of the point ------------

@pytest.mark.parametrize("case", sorted(SICK))
def test_a_sick_offline_run_fails_by_the_same_rules(runs, tmp_path, case):
    curve, rule = SICK[case]
    report = judge(runs[case])
    twin = judge(plain_twin(tmp_path, curve()))
    assert report.verdict is twin.verdict is Verdict.FAIL
    assert rule in ids(report)
    assert finding_keys(report) == finding_keys(twin)
    got = next(f for f in report.findings if f.id == rule)
    want = next(f for f in twin.findings if f.id == rule)
    assert got.location.path == str(runs[case]) and got.location.byte_offset is not None
    # the record index is the history record's, the same point the twin's line holds
    assert want.location.span is not None and got.location.record == want.location.span.start_line + \
        (want.location.span.start_line // 20)  # (an eval record follows every 20th point)
    cited = history_values(record_at(runs[case], got.location.byte_offset))
    if case == "nan":
        assert cited["train/global_step"] == "710" and cited["train/loss"] == "NaN"
        assert got.evidence["first_step"] == 710 and "step 710" in got.message
    code, out, _ = run_cli("epoch", str(runs[case]))
    assert code == 1 and f"{runs[case]}: FAIL" in out and rule in out


# --- torn and damaged files -----------------------------------------------------------------

def _copy_cut(src: Path, dest: Path, size: int) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(src.read_bytes()[:size])
    return dest


def _record_offsets(path: Path) -> list[int]:
    feed = WandbFeed(str(path))
    feed.feed(path.read_bytes())
    feed.finish()
    return [r.offset for r in feed.take()]


def test_a_run_file_cut_inside_a_record_is_not_checked_beyond_the_cut(runs, tmp_path):
    offsets = _record_offsets(runs["healthy"])
    cut = offsets[100] + 20  # inside the 101st history record
    path = _copy_cut(runs["healthy"], tmp_path / "run-cut.wandb", cut)
    report = judge(path)
    assert report.verdict is Verdict.NOT_CHECKED
    stop = next(f for f in report.findings if f.id == "TP-NOT-CHECKED")
    assert stop.location.byte_offset == offsets[100]
    assert stop.evidence["kind"] == "truncated" and stop.evidence["history_records"] == 100
    assert "cut short" in stop.message and f"byte {offsets[100]}" in stop.message
    assert len(report.findings) == 1  # the 100 records before the cut PASS
    code, out, err = run_cli("epoch", str(path))
    assert code == 2 and "NOT-CHECKED" in out and "Traceback" not in out + err


def test_a_sick_run_cut_after_its_nan_still_fails(runs, tmp_path):
    offsets = _record_offsets(runs["nan"])
    path = _copy_cut(runs["nan"], tmp_path / "run-nan-cut.wandb", offsets[90] + 3)
    report = judge(path)
    assert report.verdict is Verdict.FAIL
    assert {"TP-NAN", "TP-NOT-CHECKED"} <= set(ids(report))


@pytest.mark.parametrize("size", [0, 3, 7, 7 + 4, 200, BLOCK + 5])
def test_every_cut_is_a_one_line_not_checked_never_a_crash(runs, tmp_path, size):
    path = _copy_cut(runs["healthy"], tmp_path / "run-x.wandb", size)
    report = judge(path)
    assert report.verdict is Verdict.NOT_CHECKED
    code, out, err = run_cli("epoch", str(path))
    assert code == 2 and "Traceback" not in out + err
    assert f"{path}" in out and "NOT-CHECKED" in out


def test_a_flipped_byte_stops_the_read_at_its_chunk(runs, tmp_path):
    data = bytearray(runs["healthy"].read_bytes())
    offsets = _record_offsets(runs["healthy"])
    data[offsets[50] + 12] ^= 0x40  # inside the record's protobuf: its CRC no longer holds
    path = tmp_path / "run-flip.wandb"
    path.write_bytes(bytes(data))
    report = judge(path)
    stop = next(f for f in report.findings if f.id == "TP-NOT-CHECKED")
    assert stop.evidence["kind"] == "bad-crc" and stop.location.byte_offset == offsets[50]
    assert stop.evidence["history_records"] == 50
    assert report.verdict is Verdict.NOT_CHECKED


def test_a_file_that_is_not_a_wandb_run_is_not_checked_with_its_reason(tmp_path):
    path = tmp_path / "run-abc.wandb"
    path.write_text("hello\n", encoding="utf-8")
    code, out, _ = run_cli("epoch", str(path))
    assert code == 2 and "not a W&B run file" in out


def test_a_run_without_wandb_log_calls_is_not_checked(runs, tmp_path):
    offsets = _record_offsets(runs["healthy"])
    path = _copy_cut(runs["healthy"], tmp_path / "run-early.wandb", offsets[0])  # the records before any log
    report = judge(path)
    assert report.verdict is Verdict.NOT_CHECKED and "no history records" in report.reason


# --- watch: the file read as it grows ---------------------------------------------------------

@pytest.mark.parametrize("case", ["healthy", "nan", "diverging"])
def test_watch_reads_a_growing_offline_run_as_epoch_does(runs, tmp_path, case):
    w = watch_growing(runs[case].read_bytes(), tmp_path / "wandb" / "run-w.wandb", 37)
    (watched,) = w.outcome().reports
    whole = judge(tmp_path / "wandb" / "run-w.wandb")
    assert watched.verdict is whole.verdict
    assert [(f.id, f.location.byte_offset, f.message) for f in watched.findings] == \
        [(f.id, f.location.byte_offset, f.message) for f in whole.findings]
    assert w.logs[str(tmp_path / "wandb" / "run-w.wandb")].tailer.rows.rows == N + N // 20


def test_watch_says_a_cut_tail_when_the_file_stops_growing(runs, tmp_path):
    offsets = _record_offsets(runs["healthy"])
    src = _copy_cut(runs["healthy"], tmp_path / "src" / "run-s.wandb", offsets[100] + 20)
    w = watch_growing(src.read_bytes(), tmp_path / "w" / "run-w.wandb", 5)
    (watched,) = w.outcome().reports
    assert watched.verdict is Verdict.NOT_CHECKED
    stop = next(f for f in watched.findings if f.id == "TP-NOT-CHECKED")
    assert stop.location.byte_offset == offsets[100] and stop.level is Level.NOT_CHECKED


# --- W&B's history export: the same run as a CSV ----------------------------------------------

def _history_export(path: Path, dest: Path) -> Path:
    """`wandb.Api().run(...).history().to_csv()` needs the network: the table is built here
    from the run file's history records as wandb's own protobuf classes read them (the
    export's columns are the logged keys plus `_step`, `_runtime`, `_timestamp`), and
    written by pandas as the export is."""
    pandas = pytest.importorskip("pandas")
    rows = []
    for offset in _record_offsets(path):
        record = record_at(path, offset)
        assert record.WhichOneof("record_type") == "history"
        rows.append({k: float(v) if v in ("NaN", "Infinity", "-Infinity") else json.loads(v)
                     for k, v in history_values(record).items()})
    pandas.DataFrame(rows).to_csv(dest)
    return dest


def test_a_history_export_csv_is_the_same_run(runs, tmp_path):
    csv = _history_export(runs["diverging"], tmp_path / "wandb_export.csv")
    report, whole = judge(csv), judge(runs["diverging"])
    assert report.artefact.format == "metrics-csv"
    assert report.verdict is whole.verdict is Verdict.FAIL
    assert finding_keys(report) == finding_keys(whole) and "TP-DIVERGE" in ids(report)


def test_a_nan_loss_is_an_empty_cell_in_a_history_export(runs, tmp_path):
    """pandas writes NaN as an empty cell: the export cannot show a NaN loss, the run file
    can (docs/formats.md says so)."""
    csv = _history_export(runs["nan"], tmp_path / "wandb_export.csv")
    line = csv.read_text(encoding="utf-8").splitlines()[70 + 70 // 20 + 1]  # the header, then the rows
    assert ",710," in line and ",," in line
    assert judge(runs["nan"]).verdict is Verdict.FAIL and "TP-NAN" not in ids(judge(csv))


def _record_log(records: list[bytes]) -> tuple[bytes, list[int]]:
    """A record log framed as W&B's writer frames it (LevelDB's log format: 32 KiB blocks,
    a record longer than its block's room cut into FIRST/MIDDLE/LAST chunks, a block's last
    <7 bytes zero padding); and the byte offset of each record's first chunk."""
    import zlib

    out, starts = bytearray(FILE_HEADER), []
    for rec in records:
        rest, first = rec, True
        while True:
            left = BLOCK - len(out) % BLOCK
            if left < 7:
                out += bytes(left)
                continue
            n = min(len(rest), left - 7)
            last = n == len(rest)
            kind = (1 if last else 2) if first else (4 if last else 3)
            if first:
                starts.append(len(out))
            out += struct.pack("<IHB", zlib.crc32(rest[:n], zlib.crc32(bytes((kind,)))), n, kind) + rest[:n]
            rest, first = rest[n:], False
            if last:
                break
    return bytes(out), starts


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _history_record(step: int, loss: float) -> bytes:
    items = (_field(1, _field(2, b"train/loss") + _field(16, repr(loss).encode()))
             + _field(1, _field(2, b"_step") + _field(16, str(step).encode())))
    return _field(2, items)


def test_hostile_records_with_valid_crcs_are_read_past_never_a_crash(tmp_path):
    """Records framed and CRC'd as the writer does, whose protobuf is not W&B's: a length
    past the record, a varint that never ends, a group wire type; a config value nested
    past the JSON decoder's depth, in a record cut into chunks across two blocks. Each is a
    note (or read past), never a traceback; the history around them is the run."""
    deep = b"[" * 30_000 + b"]" * 30_000
    config = _field(5, _field(1, _field(1, b"vocab_size") + _field(16, deep)))
    bad = [b"\x12\xff\xff\xff\xff\x0f", b"\x80" * 12, b"\x13"]
    history = [_history_record(10 * (i + 1), 3.0 - 0.01 * i) for i in range(30)]
    data, starts = _record_log([config, *bad, *history])
    path = tmp_path / "run-hostile.wandb"
    path.write_bytes(data)
    scan = scan_wandb_offline(path)
    assert scan.problem is None and scan.records == 34 and scan.history == 30
    assert starts[0] == 7 and starts[1] > BLOCK  # the config record spans two blocks
    assert scan.run.meta.vocab_size is None  # the hostile value was not taken
    assert [n for _, n in scan.run.notes] == [
        f"record 1 at byte {starts[1]} is not a W&B record (length-delimited field past the message's end); not used",
        f"record 2 at byte {starts[2]} is not a W&B record (varint at byte 0 does not end); not used",
        f"record 3 at byte {starts[3]} is not a W&B record (wire type 3); not used"]
    assert list(scan.run.record_spans.byte_offsets) == starts[4:]
    report = judge(path)
    assert report.verdict is Verdict.PASS and ids(report) == ["TP-SKIPPED-RECORDS"]
    code, out, err = run_cli("epoch", str(path))
    assert code == 0 and "Traceback" not in out + err


def test_a_run_file_over_its_caps_is_not_checked_with_the_cap(runs, tmp_path):
    from trainproof_lsp.core.caps import Caps

    report = judge(runs["healthy"], Config(caps=Caps(max_log_entries=50)))
    assert report.verdict is Verdict.NOT_CHECKED
    assert report.reason == (f"{runs['healthy']}: more than 50 history records, over the cap for a log "
                             "(max_log_entries): not read")
