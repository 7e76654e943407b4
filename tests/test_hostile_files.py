"""Hostile files answer within the budget: each is judged by `doctor`/`preflight` in a
child process limited to 1 GiB of address space and 10 s of CPU (and a wall-clock
timeout), and answers with a verdict or a NOT-CHECKED that says why — the size and the cap
where a cap was met. The big files are made here at run time (sparse files, streamed
writes into tmp_path)."""

from __future__ import annotations

import json
import os
import struct
import zipfile
from pathlib import Path

import pytest

from limited_child import findings, run_limited

MIB = 1 << 20
GIB = 1 << 30


def reasons(data: dict) -> str:
    return json.dumps([data.get("not_judged"), [r.get("reason") for r in data["reports"]],
                       [f["message"] for f in findings(data)]])


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_only_regular_files_are_read(tmp_path, cwd, kind):
    run = tmp_path / "run"
    run.mkdir()
    target = run / "trainer_state.json"
    if kind == "fifo":
        os.mkfifo(target)  # opening it would block until someone writes
        what = "a FIFO (named pipe), not a regular file"
    else:
        target.symlink_to("/dev/zero")  # reading it never ends
        what = "a character device (through a symlink), not a regular file"
    # long enough for the trend checks (10 points), so the rest of the folder can PASS
    (run / "train_log.jsonl").write_text("".join(f'{{"loss": {2.0 - 0.1 * i:.1f}, "step": {i + 1}}}\n'
                                                 for i in range(12)))
    code, data, _ = run_limited("doctor", run, cwd=cwd)
    assert code == 2
    assert data["not_judged"] == [{"path": str(target), "reason": what + ": only regular files are read"}]
    assert [r["verdict"] for r in data["reports"]] == ["PASS"]  # the rest of the folder is judged
    code, data, _ = run_limited("doctor", target, cwd=cwd)  # named on its own
    assert code == 2
    assert data["not_judged"] == [{"path": str(target), "reason": what + ": only regular files are read"}]
    code, data, _ = run_limited("epoch", target, cwd=cwd)
    assert code == 2
    assert data["reports"][0]["verdict"] == "NOT-CHECKED" and what in data["reports"][0]["reason"]


