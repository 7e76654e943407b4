"""A checkpoint whose pickle would run code is reported and its code never runs — through
the CLI on the file and through `doctor` on a folder. The payloads are live: a plain
unpickler in a scratch folder really creates the marker file (the control test)."""

from __future__ import annotations

import collections
import json
import os
import pickle
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import FIXTURES, REPO
from trainproof_lsp.readers import pickle_walk as pw

CKPT = FIXTURES / "checkpoints"
MALICIOUS = {
    "malicious_os_system.pt": ("posix.system", "PWNED_BY_OS_SYSTEM"),
    "malicious_exec.pt": ("builtins.exec", "PWNED_BY_EXEC"),
    "malicious_legacy.pt": ("posix.system", "PWNED_BY_OS_SYSTEM"),
}


def cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "trainproof_lsp", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)
    assert "Traceback" not in proc.stdout + proc.stderr
    return proc


def unsafe_globals(data: dict) -> set[str]:
    return {f["evidence"]["global"] for r in data["reports"] for f in r["findings"]
            if f["id"] == "TP-CKPT-UNSAFE-PICKLE"}


@pytest.mark.parametrize("name", sorted(MALICIOUS))
def test_cli_reports_the_payload_and_never_runs_it(tmp_path, name):
    target, marker = MALICIOUS[name]
    copy = tmp_path / name
    shutil.copy(CKPT / name, copy)
    proc = cli("doctor", name, "--json", cwd=tmp_path)
    data = json.loads(proc.stdout)
    assert proc.returncode == 1 and data["worst_verdict"] == "FAIL"
    assert target in unsafe_globals(data)
    finding = next(f for r in data["reports"] for f in r["findings"] if f["id"] == "TP-CKPT-UNSAFE-PICKLE")
    # Located at the opcode that names the global, inside the file.
    offset = finding["location"]["byte_offset"]
    name = target.split(".")[1].encode()
    assert name in copy.read_bytes()[offset:offset + 40]
    assert not (tmp_path / marker).exists()
    assert not (REPO / marker).exists()


def test_doctor_on_a_folder_reports_every_payload_and_creates_no_file(tmp_path):
    run = tmp_path / "run"
    (run / "checkpoint-10").mkdir(parents=True)
    for name in MALICIOUS:
        shutil.copy(CKPT / name, run / "checkpoint-10" / name)
    shutil.copy(CKPT / "clean.pt", run / "checkpoint-10" / "pytorch_model.bin")
    proc = cli("doctor", "run", "--json", cwd=tmp_path)
    data = json.loads(proc.stdout)
    assert proc.returncode == 1
    flagged = {Path(r["artefact"]["path"]).name for r in data["reports"]
               if any(f["id"] == "TP-CKPT-UNSAFE-PICKLE" for f in r["findings"])}
    assert flagged == set(MALICIOUS)
    clean = next(r for r in data["reports"] if r["artefact"]["path"].endswith("pytorch_model.bin"))
    assert clean["verdict"] == "PASS"
    for _, marker in MALICIOUS.values():
        assert not (tmp_path / marker).exists() and not (run / marker).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


_CONTROL = r"""
import pickle, sys, zipfile
class Unpickler(pickle.Unpickler):
    # torch is not installed here: stand-ins for its rebuild functions, the real thing
    # for everything else -- exactly what torch.load(weights_only=False) would import.
    def find_class(self, module, name):
        if module.startswith("torch"):
            return lambda *a, **k: None
        return super().find_class(module, name)
    def persistent_load(self, pid):
        return None
with zipfile.ZipFile(sys.argv[1]) as zf:
    data = zf.read([n for n in zf.namelist() if n.endswith("data.pkl")][0])
import io
Unpickler(io.BytesIO(data)).load()
"""


@pytest.mark.parametrize("name", ["malicious_os_system.pt", "malicious_exec.pt"])
def test_control_the_payload_really_runs_when_unpickled(tmp_path, name):
    _, marker = MALICIOUS[name]
    subprocess.run([sys.executable, "-c", _CONTROL, str(CKPT / name)], cwd=tmp_path, check=True,
                   capture_output=True, timeout=60)
    assert (tmp_path / marker).exists()


# --- the allow-list -----------------------------------------------------------------------------

class _Reduce:
    def __init__(self, func, args):
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args


def walk_names(obj, protocol: int) -> dict[str, bool]:
    walked = pw.walk(pickle.dumps(obj, protocol=protocol))
    assert walked.error == ""
    return {f"{g.module}.{g.name}": g.allowed for g in walked.globals}


@pytest.mark.parametrize("protocol", [0, 2, 4, 5])
def test_code_running_globals_are_flagged_in_every_protocol(protocol):
    import subprocess as sp

    for func, args, name in ((os.system, ("true",), f"{os.system.__module__}.system"),
                             (eval, ("1",), "builtins.eval"), (exec, ("1",), "builtins.exec"),
                             (sp.call, (["true"],), "subprocess.call"), (getattr, (1, "real"), "builtins.getattr")):
        assert walk_names(_Reduce(func, args), protocol)[name] is False, (name, protocol)


@pytest.mark.parametrize("protocol", [2, 4])
def test_plain_containers_are_allowed(protocol):
    names = walk_names({"od": collections.OrderedDict(a=1), "s": {1, 2}, "b": b"xy", "c": 1j}, protocol)
    assert names and all(names.values()), names


def test_walking_never_imports_the_named_module():
    data = b"\x80\x02cnot_installed_evil_module\nboom\nq\x00X\x01\x00\x00\x00x\x85R."
    code = ("import sys; from trainproof_lsp.readers import pickle_walk as pw; "
            f"w = pw.walk({data!r}); "
            "print(w.globals[0].module, w.globals[0].allowed, 'not_installed_evil_module' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)}).stdout.split()
    assert out == ["not_installed_evil_module", "False", "False"]


def test_computed_global_names_are_flagged():
    # STACK_GLOBAL with a name built by a call: cannot be allow-listed statically.
    data = (b"\x80\x04\x8c\x08builtins\x94\x8c\x03str\x94\x93\x94\x8c\x04eval\x94\x85\x94R\x94"
            b"\x8c\x08builtins\x94h\x05\x93\x94.")
    walked = pw.walk(data)
    assert any(not g.allowed for g in walked.globals)


def test_a_bare_malicious_pickle_named_pt_is_flagged(tmp_path):
    path = tmp_path / "model.pt"
    path.write_bytes(pickle.dumps(_Reduce(os.system, ("touch PWNED",)), protocol=2))
    proc = cli("doctor", path, "--json", cwd=tmp_path)
    data = json.loads(proc.stdout)
    assert proc.returncode == 1 and f"{os.system.__module__}.system" in unsafe_globals(data)
    assert not (tmp_path / "PWNED").exists()


def test_payload_in_a_truncated_archive_is_still_reported(tmp_path):
    raw = (CKPT / "malicious_os_system.pt").read_bytes()
    with zipfile.ZipFile(CKPT / "malicious_os_system.pt") as zf:
        first_storage = zf.getinfo("malicious_os_system/data/1").header_offset
    path = tmp_path / "malicious_os_system.pt"
    path.write_bytes(raw[:first_storage])
    proc = cli("doctor", path, "--json", cwd=tmp_path)
    data = json.loads(proc.stdout)
    ids = {f["id"] for r in data["reports"] for f in r["findings"]}
    assert {"TP-ENV-CKPT-TRUNCATED", "TP-CKPT-UNSAFE-PICKLE"} <= ids
