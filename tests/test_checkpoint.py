"""Checkpoints judged without executing them, on fixtures made with real torch 2.13.0 by
fixtures/checkpoints/make_checkpoints.py (torch is not needed here): every finding at
the right byte offset with the tensor and entry named; unreadable input NOT-CHECKED."""

from __future__ import annotations

import json
import math
import os
import shutil
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import FIXTURES, REPO, ids, only
from trainproof_lsp.core.config import Config
from trainproof_lsp.judge.engine import doctor, judge_file, read_reference
from trainproof_lsp.core.model import Level, Verdict
from trainproof_lsp.readers.checkpoint import read_checkpoint, scan_floats

CKPT = FIXTURES / "checkpoints"


def judge(path: Path, reference: Path | None = None):
    ref = read_reference(reference) if reference else None
    return judge_file(path, Config(), reference=ref)


def cli(*args: str | Path, cwd: Path = REPO) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("TRAINPROOF_DEBUG", None)
    proc = subprocess.run([sys.executable, "-m", "trainproof_lsp", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)
    assert "Traceback" not in proc.stdout + proc.stderr
    return proc


def float_at(path: Path, offset: int, fmt: str = "<f") -> float:
    with path.open("rb") as fh:
        fh.seek(offset)
        return struct.unpack(fmt, fh.read(struct.calcsize(fmt)))[0]


# --- healthy files, HF and Lightning residents ------------------------------------------------

@pytest.mark.parametrize("name", ["clean.pt", "clean.safetensors", "optimizer.pt", "scheduler.pt",
                                  "rng_state.pth", "lightning.ckpt"])
def test_healthy_checkpoints_pass_and_say_what_was_checked(name):
    report = judge(CKPT / name)
    assert report.verdict is Verdict.PASS, [(f.id, f.message) for f in report.findings]
    ran = {c.group for c in report.checks if c.ran}
    assert {"TP-ENV-CKPT-TRUNCATED", "TP-ENV-CKPT-CORRUPT", "TP-CKPT-NONFINITE"} <= ran


def test_tensors_are_named_typed_and_shaped_from_the_pickle_alone():
    facts = read_checkpoint(CKPT / "clean.pt")
    assert facts.format == "torch-zip"
    got = {t.name: (t.dtype, t.shape, t.entry, t.role) for t in facts.tensors}
    assert got == {
        "fc1.weight": ("float32", (8, 8), "clean/data/0", "weights"),
        "fc1.bias": ("float32", (8,), "clean/data/1", "weights"),
        "fc2.weight": ("float32", (4, 8), "clean/data/2", "weights"),
        "fc2.bias": ("float32", (4,), "clean/data/3", "weights"),
    }
    assert all(t.scanned for t in facts.tensors)


def test_rng_state_with_numpy_state_is_allowed():
    facts = read_checkpoint(CKPT / "rng_state.pth")
    assert facts.unsafe == ()
    assert set(facts.top_keys) == {"python", "numpy", "cpu"}


def test_lightning_checkpoint_roles_and_callback_inf_is_not_a_finding():
    facts = read_checkpoint(CKPT / "lightning.ckpt")
    roles = {t.name: t.role for t in facts.tensors}
    assert roles["state_dict.model.fc1.weight"] == "weights"
    assert any(n.startswith("optimizer_states.0.state.") and r == "optimizer" for n, r in roles.items())
    # ModelCheckpoint's kth_value is inf by design before the first evaluation.
    kth = next(t for t in facts.tensors if t.name.endswith("kth_value"))
    assert kth.inf == 1 and kth.role == "other"
    assert facts.has_optimizer is True
    assert judge(CKPT / "lightning.ckpt").verdict is Verdict.PASS


# --- tensor contents ---------------------------------------------------------------------------

def test_nan_weights_name_the_tensor_count_and_first_element_at_its_byte_offset():
    path = CKPT / "nan_weights.pt"
    report = judge(path)
    f = only(report, "TP-CKPT-NONFINITE")
    assert f.level is Level.FAIL and report.verdict is Verdict.FAIL
    assert f.evidence["tensor"] == "fc1.weight" and f.evidence["entry"] == "nan_weights/data/0"
    assert (f.evidence["nan"], f.evidence["inf"], f.evidence["first_index"]) == (2, 0, 1 * 8 + 2)
    assert math.isnan(float_at(path, f.location.byte_offset))


def test_inf_weights_are_counted_apart_from_nan():
    path = CKPT / "inf_weights.pt"
    f = only(judge(path), "TP-CKPT-NONFINITE")
    assert (f.evidence["tensor"], f.evidence["nan"], f.evidence["inf"]) == ("fc2.weight", 0, 2)
    assert math.isinf(float_at(path, f.location.byte_offset))


def test_bf16_nan_and_inf_in_safetensors():
    path = CKPT / "nan_bf16.safetensors"
    f = only(judge(path), "TP-CKPT-NONFINITE")
    assert (f.evidence["tensor"], f.evidence["dtype"], f.evidence["nan"], f.evidence["inf"]) == \
        ("fc2.weight", "bfloat16", 1, 1)
    bits = struct.unpack("<H", path.read_bytes()[f.location.byte_offset:f.location.byte_offset + 2])[0]
    assert bits & 0x7F80 == 0x7F80


def test_dead_layer_is_an_all_zero_weight_matrix():
    report = judge(CKPT / "dead_layer.pt")
    f = only(report, "TP-CKPT-DEAD-TENSOR")
    assert f.level is Level.WARN and f.evidence["tensor"] == "fc1.weight" and f.evidence["numel"] == 64
    assert report.verdict is Verdict.WARN


def test_strided_views_are_scanned_element_by_element():
    facts = read_checkpoint(CKPT / "strided_views.pt")
    by_name = {t.name: t for t in facts.tensors}
    assert by_name["weight_t"].nan == 1 and by_name["weight_t"].first_bad == 3 * 4 + 1
    assert by_name["even_rows"].nan == 0  # the NaN row is not part of this view


def test_mixed_dtypes_are_info_only():
    report = judge(CKPT / "mixed_dtypes.pt")
    f = only(report, "TP-CKPT-MIXED-DTYPE")
    assert f.level is Level.INFO and f.evidence["first_rare_tensor"] == "fc2.weight"
    assert report.verdict is Verdict.PASS


def test_numpy_and_pure_bytes_scans_agree_on_every_fixture(monkeypatch):
    pytest.importorskip("numpy")
    files = sorted(p for p in CKPT.rglob("*") if p.suffix in (".pt", ".pth", ".ckpt", ".safetensors"))
    with_numpy = {p: [(t.name, t.nan, t.inf, t.first_bad, t.all_zero) for t in read_checkpoint(p).tensors]
                  for p in files}
    monkeypatch.setenv("TRAINPROOF_NO_NUMPY", "1")
    for p in files:
        facts = read_checkpoint(p)
        assert not facts.numpy_used or not facts.scanned
        assert [(t.name, t.nan, t.inf, t.first_bad, t.all_zero) for t in facts.tensors] == with_numpy[p], p


@pytest.mark.parametrize("dtype,fmt", [("float32", "<f"), ("float64", "<d"), ("float16", "<e")])
def test_scan_counts_nan_inf_and_negative_zero(dtype, fmt):
    values = [0.0, -0.0, 1.5, float("nan"), float("-inf"), 2.0, float("inf")]
    raw = b"".join(struct.pack(fmt, v) for v in values)
    assert scan_floats(raw, dtype, False, None) == (1, 2, 3, False)
    zeros = struct.pack(fmt, 0.0) + struct.pack(fmt, -0.0)
    assert scan_floats(zeros, dtype, False, None) == (0, 0, None, True)
    np = pytest.importorskip("numpy")
    assert scan_floats(raw, dtype, False, np) == (1, 2, 3, False)
    assert scan_floats(zeros, dtype, False, np) == (0, 0, None, True)


def test_bfloat16_scan_by_bits():
    # bf16 = the high half of a float32
    halves = [struct.pack("<f", v)[2:] for v in (1.0, float("nan"), -0.0, float("inf"))]
    raw = b"".join(halves)
    assert scan_floats(raw, "bfloat16", False, None) == (1, 1, 1, False)
    np = pytest.importorskip("numpy")
    assert scan_floats(raw, "bfloat16", False, np) == (1, 1, 1, False)


# --- the container -----------------------------------------------------------------------------

def test_truncated_archive_lists_what_was_written_before_the_cut():
    report = judge(CKPT / "truncated.pt")
    f = only(report, "TP-ENV-CKPT-TRUNCATED")
    assert f.level is Level.FAIL
    assert f.evidence["complete_entries"] >= 1 and f.evidence["file_size"] == (CKPT / "truncated.pt").stat().st_size
    assert "no central directory" in f.message and "truncated/data.pkl" in f.message
    skipped = {c.group: c.reason for c in report.checks if not c.ran}
    assert "cut off" in skipped["TP-CKPT-NONFINITE"]


def test_crc_corrupt_entry_is_named_at_its_data_offset():
    path = CKPT / "crc_corrupt.pt"
    f = only(judge(path), "TP-ENV-CKPT-CORRUPT")
    assert f.evidence["entry"] == "crc_corrupt/data/0"
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("crc_corrupt/data/0")
    assert info.header_offset < f.location.byte_offset < info.header_offset + 200


def test_legacy_format_is_not_checked_with_the_reason():
    report = judge(CKPT / "legacy.pt")
    assert report.verdict is Verdict.NOT_CHECKED
    assert only(report, "TP-ENV-CKPT-LEGACY").level is Level.NOT_CHECKED
    assert "pre-1.6" in report.reason and "\n" not in report.reason
    proc = cli("doctor", CKPT / "legacy.pt")
    assert proc.returncode == 2 and "NOT-CHECKED" in proc.stdout


def test_safetensors_truncated_and_bad_header():
    assert only(judge(CKPT / "truncated.safetensors"), "TP-ENV-CKPT-TRUNCATED").evidence["tensor"] == "fc2.weight"
    f = only(judge(CKPT / "bad_header.safetensors"), "TP-CKPT-BAD-HEADER")
    assert f.level is Level.FAIL and "not valid JSON" in f.message


def test_safetensors_header_length_beyond_the_file(tmp_path):
    path = tmp_path / "model.safetensors"
    path.write_bytes(struct.pack("<Q", 10_000) + b'{"a": 1')
    assert only(judge(path), "TP-ENV-CKPT-TRUNCATED").evidence["header_length"] == 10_000
    path.write_bytes(struct.pack("<Q", 2 ** 60) + b"garbage")
    assert ids(judge(path)) == ["TP-CKPT-BAD-HEADER"]


def test_safetensors_offsets_must_match_dtype_and_shape(tmp_path):
    header = json.dumps({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 12]}}).encode()
    path = tmp_path / "bad.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header + bytes(16))
    assert "needs 16 bytes" in only(judge(path), "TP-CKPT-BAD-HEADER").message


