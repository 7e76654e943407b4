"""Logs in bounded memory: typed columns, event files fed in pieces, trainer_state.json
decoded in batches. Each test compares the bounded form with the whole read."""

from __future__ import annotations

import json
import math
import random
from array import array
from pathlib import Path

import pytest
import tfevents_writers as tw

from trainproof_lsp.core.columns import Floats, Ints
from trainproof_lsp.core.model import ReadError, Series
from trainproof_lsp.guardian.incremental import LiveRun
from trainproof_lsp.readers import tfevents, trainer_state
from trainproof_lsp.readers.tensorboard import read_event_files
from trainproof_lsp.readers.tfevents import EventFileScan, EventReader, frame_record, read_event_file, scan_event_bytes
from trainproof_lsp.readers.trainer_state import read_trainer_state


# --- event files -----------------------------------------------------------------------

def _tensor_scalar(tag: str, step: int, value: float, wall: float, *, metadata: bool) -> bytes:
    """A tensor scalar whose metadata names the plugin only (no data_class)."""
    return tfevents.encode_tensor_scalar_event(tag, step, value, wall, metadata=metadata, data_class=False)


def _mixed_file(seed: int) -> bytes:
    """simple_value tags, tensor scalars whose metadata comes with their first record,
    a tag whose tensors come before its metadata (held back, merged at the end), a
    record that is not an Event, and a cut last record."""
    rng = random.Random(seed)
    out = [frame_record(tfevents.encode_file_version_event(1000.0))]
    for step in range(1, 120):
        wall = 1000.0 + step
        out.append(frame_record(tfevents.encode_scalar_event("train/loss", step, 2.0 / step + rng.random(), wall)))
        if step % 3 == 0:
            out.append(frame_record(tfevents.encode_scalar_event("train/lr", step, 1e-3, wall)))
        out.append(frame_record(_tensor_scalar("eval/loss", step, 1.0 / step, wall, metadata=step == 1)))
        out.append(frame_record(_tensor_scalar("late", step, float(step), wall, metadata=step == 40)))
        if step == 77:
            out.append(frame_record(b"\x0a\xff"))  # a length running past the record: bad-proto
    blob = b"".join(out)
    return blob + frame_record(tfevents.encode_scalar_event("train/loss", 120, 0.5, 1120.0))[:-9]


def _assert_same_scan(a: EventFileScan, b: EventFileScan) -> None:
    assert (a.records, a.problems, a.skipped_values, a.file_version, a.end_offset) == \
        (b.records, b.problems, b.skipped_values, b.file_version, b.end_offset)
    assert list(a.scalars) == list(b.scalars)
    for tag, sa in a.scalars.items():
        sb = b.scalars[tag]
        assert (sa.steps, sa.wall_times, sa.values, sa.offsets) == (sb.steps, sb.wall_times, sb.values, sb.offsets)


@pytest.mark.parametrize("seed", range(6))
def test_an_event_file_fed_in_random_pieces_reads_as_the_whole_file(seed: int) -> None:
    data = _mixed_file(seed)
    whole = scan_event_bytes(data, verify_crc=True)
    assert whole.problems[0].kind == "bad-proto" and whole.problems[-1].kind == "truncated"
    assert list(whole.scalars) == ["train/loss", "eval/loss", "late", "train/lr"]  # first appearance
    assert len(whole.scalars["late"].steps) == 119  # the 39 held back were merged in
    rng = random.Random(seed)
    reader = EventReader(verify_crc=True)
    pos = 0
    while pos < len(data):
        size = rng.choice((1, 2, 7, 13, 64, 300, 5000))
        reader.feed(data[pos : pos + size])
        pos += size
    _assert_same_scan(reader.finish(), whole)


def test_a_bad_crc_stops_a_fed_reader_where_the_whole_read_stops() -> None:
    data = bytearray(tw.raw_event_bytes([("x", s, float(s), 100.0 + s) for s in range(1, 50)]))
    offsets = tw.record_offsets(bytes(data))
    data[offsets[20] + 14] ^= 0xFF  # a byte inside record 20's payload
    whole = scan_event_bytes(bytes(data), verify_crc=True)
    assert [p.kind for p in whole.problems] == ["bad-data-crc"] and whole.records == 20
    reader = EventReader(verify_crc=True)
    for i in range(0, len(data), 11):
        reader.feed(bytes(data[i : i + 11]))
    assert reader.stopped
    _assert_same_scan(reader.finish(), whole)


