"""Every pickle in a run folder is walked or named, never loaded.

An HF output folder holding `model_best.pth.tar`, `model.pkl` and a malicious
`training_args.bin` is judged file by file: the payloads are found (FAIL), the files HF
Trainer, torch, numpy and joblib really write pass the allow-list (fixtures made by
fixtures/checkpoints/make_residents.py), and a payload behind a 70 MiB prefix is found —
or, under a smaller cap, the report says the walk stopped there; never "not a pickle".
Doctor runs in a child process under a memory limit, a CPU limit and a timeout; the
marker files the payloads would create never appear and the victim file never changes.
"""

from __future__ import annotations

import io
import pickle
import struct
import tarfile
import zipfile
from pathlib import Path

import pytest

from conftest import FIXTURES
from limited_child import findings, run_limited
from trainproof_lsp.core.config import Config
from trainproof_lsp.judge.engine import doctor
from trainproof_lsp.core.model import Verdict
from trainproof_lsp.readers import pickle_walk as pw
from trainproof_lsp.readers.checkpoint import read_checkpoint

RESIDENTS = FIXTURES / "checkpoints" / "residents"
MIB = 1 << 20


# --- hostile files, made here ----------------------------------------------------------------

def shell_payload(command: str) -> bytes:
    """Protocol-2 opcodes of `posix.system(command)`: what pickle.dumps writes for an
    object whose __reduce__ returns (os.system, (command,))."""
    return b"cposix\nsystem\n" + _unicode(command) + b"\x85R"


def truncate_payload(victim: Path) -> bytes:
    """`builtins.open(victim, "w")`: loading it empties the victim file."""
    return b"cbuiltins\nopen\n" + _unicode(str(victim)) + _unicode("w") + b"\x86R"


def _unicode(text: str) -> bytes:
    raw = text.encode()
    return b"X" + struct.pack("<I", len(raw)) + raw


def bare_pickle(*items: bytes) -> bytes:
    """A protocol-2 pickle of a tuple of the given opcode snippets."""
    return b"\x80\x02(" + b"".join(items) + b"t."