def test_empty_checkpoint_fails(tmp_path):
    path = tmp_path / "model.pt"
    path.write_bytes(b"")
    f = only(judge(path), "TP-ENV-CKPT-EMPTY")
    assert f.level is Level.FAIL


@pytest.mark.parametrize("content", [b"this is not a checkpoint\n", bytes(range(256)) * 4])
def test_not_a_checkpoint_is_not_checked_exit_2(tmp_path, content):
    path = tmp_path / "weights.bin"
    path.write_bytes(content)
    report = judge(path)
    assert report.verdict is Verdict.NOT_CHECKED and report.reason.startswith(str(path))
    assert only(report, "TP-ENV-CKPT-UNREADABLE").level is Level.NOT_CHECKED
    proc = cli("doctor", path, "--json", cwd=tmp_path)
    assert proc.returncode == 2
    assert json.loads(proc.stdout)["reports"][0]["verdict"] == "NOT-CHECKED"


def test_zip_without_data_pkl_is_not_a_torch_checkpoint(tmp_path):
    path = tmp_path / "archive.pt"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("readme.txt", "hello")
    report = judge(path)
    assert report.verdict is Verdict.NOT_CHECKED and "without data.pkl" in report.reason


def test_missing_storage_entry_is_corrupt(tmp_path):
    src = CKPT / "clean.pt"
    path = tmp_path / "clean.pt"
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(path, "w") as zout:
        for info in zin.infolist():
            if info.filename != "clean/data/2":
                zout.writestr(info, zin.read(info))
    f = only(judge(path), "TP-ENV-CKPT-CORRUPT")
    assert f.evidence["entry"] == "clean/data/2" and f.evidence["tensor"] == "fc2.weight"