def test_read_event_file_streams_in_pieces_and_matches_the_bytes_scan(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "events.out.tfevents.1.host"
    data = _mixed_file(7)
    path.write_bytes(data)
    monkeypatch.setattr(tfevents, "CHUNK_BYTES", 97)  # many pieces, most records cut between two
    _assert_same_scan(read_event_file(path, verify_crc=True), scan_event_bytes(data, verify_crc=True, path=str(path)))


def test_take_points_hands_each_point_once_in_file_order() -> None:
    data = _mixed_file(3)
    reader = EventReader(verify_crc=True)
    got = []
    for i in range(0, len(data), 500):
        got.extend(reader.feed(data[i : i + 500]) and reader.take_points())
    got.extend(reader.take_points())
    offsets = [p.offset for p in got]
    assert offsets == sorted(offsets)
    whole = scan_event_bytes(data, verify_crc=True)
    held_back = len(whole.scalars["late"].steps) - 80  # tensors of `late` before its metadata
    assert len(got) == sum(len(s.steps) for s in whole.scalars.values()) - held_back
    loss = [(p.step, p.value) for p in got if p.tag == "train/loss"]
    assert loss == list(zip(whole.scalars["train/loss"].steps, whole.scalars["train/loss"].values))


def test_event_series_are_typed_and_share_the_readers_columns(tmp_path: Path) -> None:
    path = tmp_path / "events.out.tfevents.1.host"
    path.write_bytes(tw.raw_event_bytes([("train/loss", s, 1.0 / s, 100.0 + s) for s in range(1, 40)]))
    run, (scan,) = read_event_files([path])
    loss = run.series["loss"]
    assert isinstance(loss.values, array) and loss.values.typecode == "d"
    assert isinstance(loss.steps, array) and loss.steps.typecode == "q"
    # One shard in step order: the series is the reader's columns, not a copy.
    assert loss.values is scan.scalars["train/loss"].values
    assert run.record_spans.byte_offsets == tuple(scan.scalars["train/loss"].offsets)
    assert run.location(loss.records[5]).byte_offset == scan.scalars["train/loss"].offsets[5]


# --- typed columns -------------------------------------------------------------------

def test_series_hold_typed_arrays_that_compare_and_slice_like_tuples() -> None:
    s = Series("loss", "loss", [1, 2, 3], (0.5, float("nan"), 0.25), range(3))
    assert type(s.steps) is Ints and type(s.values) is Floats and type(s.records) is Ints
    assert s.steps.itemsize == 8 and s.values.itemsize == 8
    assert s.steps == (1, 2, 3) and s.steps == [1, 2, 3] and s.steps != (1, 2)
    assert type(s.steps[1:]) is Ints and s.steps[1:] == (2, 3) and s.steps[-1] == 3
    finite = s.finite()
    assert finite.values == (0.5, 0.25) and finite.records == (0, 2) and type(finite.values) is Floats
    same = Series("loss", "loss", s.steps, s.values, s.records)
    assert same.steps is s.steps  # a column is taken as it is


def test_trainer_state_series_and_positions_are_typed(tmp_path: Path) -> None:
    path = tmp_path / "trainer_state.json"
    hist = [{"step": s, "loss": 1.0 / s, "learning_rate": 1e-3} for s in range(1, 30)]
    path.write_text(json.dumps({"log_history": hist}, indent=2), encoding="utf-8")
    run = read_trainer_state(path)
    loss, lr = run.series["loss"], run.series["lr"]
    assert type(loss.values) is Floats and type(loss.steps) is Ints
    assert lr.steps is loss.steps and lr.records is loss.records  # logged together: one copy
    assert type(run.record_spans.start_lines) is Ints and run.record_spans.start_lines[0] == 2


def test_live_run_grows_typed_columns() -> None:
    live = LiveRun(path="run", format="live-test")
    for s in range(5):
        live.add("loss", "loss", s, 1.0 / (s + 1), live.new_record(byte_offset=10 * s))
    snap = live.snapshot()
    assert type(snap.series["loss"].values) is Floats and snap.record_spans.byte_offsets == (0, 10, 20, 30, 40)
    live.add("loss", "loss", 5, 0.1, live.new_record(byte_offset=50))
    assert len(snap.series["loss"]) == 5  # a snapshot does not grow with the run
    assert live.tail(2).series["loss"].steps == (4, 5)


# --- trainer_state.json in batches ---------------------------------------------------

def _history(n: int) -> list[dict]:
    hist: list[dict] = []
    for i in range(1, n + 1):
        e = {"epoch": i / 10, "loss": 2.0 / (i + 1), "learning_rate": 1e-3, "step": i}
        if i < n // 2:
            e["grad_norm"] = 0.5 + i / n  # grad_norm stops half-way: its columns part from loss's
        if i == 17:
            del e["step"]  # an entry without a step: noted, not used
        hist.append(e)
        if i % 7 == 0:
            hist.append({"epoch": i / 10, "eval_loss": 1.0 / i, "step": i})
    hist.append({"step": n, "train_loss": 1.0, "train_runtime": 3.0, "train_samples_per_second": 9.5})
    return hist


@pytest.mark.parametrize("indent", [2, None])
def test_trainer_state_read_in_small_batches_equals_one_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              indent: int | None) -> None:
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"log_history": _history(60), "max_steps": 60}, indent=indent), encoding="utf-8")
    whole = read_trainer_state(path)
    monkeypatch.setattr(trainer_state, "_BATCH", 4)
    batched = read_trainer_state(path)
    assert set(batched.series) == {"loss", "lr", "grad_norm", "epoch", "eval_loss", "throughput"}
    for name, s in whole.series.items():
        b = batched.series[name]
        assert (b.steps, b.values, b.records) == (s.steps, s.values, s.records), name
    assert batched.record_spans == whole.record_spans and batched.notes == whole.notes
    assert batched.notes == ((18, "log entry without a step; not used"),)  # after 2 eval entries
    grad, loss = batched.series["grad_norm"], batched.series["loss"]
    assert len(grad) == 28 and len(loss) == 59 and grad.steps == loss.steps[:28]
    assert loss.steps[16] == 18  # entry 16 (step 17 removed) is skipped
    # Each record's span starts at its entry's `{`.
    text = path.read_text(encoding="utf-8").split("\n")
    for rec in (0, 16, len(batched.record_spans.start_lines) - 1):
        span = batched.record_spans.span(rec)
        assert span is not None and text[span.start_line][span.start_char] == "{"