def torch_zip(path: Path, pickles: dict[str, bytes]) -> Path:
    """A torch.save-shaped archive (STORED entries) with the given <folder>/data.pkl."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        for folder, data in pickles.items():
            zf.writestr(f"{folder}/data.pkl", data)
            zf.writestr(f"{folder}/byteorder", "little")
            zf.writestr(f"{folder}/version", "3\n")
    return path


@pytest.fixture()
def hostile(tmp_path: Path) -> dict[str, Path]:
    """A workspace with a marker folder and a victim file the payloads target."""
    marks = tmp_path / "marks"
    marks.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    empty = tmp_path / "cwd"
    empty.mkdir()
    return {"root": tmp_path, "marks": marks, "victim": victim, "cwd": empty}


def assert_untouched(h: dict[str, Path]) -> None:
    assert list(h["marks"].iterdir()) == [], "a payload ran"
    assert h["victim"].read_text() == "precious\n", "the victim file changed"


def test_the_payloads_are_live(hostile):
    # The control: an ordinary unpickler really runs them.
    pickle.loads(bare_pickle(shell_payload(f"touch {hostile['marks']}/control")))
    assert (hostile["marks"] / "control").exists()
    other = hostile["root"] / "other.txt"
    other.write_text("x")
    pickle.loads(bare_pickle(truncate_payload(other)))
    assert other.read_text() == ""


def test_hf_output_folder_with_malicious_training_args_and_pkl_fails(hostile):
    out = hostile["root"] / "output"
    out.mkdir()
    marks = hostile["marks"]
    torch_zip(out / "training_args.bin",
              {"training_args": bare_pickle(shell_payload(f"touch {marks}/from_training_args"))})
    (out / "model.pkl").write_bytes(bare_pickle(truncate_payload(hostile["victim"])))
    torch_zip(out / "model_best.pth.tar", {"model_best": bare_pickle(b"K\x01")})
    (out / "trainer_state.json").write_text(
        '{"log_history": [{"loss": 2.0, "step": 1}, {"loss": 1.5, "step": 2}, {"loss": 1.2, "step": 3}]}')
    code, data, _ = run_limited("doctor", out, cwd=hostile["cwd"])
    assert code == 1
    by_file = {}
    for f in findings(data, "TP-CKPT-UNSAFE-PICKLE"):
        by_file.setdefault(Path(f["location"]["path"]).name, []).append(f["evidence"]["global"])
    assert by_file == {"training_args.bin": ["posix.system"], "model.pkl": ["builtins.open"]}
    verdicts = {Path(r["artefact"]["path"]).name: r["verdict"] for r in data["reports"]}
    assert verdicts["model_best.pth.tar"] == "PASS"  # walked: a clean pickle
    assert verdicts["training_args.bin"] == verdicts["model.pkl"] == "FAIL"
    assert not any(Path(p["path"]).suffix in (".pkl", ".bin", ".tar") for p in data["passed_over"])
    assert_untouched(hostile)


@pytest.mark.parametrize("name", sorted(p.name for p in RESIDENTS.iterdir() if "malicious" not in p.name))
def test_files_the_real_libraries_write_pass_the_allow_list(name):
    facts = read_checkpoint(RESIDENTS / name)
    assert facts.pickles_walked >= 1
    assert facts.unsafe == () and facts.not_checked == (), facts.unsafe
    assert not [p for p in facts.problems if p.kind in ("unreadable", "corrupt")], facts.problems


def test_training_args_classes_are_allowed_only_when_created_without_a_call(tmp_path):
    # What the Trainer writes: NEWOBJ (cls.__new__) and BUILD; no __init__ runs.
    facts = read_checkpoint(RESIDENTS / "training_args.bin")
    assert facts.unsafe == ()
    # Calling the class runs its __init__/__post_init__ with arguments from the file.
    called = bare_pickle(b"ctransformers.training_args\nTrainingArguments\n" + _unicode("out") + b"\x85R")
    (tmp_path / "training_args.bin").write_bytes(called)
    facts = read_checkpoint(tmp_path / "training_args.bin")
    assert [(g.module, g.name) for g in facts.unsafe] == [("transformers.training_args", "TrainingArguments")]
    assert "runs its __init__" in facts.unsafe[0].danger


def test_joblib_payload_after_raw_array_bytes_is_found():
    facts = read_checkpoint(RESIDENTS / "malicious_after_array.joblib")
    assert [(g.module, g.name) for g in facts.unsafe] == [("posix", "system")]
    data = (RESIDENTS / "malicious_after_array.joblib").read_bytes()
    # located at the STACK_GLOBAL naming it, which lies after the array's 48 raw bytes
    at = facts.unsafe[0].byte_offset
    raw = struct.pack("<6d", *range(6))
    assert data[at:at + 1] == b"\x93" and b"posix" in data[at - 16:at]
    assert 0 < data.find(raw) < data.find(raw) + len(raw) < at


def prefixed_pickle(prefix_bytes: int, payload: bytes) -> bytes:
    # PROTO 4, BINBYTES8 <prefix_bytes zero bytes>, the payload, TUPLE2, STOP
    return (b"\x80\x04" + b"\x8e" + struct.pack("<Q", prefix_bytes) + bytes(prefix_bytes)
            + payload + b"\x86.")


@pytest.mark.parametrize("name", ["model.pkl", "weights.pt"])
def test_payload_after_a_70_mib_prefix_is_found(hostile, name):
    path = hostile["root"] / name
    path.write_bytes(prefixed_pickle(70 * MIB, shell_payload(f"touch {hostile['marks']}/late")))
    code, data, _ = run_limited("doctor", path, cwd=hostile["cwd"])
    assert code == 1
    (f,) = findings(data, "TP-CKPT-UNSAFE-PICKLE")
    assert f["evidence"]["global"] == "posix.system"
    assert f["location"]["byte_offset"] == 2 + 9 + 70 * MIB
    assert not findings(data, "TP-NOT-CHECKED")
    assert_untouched(hostile)


def test_past_the_byte_cap_the_report_says_so_never_not_a_pickle(hostile):
    path = hostile["root"] / "model.pkl"
    path.write_bytes(prefixed_pickle(70 * MIB, shell_payload(f"touch {hostile['marks']}/late")))
    config = hostile["root"] / "caps.toml"
    config.write_text("[tool.trainproof.caps]\nmax_pickle_mb = 64\n")
    code, data, _ = run_limited("doctor", path, "--config", config, cwd=hostile["cwd"])
    assert code == 2
    (f,) = findings(data, "TP-NOT-CHECKED")
    assert "stopped at the byte cap of 67108864 bytes (cap max_pickle_mb)" in f["message"]
    assert "not a checkpoint" not in str(data) and "not a pickle" not in str(data)
    assert_untouched(hostile)


def test_zip_with_two_archive_folders_walks_every_data_pkl(hostile):
    path = torch_zip(hostile["root"] / "model.pt", {
        "a": bare_pickle(b"K\x01"),
        "bb": bare_pickle(shell_payload(f"touch {hostile['marks']}/second")),
    })
    code, data, _ = run_limited("doctor", path, cwd=hostile["cwd"])
    assert code == 1
    (f,) = findings(data, "TP-CKPT-UNSAFE-PICKLE")
    assert (f["evidence"]["global"], f["evidence"]["entry"]) == ("posix.system", "bb/data.pkl")
    (note,) = findings(data, "TP-NOT-CHECKED")
    assert "2 archive folders" in note["message"] and "ambiguous" in note["message"]
    assert_untouched(hostile)


def legacy_tar(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_torch_legacy_tar_format_walks_every_member(hostile, tmp_path):
    # storages: a count, then (key, location, storage type), int64 numel, raw bytes
    storage_record = bare_pickle(_unicode("0"), _unicode("cpu"), b"ctorch\nFloatStorage\n")
    storages = (pickle.dumps(2, protocol=2) + storage_record + struct.pack("<q", 3) + bytes(12)
                + bare_pickle(_unicode("1"), _unicode("cpu"),
                              shell_payload(f"touch {hostile['marks']}/storage")))
    path = legacy_tar(tmp_path / "old.tar", {
        "sys_info": pickle.dumps({"protocol_version": 1000, "little_endian": True}, protocol=2),
        "pickle": pickle.dumps({"epoch": 3}, protocol=2),
        "storages": storages,
        "tensors": pickle.dumps(0, protocol=2),
    })
    code, data, _ = run_limited("doctor", tmp_path, cwd=hostile["cwd"])
    assert code == 1
    (f,) = findings(data, "TP-CKPT-UNSAFE-PICKLE")
    assert (f["evidence"]["global"], f["evidence"]["entry"]) == ("posix.system", "storages")
    assert findings(data, "TP-ENV-CKPT-LEGACY")  # tensors of this format are not read: said so
    assert_untouched(hostile)
    clean = read_checkpoint(legacy_tar(tmp_path / "clean.tar", {
        "sys_info": pickle.dumps({"protocol_version": 1000}, protocol=2),
        "pickle": pickle.dumps({"epoch": 3}, protocol=2),
        "storages": pickle.dumps(1, protocol=2) + storage_record + struct.pack("<q", 3) + bytes(12),
        "tensors": pickle.dumps(0, protocol=2),
    }))
    assert clean.format == "torch-tar" and clean.unsafe == () and clean.not_checked == ()
    assert clean.pickles_walked == 5


def test_a_clean_pkl_is_judged_and_listed_not_passed_over(tmp_path):
    (tmp_path / "model.pkl").write_bytes(pickle.dumps({"w": [1.0, 2.0]}))
    outcome = doctor([tmp_path], Config())
    (report,) = outcome.reports
    assert report.verdict is Verdict.PASS and report.artefact.path.endswith("model.pkl")
    assert any(c.group == "TP-CKPT-UNSAFE-PICKLE" and c.ran for c in report.checks)
    assert outcome.passed_over == ()


def test_a_pickle_naming_millions_of_globals_is_bounded():
    # 300k distinct globals: every one is counted, only the first few are kept.
    data = b"\x80\x02(" + b"".join(b"cm%d\nf\n" % i for i in range(300_000)) + b"l."
    walked = pw.walk(data)
    assert len(walked.globals) == 10_000 and walked.unlisted == 290_000
    capped = pw.walk(data, max_ops=1000)
    assert capped.capped.startswith("stopped after 1000 opcodes") and not capped.error


def test_payload_behind_millions_of_small_opcodes_is_reported_as_not_walked(hostile):
    # 3M (BININT1, POP) pairs before the payload: past the opcode cap, the report says how
    # far the walk got (NOT-CHECKED, exit 2) rather than passing the file.
    path = hostile["root"] / "model.pkl"
    path.write_bytes(b"\x80\x02" + b"K\x010" * 3_000_000 + bare_pickle(shell_payload("touch never"))[2:])
    code, data, _ = run_limited("doctor", path, cwd=hostile["cwd"])
    assert code == 2
    (note,) = findings(data, "TP-NOT-CHECKED")
    # opcode 1,000,001 is the K of pair 499,999, at byte 2 + 3 * 499,999 + 2
    assert "the walk stopped after 1000000 opcodes (cap max_pickle_ops) at byte 1500001" in note["message"]
    assert data["reports"][0]["verdict"] == "NOT-CHECKED"
    assert_untouched(hostile)