def test_zip_whose_data_pkl_inflates_to_1_gib(tmp_path, cwd):
    path = tmp_path / "bomb.pt"
    # A deflated data.pkl: a pickle header, then 1 GiB of zeros (about 1 MB compressed).
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        with zf.open("archive/data.pkl", "w", force_zip64=True) as fh:
            fh.write(b"\x80\x02\x8e" + struct.pack("<Q", GIB))
            block = bytes(8 * MIB)
            for _ in range(GIB // len(block)):
                fh.write(block)
    assert path.stat().st_size < 2 * MIB
    code, data, _ = run_limited("doctor", path, cwd=cwd)
    assert code == 2
    notes = [f["message"] for f in findings(data, "TP-NOT-CHECKED")]
    assert any(f"inflates to {GIB + 11} bytes" in n and "max_inflate_mb" in n for n in notes), notes


def test_one_gib_single_line_trainer_state(tmp_path, cwd):
    run = tmp_path / "run"
    run.mkdir()
    path = run / "trainer_state.json"
    with path.open("wb") as fh:
        fh.write(b'{"log_history": [{"loss": 1.0, "step": 1}, ')
        fh.truncate(GIB)  # sparse: 1 GiB on paper, nothing on disk
    code, data, _ = run_limited("doctor", run, cwd=cwd)
    assert code == 2
    (report,) = data["reports"]
    assert report["verdict"] == "NOT-CHECKED"
    assert f"{GIB} bytes (1024.0 MiB), over the cap of 512 MiB for a log (max_log_mb)" in report["reason"]


def test_five_million_entry_trainer_state(tmp_path, cwd):
    path = tmp_path / "trainer_state.json"
    entry = b'{"loss":1.5,"step":1},'
    with path.open("wb") as fh:
        fh.write(b'{"log_history":[')
        for _ in range(50):
            fh.write(entry * 100_000)
        fh.write(b'{"loss":1.0,"step":2}]}')
    code, data, _ = run_limited("doctor", path, cwd=cwd)
    assert code == 2
    (report,) = data["reports"]
    assert "about 5000001 log entries" in report["reason"]
    assert "over the cap of 2000000 (max_log_entries)" in report["reason"]


def test_a_200_mb_dataset_row_is_streamed_past(tmp_path, cwd):
    path = tmp_path / "train.jsonl"
    with path.open("wb") as fh:
        fh.write(b'{"text": "short and fine"}\n{"text": "')
        chunk = b"lorem ipsum " * (MIB // 12)
        for _ in range(200):
            fh.write(chunk)
        fh.write(b'"}\n{"text": "also fine"}\n')
    size = path.stat().st_size
    code, data, _ = run_limited("preflight", path, cwd=cwd)
    assert code == 2
    (f,) = findings(data, "TP-PRE-ROW-NOT-CHECKED")
    assert f["evidence"]["line"] == 2 and f["evidence"]["cap"] == 16 * MIB
    assert f["evidence"]["bytes"] == size - len(b'{"text": "short and fine"}\n{"text": "also fine"}\n')
    assert data["reports"][0]["verdict"] == "NOT-CHECKED"


def test_a_row_nested_100k_deep_is_not_checked_not_malformed(tmp_path, cwd):
    path = tmp_path / "train.jsonl"
    deep = b'{"text": "hi", "meta": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    path.write_bytes(b'{"text": "fine"}\n' + deep + b"\n")
    code, data, _ = run_limited("preflight", path, cwd=cwd)
    assert code == 2
    (f,) = findings(data, "TP-PRE-ROW-NOT-CHECKED")
    assert f["level"] == "NOT-CHECKED" and f["evidence"]["line"] == 2
    assert "nested too deeply" in f["message"]
    assert not findings(data, "TP-PRE-MALFORMED-JSONL")


def test_a_pickle_naming_two_million_globals(tmp_path, cwd):
    path = tmp_path / "model.pkl"
    with path.open("wb") as fh:
        fh.write(b"\x80\x02(")
        for start in range(0, 2_000_000, 100_000):
            fh.write(b"".join(b"cm%d\nf\n" % i for i in range(start, start + 100_000)))
        fh.write(b"l.")
    code, data, _ = run_limited("doctor", path, cwd=cwd)
    assert code == 1  # what was walked already names code outside the allow-list
    unsafe = findings(data, "TP-CKPT-UNSAFE-PICKLE")
    assert len(unsafe) == 101  # 100 listed, then one count of the rest
    listed = [f["evidence"]["global"] for f in unsafe if "global" in f["evidence"]]
    assert sorted(listed) == sorted(f"m{i}.f" for i in range(100))
    (rest,) = [f for f in unsafe if "unlisted" in f["evidence"]]
    # 1M opcodes: PROTO, MARK and 999,998 GLOBALs walked before the cap
    assert rest["evidence"]["unlisted"] == 999_898 and rest["evidence"]["listed"] == 100
    (note,) = findings(data, "TP-NOT-CHECKED")
    assert "stopped after 1000000 opcodes (cap max_pickle_ops)" in note["message"]


def test_safetensors_with_300k_tensors(tmp_path, cwd):
    path = tmp_path / "model.safetensors"
    header = {f"layer.{i}.weight": {"dtype": "F32", "shape": [1], "data_offsets": [4 * i, 4 * i + 4]}
              for i in range(300_000)}
    raw = json.dumps(header).encode()
    with path.open("wb") as fh:
        fh.write(struct.pack("<Q", len(raw)) + raw)
        fh.truncate(8 + len(raw) + 4 * 300_000)
    code, data, _ = run_limited("doctor", path, cwd=cwd)
    assert code == 2
    (note,) = findings(data, "TP-NOT-CHECKED")
    assert "the header lists 300000 tensors, over the cap of 100000 (max_tensors)" in note["message"]


def test_caps_are_settings(tmp_path, cwd):
    path = tmp_path / "trainer_state.json"
    path.write_text('{"log_history": [' + ", ".join(f'{{"loss": 1.0, "step": {i}}}' for i in range(1, 40)) + "]}")
    config = tmp_path / "caps.toml"
    config.write_text("[tool.trainproof.caps]\nmax_log_entries = 10\n")
    code, data, _ = run_limited("doctor", path, "--config", config, cwd=cwd)
    assert code == 2 and "about 39 log entries" in data["reports"][0]["reason"]
    config.write_text("[tool.trainproof.caps]\nmax_log_entries = 0\n")
    code, data, _ = run_limited("doctor", path, "--config", config, cwd=cwd)
    assert code == 2 and "caps.max_log_entries must be a whole number >= 1" in data["error"]


def _event_file(path: Path, points: int) -> None:
    from trainproof_lsp.readers import tfevents

    with path.open("wb") as fh:
        fh.write(tfevents.frame_record(tfevents.encode_file_version_event(1000.0)))
        for step in range(1, points + 1):
            fh.write(tfevents.frame_record(tfevents.encode_scalar_event("loss", step, 2.0 / step, 1000.0 + step)))


def test_event_files_over_their_byte_cap_are_not_read(tmp_path, cwd):
    run = tmp_path / "run"
    run.mkdir()
    small = run / "events.out.tfevents.1.host"
    _event_file(small, 30)
    big = run / "events.out.tfevents.2.host"
    with big.open("wb") as fh:
        fh.truncate(5 * GIB)  # sparse: 5 GiB on paper
    def reason(size: int) -> str:
        return (f"event files of {size} bytes ({size / MIB:.1f} MiB), over the cap of 4096 MiB for one run's "
                "event files (max_events_mb): not read")

    code, data, _ = run_limited("doctor", big, cwd=cwd)  # named on its own
    assert code == 2 and data["worst_verdict"] == "NOT-CHECKED" and data["reports"] == []
    assert data["not_judged"] == [{"path": str(big), "reason": reason(5 * GIB)}]
    code, data, _ = run_limited("doctor", run, cwd=cwd)  # the folder: one run, both files
    assert code == 2 and data["reports"] == []
    size = 5 * GIB + small.stat().st_size
    assert data["not_judged"] == [{"path": str(small), "reason": reason(size)}, {"path": str(big), "reason": reason(size)}]


def test_event_files_over_their_point_cap_stop_as_they_stream(tmp_path, cwd):
    run = tmp_path / "run"
    run.mkdir()
    _event_file(run / "events.out.tfevents.1.host", 3000)
    config = tmp_path / "caps.toml"
    config.write_text("[tool.trainproof.caps]\nmax_events = 2999\n")
    code, data, _ = run_limited("doctor", run / "events.out.tfevents.1.host", "--config", config, cwd=cwd)
    assert code == 2 and data["worst_verdict"] == "NOT-CHECKED" and data["reports"] == []
    (skipped,) = data["not_judged"]
    assert skipped["path"] == str(run / "events.out.tfevents.1.host")
    # (counted after each 4 MiB piece: this file is one piece)
    size = (run / "events.out.tfevents.1.host").stat().st_size
    assert skipped["reason"] == (f"more than 2999 scalar points in the run's event files (3000 by byte {size} of "
                                 "this file), over the cap for one run (max_events): not read")
    config.write_text("[tool.trainproof.caps]\nmax_events = 3000\n")
    code, data, _ = run_limited("doctor", run / "events.out.tfevents.1.host", "--config", config, cwd=cwd)
    assert code == 0 and data["reports"][0]["verdict"] == "PASS"


def _mlflow_run(tmp_path: Path) -> Path:
    run = tmp_path / "mlruns" / "0" / "abc"
    (run / "metrics").mkdir(parents=True)
    (run / "meta.yaml").write_text("run_id: abc\n")
    (run / "metrics" / "loss").write_text("".join(f"1700000000000 {2.0 - 0.05 * i:.2f} {i + 1}\n" for i in range(30)))
    return run


def test_an_mlflow_run_over_the_log_caps_is_not_read(tmp_path, cwd):
    run = _mlflow_run(tmp_path)
    lr = run / "metrics" / "learning_rate"
    with lr.open("wb") as fh:
        fh.write(b"1700000000000 0.001 1\n")
        fh.truncate(GIB)  # sparse
    size = GIB + (run / "metrics" / "loss").stat().st_size
    code, data, _ = run_limited("doctor", run, cwd=cwd)
    assert code == 2
    assert data["reports"][0]["reason"] == (f"{run}: metric files of {size} bytes ({size / MIB:.1f} MiB), over the "
                                            "cap of 512 MiB for a log (max_log_mb): not read")
    lr.unlink()
    config = tmp_path / "caps.toml"
    config.write_text("[tool.trainproof.caps]\nmax_log_entries = 29\n")
    code, data, _ = run_limited("doctor", run, "--config", config, cwd=cwd)
    assert code == 2
    assert data["reports"][0]["reason"] == (f"{run}: more than 29 lines in its metric files, over the cap "
                                            "(max_log_entries): not parsed")
    config.write_text("[tool.trainproof.caps]\nmax_log_entries = 30\n")
    code, data, _ = run_limited("doctor", run, "--config", config, cwd=cwd)
    assert code == 0 and data["reports"][0]["verdict"] == "PASS"


@pytest.mark.parametrize("seed", range(40))
def test_long_rows_are_streamed_past_line_by_line(monkeypatch, seed):
    """The streaming split against a plain split, with tiny reads and a tiny cap: every
    line keeps its number, lines over the cap become one marker each, none is lost."""
    import io
    import random

    from trainproof_lsp.readers import dataset as ds

    rng = random.Random(seed)
    read_size = rng.choice([3, 7, 16])
    monkeypatch.setattr(ds, "CHUNK_BYTES", read_size)
    cap = rng.choice([read_size, read_size + 3, 40])  # caps are MiB, chunks 128 KiB: a cap is never below a chunk
    lines = [b"x" * rng.choice([0, 1, 4, 5, 6, 9, 11, 39, 41, 90]) for _ in range(rng.randint(1, 30))]
    data = b"\n".join(lines) + (b"\n" if rng.random() < 0.5 else b"")
    expected = data.split(b"\n")
    if data.endswith(b"\n"):
        expected.pop()
    for source in ("file", "memory"):
        got: list[bytes | tuple[str, int]] = []
        chunks = (ds._chunks(io.BytesIO(data), b"", cap) if source == "file"
                  else ds._memory_chunks(data, 0, cap))
        for chunk in chunks:
            if isinstance(chunk, ds._OverCap):
                got.append(("over", chunk.size))
                continue
            parts = chunk.split(b"\n")
            if chunk.endswith(b"\n"):
                parts.pop()
            got.extend(parts)
        # a line is over the cap when it (without its newline) is longer than the cap; its
        # marker's size counts its newline, when it has one
        want = [("over", len(line) + (1 if i < len(expected) - 1 or data.endswith(b"\n") else 0))
                if len(line) > cap else line for i, line in enumerate(expected)]
        assert got == want, (source, read_size, cap, lines)
        if source == "file":  # the head read before streaming holds whole lines and a partial one
            cut = rng.randint(0, min(len(data), read_size))  # the head is one read (CHUNK_BYTES)
            got2: list = []
            for piece in ds._chunks(io.BytesIO(data[cut:]), data[:cut], cap):
                if isinstance(piece, ds._OverCap):
                    got2.append(("over", piece.size))
                    continue
                parts = piece.split(b"\n")
                if piece.endswith(b"\n"):
                    parts.pop()
                got2.extend(parts)
            assert got2 == want, ("head", cut, read_size, cap, lines)


def test_an_mlflow_metrics_folder_is_listed_only_so_far(tmp_path, monkeypatch):
    from trainproof_lsp.core.config import Config
    from trainproof_lsp.judge import compare
    from trainproof_lsp.readers import mlflow

    run = _mlflow_run(tmp_path)
    for i in range(12):
        (run / "metrics" / f"extra_{i}").write_text("1700000000000 1.0 1\n")
    monkeypatch.setattr(mlflow, "MAX_METRIC_FILES", 10)
    (report,) = compare.engine.doctor([run], Config()).reports
    assert report.verdict.value == "NOT-CHECKED"
    assert report.reason == f"{run}: more than 10 entries under metrics/, more than an MLflow run holds: not read"
    monkeypatch.setattr(mlflow, "MAX_METRIC_FILES", 13)  # the loss file and 12 others
    (report,) = compare.engine.doctor([run], Config()).reports
    assert report.verdict.value == "PASS"


def test_every_cap_is_an_editor_setting_and_in_the_security_docs():
    """One table of caps (core/caps.py): the editor's settings, their ranges and the
    documented table follow it."""
    import dataclasses

    from conftest import REPO
    from trainproof_lsp.core.caps import DEFAULT_CAPS, Caps
    from trainproof_lsp.server import settings

    caps = [f.name for f in dataclasses.fields(Caps)]
    fields = {f.name for f in dataclasses.fields(settings.Settings)}
    assert [c for c in caps if c not in fields or c not in settings._RANGES] == []
    doc = (REPO / "docs" / "security.md").read_text()
    for c in caps:
        assert f"| `{c}` | `trainproof.{settings._SNAKE_TO_CAMEL[c]}` | {getattr(DEFAULT_CAPS, c):,} |" in doc, c