def test_trainer_state_with_a_non_object_entry_reads_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "trainer_state.json"
    hist: list = [{"step": s, "loss": 1.0 / s} for s in range(1, 12)]
    hist.insert(5, 3)
    path.write_text(json.dumps({"log_history": hist}, indent=2), encoding="utf-8")
    run = read_trainer_state(path)
    assert run.notes == ((5, "log entry is not an object; not used"),)
    assert run.series["loss"].records == (0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11)
    assert math.isclose(run.series["loss"].values[5], 1.0 / 6)


def test_trainer_state_with_nan_is_decoded_in_batches_as_a_whole(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "trainer_state.json"
    hist = _history(40)
    hist[30]["loss"] = float("nan")  # json.dumps writes a bare NaN, as HF does
    hist[33]["learning_rate"] = "high"
    path.write_text(json.dumps({"log_history": hist, "max_steps": 40, "logging_steps": 5}, indent=2),
                    encoding="utf-8")
    assert b"NaN" in path.read_bytes()
    whole = read_trainer_state(path)
    monkeypatch.setattr(trainer_state, "_BATCH", 3)
    batched = read_trainer_state(path)
    loss = batched.series["loss"]
    assert [r for r, v in zip(loss.records, loss.values) if math.isnan(v)] == [30]
    for name, s in whole.series.items():
        b = batched.series[name]
        assert (b.steps, b.records) == (s.steps, s.records) and len(b) == len(s), name
        assert all(x == y or (math.isnan(x) and math.isnan(y)) for x, y in zip(b.values, s.values))
    assert batched.notes == whole.notes and len(batched.notes) == 2
    assert batched.meta == whole.meta and batched.meta.logging_steps == 5
    assert batched.record_spans == whole.record_spans


def test_a_broken_entry_among_nan_ones_is_worded_as_the_whole_decode_words_it(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "trainer_state.json"
    text = json.dumps({"log_history": [{"step": s, "loss": float("nan") if s == 2 else 1.0 / s}
                                       for s in range(1, 20)]}, indent=2)
    path.write_text(text.replace('"step": 9', '"step": 9,,'), encoding="utf-8")
    monkeypatch.setattr(trainer_state, "_BATCH", 4)
    with pytest.raises(ReadError) as err:
        read_trainer_state(path)
    line = text.split("\n").index('      "step": 9,') + 1
    assert str(err.value).startswith(f"{path}:{line}:") and "invalid JSON" in str(err.value)


# --- one long JSON string: memory linear in the file ----------------------------------------

_PEAK_CHILD = """
import json, resource, sys
from pathlib import Path
from trainproof_lsp.judge import engine
from trainproof_lsp.readers.detect import HEAD_BYTES, detect
path = Path(sys.argv[1])
with path.open("rb") as fh:
    detected = detect(path, fh.read(HEAD_BYTES))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
run = engine.read_run(path, detected)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"before_kib": before, "after_kib": after, "loss_points": len(run.series["loss"]),
                  "note_line": run.record_spans.span(3).start_line}))
"""


def _peak_of_read(path: Path) -> dict:
    """Read the log in a child process (1.5 GiB of address space at most: the quadratic
    pattern would need ~100x the file) and report its peak RSS before and after."""
    import os
    import resource
    import subprocess
    import sys

    from conftest import REPO

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (3 << 29, 3 << 29))

    proc = subprocess.run([sys.executable, "-c", _PEAK_CHILD, str(path)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, preexec_fn=limit, timeout=300,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


@pytest.mark.parametrize("body", ["plain", "escapes"])
def test_a_one_line_trainer_state_with_an_80_mib_string_is_read_in_memory_linear_in_its_size(tmp_path: Path,
                                                                                           body: str):
    """The issue's 8 MiB one-line log peaked at 1 GB (the string pattern kept ~125 bytes a
    character); at ten times the size the read's peak stays within three times the file."""
    path = tmp_path / "trainer_state.json"
    hist: list[dict] = [{"step": s, "loss": 2.0 / s} for s in range(1, 30)]
    hist[3]["note"] = "@"
    size = 80 * (1 << 20)
    piece = "a" if body == "plain" else 'a\\"b\\\\c\\n'  # escaped quotes, backslashes, newlines
    text = json.dumps({"log_history": hist}).replace('"@"', '"' + piece * (size // len(piece)) + '"', 1)
    path.write_text(text, encoding="ascii")
    assert "\n" not in text and len(text) >= size
    got = _peak_of_read(path)
    assert got["loss_points"] == 29 and got["note_line"] == 0
    grown = (got["after_kib"] - got["before_kib"]) * 1024
    assert grown <= 3 * len(text), f"peak grew {grown / len(text):.1f}x the file"


def _reference_spans(data: bytes, open_pos: int) -> tuple[list[int], list[int], bool]:
    """object_spans by the JSON string grammar written as one pattern (the form whose
    memory grows with a string's length: fine for the small inputs here)."""
    import re

    tokens = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]')
    starts: list[int] = []
    ends: list[int] = []
    depth, only_objects = 0, True
    for m in tokens.finditer(data, open_pos):
        c = data[m.start()]
        if c == 0x22:
            continue
        if c in (0x5B, 0x7B):
            depth += 1
            if depth == 2:
                if c == 0x7B:
                    starts.append(m.start())
                else:
                    only_objects = False
        else:
            depth -= 1
            if depth == 1 and c == 0x7D:
                ends.append(m.end())
            if depth == 0:
                break
    return starts, ends, depth == 0 and only_objects


def test_object_spans_follow_the_json_string_grammar_on_long_escaped_and_broken_strings(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Bounds made tiny, so every path runs on small inputs: strings longer than the short
    form, escapes past one match's bound, quotes escaped by odd and even backslash runs,
    strings never closed, and broken documents."""
    import re

    from trainproof_lsp.readers import jsonpos

    monkeypatch.setattr(jsonpos, "_TOKENS", re.compile(rb'"[^"\\]{0,2}"|[\[\]{}"]'))
    monkeypatch.setattr(jsonpos, "_STRING_REST", re.compile(rb'[^"\\]*(?:\\.[^"\\]*){0,2}', re.DOTALL))
    rng = random.Random(7)
    alphabet = ["a", '"', "\\", "[", "]", "{", "}", "é", "\n", " ", ","]

    def text() -> str:
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))

    def value(depth: int = 0) -> object:
        r = rng.random()
        if depth > 3 or r < 0.3:
            return text()
        if r < 0.5:
            return rng.random()
        if r < 0.75:
            return [value(depth + 1) for _ in range(rng.randint(0, 3))]
        return {text(): value(depth + 1) for _ in range(rng.randint(0, 3))}

    compared = 0
    for _ in range(4000):
        history = [value() if rng.random() < 0.3 else {text(): value()} for _ in range(rng.randint(0, 5))]
        data = json.dumps({"log_history": history}, ensure_ascii=rng.random() < 0.5).encode()
        if rng.random() < 0.3:  # broken: a byte replaced by a quote, a backslash or a brace, or cut out
            k = rng.randrange(len(data))
            data = data[:k] + rng.choice([b'"', b"\\", b"", b"{"]) + data[k + 1:]
        open_pos = jsonpos.array_start(data, b"log_history")
        if open_pos < 0:
            continue
        assert jsonpos.object_spans(data, open_pos) == _reference_spans(data, open_pos), data
        compared += 1
    assert compared > 3000