# --- resume checkpoints, shards, reference --------------------------------------------------------

def test_resume_checkpoint_without_optimizer_state_warns():
    f = only(judge(CKPT / "resume_no_optimizer.ckpt"), "TP-CKPT-NO-OPTIMIZER")
    assert f.level is Level.WARN and "epoch" in f.evidence["progress_keys"]


def test_hf_checkpoint_folder_without_optimizer_and_training_args_walked_and_allowed():
    outcome = doctor([CKPT / "hf_output"], Config())
    by_path = {r.artefact.path: r for r in outcome.reports}
    warned = by_path[str(CKPT / "hf_output" / "checkpoint-16" / "model.safetensors")]
    assert ids(warned) == ["TP-CKPT-NO-OPTIMIZER"]
    assert by_path[str(CKPT / "hf_output" / "checkpoint-8" / "model.safetensors")].verdict is Verdict.PASS
    # training_args.bin is walked (never unpickled): a TrainingArguments created with
    # NEWOBJ, as the Trainer writes it, is on the allow-list.
    args = by_path[str(CKPT / "hf_output" / "checkpoint-8" / "training_args.bin")]
    assert args.verdict is Verdict.PASS
    assert any(c.group == "TP-CKPT-UNSAFE-PICKLE" and c.ran for c in args.checks)
    assert not any(f.id == "TP-CKPT-UNSAFE-PICKLE" for r in outcome.reports for f in r.findings)


