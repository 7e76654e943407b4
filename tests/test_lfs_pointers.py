"""Git LFS pointer files (what a checkout without `git lfs pull` leaves in a checkpoint's or a
dataset's place) are one NOT-CHECKED each, with the size of the file they stand for, from
every door: detection, doctor (files and folder walk), epoch, preflight (in this process and
with workers), the checkpoint reader, --reference and env --checkpoint. Never a FAIL: the
pointer's text is no safetensors header, no malformed dataset and no unreadable log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from trainproof_lsp.core.config import Config
from trainproof_lsp.core.model import Level, ReadError, Verdict
from trainproof_lsp.judge.engine import doctor, judge_checkpoint, judge_file, read_reference
from trainproof_lsp.judge.parallel import run_preflight
from trainproof_lsp.judge.preflight import judge_dataset, preflight
from trainproof_lsp.readers.checkpoint import CheckpointError, read_checkpoint
from trainproof_lsp.readers.detect import Detected, detect
from trainproof_lsp.readers.lfs import MAX_POINTER_BYTES, pointer_size

SIZE = 267_832_560
MESSAGE = "Git LFS pointer to a 267,832,560-byte file, not downloaded: run `git lfs pull`"
HF_POINTERS = ("model.safetensors", "pytorch_model.bin", "optimizer.pt", "training_args.bin", "trainer_state.json")


def pointer(size: int = SIZE, oid: str = "4d7a2146" * 8) -> bytes:
    """A pointer as `git lfs` writes it (spec v1: version first, then keys in sorted order)."""
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize {size}\n".encode()


def hf_checkout(root: Path) -> Path:
    """An HF output folder checked out without its LFS objects: the Trainer's big files are
    pointers, config.json is real."""
    out = root / "out"
    out.mkdir()
    for n, name in enumerate(HF_POINTERS):
        (out / name).write_bytes(pointer(oid=f"{n:02d}" * 32))
    (out / "config.json").write_text('{"model_type": "llama", "vocab_size": 32000}\n')
    return out


def cli(*args: str | Path, cwd: Path) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "trainproof_lsp", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=180)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    return proc.returncode, proc.stdout


# --- recognising a pointer --------------------------------------------------------------------

@pytest.mark.parametrize("data,size", [
    (pointer(), SIZE),
    (pointer(0), 0),
    (pointer().replace(b"\n", b"\r\n"), SIZE),  # checked out with autocrlf
    (pointer()[:-1], SIZE),  # no newline after the size
    # an extension key sorts before oid (spec: keys in order, `ext-N-name` first)
    (pointer().replace(b"oid", b"ext-0-foo sha256:" + b"0" * 64 + b"\noid", 1), SIZE),
    (pointer().replace(b"git-lfs.github.com", b"hawser.github.com"), SIZE),  # pre-1.0 spec name
])
def test_a_pointer_is_read_with_the_size_it_stands_for(data, size):
    assert pointer_size(data) == size


@pytest.mark.parametrize("data", [
    pointer() + b"x" * (MAX_POINTER_BYTES + 1 - len(pointer())),  # more than 1 KiB: not a pointer
    pointer().replace(b"oid sha256:", b"oid md5:"),
    pointer(oid="4d7a2146" * 7),  # a short hash
    pointer().replace(b"size 267832560\n", b""),
    pointer().replace(b"version https://git-lfs.github.com/spec/v1", b"version https://example.com/spec/v1"),
    b'{"version": "https://git-lfs.github.com/spec/v1"}\n',
    b"version https://git-lfs.github.com/spec/v1\n",
    b"",
])
def test_other_bytes_are_not_a_pointer(data):
    assert pointer_size(data) is None


@pytest.mark.parametrize("name", [*HF_POINTERS, "train.jsonl", "metrics.csv", "events.out.tfevents.1.host",
                                  "train.py", "weights", "model.safetensors.index.json"])
def test_detection_says_pointer_whatever_the_name(tmp_path, name):
    assert detect(tmp_path / name, pointer()) == Detected("lfs-pointer", "git-lfs-pointer", MESSAGE)


# --- doctor and epoch ------------------------------------------------------------------------

def test_doctor_on_an_lfs_checkout_of_an_hf_output_folder(tmp_path):
    out = hf_checkout(tmp_path)
    outcome = doctor([out], Config())
    assert [(Path(r.artefact.path).name, r.artefact.kind, r.verdict, r.reason) for r in outcome.reports] == [
        (name, "lfs-pointer", Verdict.NOT_CHECKED, f"{out / name}: {MESSAGE}") for name in sorted(HF_POINTERS)]
    for r in outcome.reports:  # one finding each: the NOT-CHECKED, nothing more
        assert [(f.id, f.level, f.message) for f in r.findings] == [
            ("TP-NOT-CHECKED", Level.NOT_CHECKED, f"{r.artefact.path}: {MESSAGE}")]
    assert [(Path(p.path).name, p.reason) for p in outcome.passed_over] == [
        ("config.json", "model config; read for vocab_size/num_labels")]

    code, text = cli("doctor", out, cwd=tmp_path)
    assert code == 2
    assert "FAIL" not in text
    for name in HF_POINTERS:  # exactly one line per pointer file
        assert [line for line in text.splitlines() if name in line] == [
            f"{out / name}: NOT-CHECKED {MESSAGE}"]
    assert "5 report(s): 5 NOT-CHECKED; 1 passed over. Worst: NOT-CHECKED" in text


def test_doctor_and_epoch_on_one_pointer_file(tmp_path):
    out = hf_checkout(tmp_path)
    for command in ("doctor", "epoch"):
        code, text = cli(command, out / "trainer_state.json", cwd=tmp_path)
        assert code == 2
        assert text.splitlines()[0] == f"{out / 'trainer_state.json'}: NOT-CHECKED {MESSAGE}"
        assert "FAIL" not in text
    code, text = cli("doctor", out / "model.safetensors", cwd=tmp_path)
    assert (code, text.splitlines()[0]) == (2, f"{out / 'model.safetensors'}: NOT-CHECKED {MESSAGE}")


def test_a_pointer_of_any_name_in_a_run_folder_is_found_by_the_walk(tmp_path):
    out = hf_checkout(tmp_path)
    (out / "weights").write_bytes(pointer(1234))
    (out / "notes").write_text("version 2 of the run\n")  # text, no pointer: not a candidate
    reports = {Path(r.artefact.path).name: r for r in doctor([out], Config()).reports}
    assert reports["weights"].reason == (f"{out / 'weights'}: Git LFS pointer to a 1,234-byte file, not downloaded: "
                                         "run `git lfs pull`")
    assert "notes" not in reports


def test_an_editor_buffer_holding_a_pointer_is_judged_the_same(tmp_path):
    report = judge_file(tmp_path / "train.jsonl", Config(), data=pointer())
    assert (report.verdict, report.reason) == (Verdict.NOT_CHECKED, f"{tmp_path / 'train.jsonl'}: {MESSAGE}")
    assert [f.id for f in report.findings] == ["TP-NOT-CHECKED"]


# --- checkpoints -----------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["model.safetensors", "pytorch_model.bin", "optimizer.pt", "training_args.bin",
                                  "model.ckpt", "weights.pkl"])
def test_the_checkpoint_reader_says_pointer_not_bad_header(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(pointer())
    with pytest.raises(CheckpointError) as e:
        read_checkpoint(path)
    assert str(e.value) == f"{path}: {MESSAGE}"
    report = judge_checkpoint(path, Config())
    assert (report.verdict, report.artefact.kind, report.artefact.format) == (
        Verdict.NOT_CHECKED, "lfs-pointer", "git-lfs-pointer")
    assert [(f.id, f.message) for f in report.findings] == [("TP-NOT-CHECKED", f"{path}: {MESSAGE}")]
    with pytest.raises(ReadError) as r:
        read_reference(path)
    assert str(r.value) == f"--reference {path}: {MESSAGE}"


def test_env_resume_checkpoint_that_is_a_pointer(tmp_path):
    out = hf_checkout(tmp_path)
    code, text = cli("env", "--checkpoint", out / "optimizer.pt", cwd=tmp_path)
    assert code == 2
    assert [line for line in text.splitlines() if "optimizer.pt" in line] == [
        f"{out / 'optimizer.pt'}: NOT-CHECKED {MESSAGE}"]


# --- preflight ---------------------------------------------------------------------------------

def test_preflight_on_a_pointer_jsonl_is_not_checked_not_malformed(tmp_path):
    data = tmp_path / "train.jsonl"
    data.write_bytes(pointer(1_234_567))
    reason = f"{data}: Git LFS pointer to a 1,234,567-byte file, not downloaded: run `git lfs pull`"
    for jobs in ("1", "2"):
        code, text = cli("preflight", "--jobs", jobs, data, cwd=tmp_path)
        assert code == 2
        assert text.splitlines() == [f"{data}: NOT-CHECKED {reason.split(': ', 1)[1]}",
                                     "1 report(s): 1 NOT-CHECKED. Worst: NOT-CHECKED"]
    # The same report from preflight in this process, with workers and from doctor.
    for outcome in (preflight([data], Config()), run_preflight([data], Config(), jobs=2), doctor([data], Config())):
        (report,) = outcome.reports
        assert (report.verdict, report.artefact.kind, report.reason, [f.id for f in report.findings]) == (
            Verdict.NOT_CHECKED, "lfs-pointer", reason, ["TP-NOT-CHECKED"])
    assert judge_dataset(data, Config()).reason == reason


def test_preflight_eval_pointer_beside_a_real_training_file(tmp_path):
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps({"text": f"row {i} about topic {i * 7}"}) + "\n" for i in range(40)))
    held = tmp_path / "eval.jsonl"
    held.write_bytes(pointer(99))
    reports = {Path(r.artefact.path).name: r for r in preflight([train], Config(), eval_path=held).reports}
    assert reports["eval.jsonl"].reason == (f"{held}: Git LFS pointer to a 99-byte file, not downloaded: "
                                            "run `git lfs pull`")
    assert (reports["train.jsonl"].artefact.kind, reports["train.jsonl"].verdict) == ("dataset", Verdict.PASS)