def test_sharded_index_missing_shard_is_located_on_its_line():
    path = CKPT / "sharded" / "model.safetensors.index.json"
    f = only(judge(path), "TP-ENV-CKPT-MISSING")
    assert f.evidence["shard"] == "model-00002-of-00002.safetensors"
    lines = path.read_text().splitlines()
    assert "model-00002-of-00002.safetensors" in lines[f.location.span.start_line]


def test_shape_and_key_drift_against_a_reference():
    report = judge(CKPT / "clean.pt", reference=CKPT / "reference_wider.pt")
    drift = sorted((f.evidence["tensor"], f.evidence["shape"], f.evidence["reference_shape"])
                   for f in report.findings if f.id == "TP-CKPT-SHAPE-DRIFT")
    assert drift == [("fc2.bias", "[4]", "[6]"), ("fc2.weight", "[4, 8]", "[6, 8]")]
    keys = only(report, "TP-CKPT-KEY-DRIFT")
    assert keys.evidence["missing"] == 2 and keys.evidence["first_missing"] == "fc3.weight"
    # A Lightning checkpoint's `state_dict.model.` names line up with a plain state dict.
    lightning = judge(CKPT / "lightning.ckpt", reference=CKPT / "clean.pt")
    assert not [f for f in lightning.findings if f.id in ("TP-CKPT-SHAPE-DRIFT", "TP-CKPT-KEY-DRIFT")]


def test_reference_that_is_not_usable_is_a_one_line_error(tmp_path):
    bad = tmp_path / "ref.pt"
    bad.write_bytes(b"nope")
    proc = cli("doctor", CKPT / "clean.pt", "--reference", bad)
    assert proc.returncode == 2 and "--reference" in proc.stdout


def test_doctor_json_over_the_fixtures_is_deterministic(tmp_path):
    folder = tmp_path / "ck"
    shutil.copytree(CKPT, folder, ignore=shutil.ignore_patterns("*.py", "malicious_*"))
    first = cli("doctor", "ck", "--json", cwd=tmp_path)
    second = cli("doctor", "ck", "--json", cwd=tmp_path)
    assert first.returncode == 1 and first.stdout == second.stdout
    data = json.loads(first.stdout)
    for report in data["reports"]:
        for f in report["findings"]:
            loc = f["location"]
            assert "range" in loc or "byte_offset" in loc or f["id"] == "TP-CKPT-NO-OPTIMIZER", f


def test_fixtures_stay_small():
    total = sum(p.stat().st_size for p in CKPT.rglob("*") if p.is_file() and p.suffix != ".py")
    assert total < 300_000
