"""`trainproof-lsp env`: the script's imports are probed in a child process of the chosen
interpreter; each failure kind is told apart and located on the script's import line; the
script's own top-level code never runs unless asked."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, REPO, line_with

TRAIN = """\
import json
import definitely_not_installed_xyz
from namemod import present, missing_name
import raisemod
import crashmod
import exitmod
import sysexitmod
import hangmod
try:
    import optional_missing_xyz
except ImportError:
    optional_missing_xyz = None


def main():
    import lazy_missing_xyz


open("TOP_LEVEL_RAN", "w").write("training started")
"""

MODULES = {
    "namemod.py": "present = 1\n",
    "raisemod.py": "raise RuntimeError('CUDA driver too old')\n",
    "crashmod.py": "import ctypes\nctypes.string_at(0)\n",
    "exitmod.py": "import os\nos._exit(3)\n",
    "sysexitmod.py": "import sys\nsys.exit('configuration missing')\n",
    "hangmod.py": "import time\ntime.sleep(60)\n",
}


def env_cli(*args: str | Path, cwd: Path) -> tuple[int, dict]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "trainproof_lsp", "env", *map(str, args), "--json"], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=180)
    assert "Traceback" not in proc.stdout, proc.stdout
    return proc.returncode, json.loads(proc.stdout)


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    project = tmp_path_factory.mktemp("project")
    (project / "train.py").write_text(TRAIN)
    for name, body in MODULES.items():
        (project / name).write_text(body)
    rc, data = env_cli("--entrypoint", "train.py", "--timeout", "3", cwd=project)
    return project, rc, data


def findings(data: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for f in data["reports"][0]["findings"]:
        out.setdefault(f["id"], []).append(f)
    return out


def by_module(data: dict) -> dict[str, dict]:
    return {f["evidence"]["module"]: f for f in data["reports"][0]["findings"] if "module" in f["evidence"]}


def line(f: dict) -> int:
    return f["location"]["range"]["start"]["line"]


@pytest.mark.parametrize("module,rule_id,outcome,needle", [
    ("definitely_not_installed_xyz", "TP-ENV-IMPORT-FAIL", "module-not-found", "import definitely_not_installed_xyz"),
    ("namemod", "TP-ENV-IMPORT-FAIL", "missing-name", "from namemod import"),
    ("raisemod", "TP-ENV-IMPORT-FAIL", "exception", "import raisemod"),
    ("crashmod", "TP-ENV-IMPORT-CRASH", "crash", "import crashmod"),
    ("exitmod", "TP-ENV-IMPORT-EXIT", "exit", "import exitmod"),
    ("sysexitmod", "TP-ENV-IMPORT-EXIT", "exit", "import sysexitmod"),
    ("hangmod", "TP-ENV-IMPORT-TIMEOUT", "timeout", "import hangmod"),
    ("optional_missing_xyz", "TP-ENV-IMPORT-OPTIONAL-MISSING", "module-not-found", "import optional_missing_xyz"),
    ("lazy_missing_xyz", "TP-ENV-IMPORT-LAZY-FAIL", "module-not-found", "import lazy_missing_xyz"),
])
def test_each_import_failure_kind_on_its_import_line(probed, module, rule_id, outcome, needle):
    project, _, data = probed
    f = by_module(data)[module]
    assert (f["id"], f["evidence"]["outcome"]) == (rule_id, outcome)
    assert line(f) == line_with(project / "train.py", needle)
    assert f["location"]["path"].endswith("train.py")


def test_failure_details_are_told_apart(probed):
    _, rc, data = probed
    got = by_module(data)
    assert got["namemod"]["evidence"]["missing_names"] == "missing_name"
    assert "RuntimeError: CUDA driver too old" in got["raisemod"]["message"]
    assert got["crashmod"]["evidence"]["signal"] == "SIGSEGV"
    assert got["exitmod"]["evidence"]["exit_code"] == 3
    assert "sys.exit('configuration missing')" in got["sysexitmod"]["message"]
    assert got["hangmod"]["evidence"]["timeout_s"] == 3
    assert "json" not in got  # imports fine: no finding
    assert rc == 1 and data["reports"][0]["verdict"] == "FAIL"


def test_the_scripts_top_level_code_never_ran(probed):
    project, _, _ = probed
    assert not (project / "TOP_LEVEL_RAN").exists()


def test_fixture_without_main_guard_runs_only_with_run_entrypoint(tmp_path):
    shutil.copy(FIXTURES / "scripts" / "no_main_guard.py", tmp_path / "train.py")
    rc, data = env_cli("--entrypoint", "train.py", cwd=tmp_path)
    assert rc == 0, data
    assert not (tmp_path / "TRAINING_STARTED").exists()
    rc, data = env_cli("--entrypoint", "train.py", "--run-entrypoint", cwd=tmp_path)
    assert rc == 0, data
    assert (tmp_path / "TRAINING_STARTED").exists()


def test_module_mode_resolves_relative_imports_without_running_the_module(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "helpers.py").write_text("value = 1\n")
    (pkg / "train.py").write_text("from .helpers import value, nothing_here\nopen('RAN', 'w')\n")
    rc, data = env_cli("--module", "pkg.train", cwd=tmp_path)
    f = by_module(data)[".helpers"]
    assert (f["id"], f["evidence"]["missing_names"], line(f)) == ("TP-ENV-IMPORT-FAIL", "nothing_here", 0)
    assert rc == 1 and not (tmp_path / "RAN").exists()
    rc, data = env_cli("--module", "pkg.not_there", cwd=tmp_path)
    assert rc == 1 and findings(data)["TP-ENV-IMPORT-FAIL"][0]["evidence"]["outcome"] == "module-not-found"


def test_unusable_interpreter_and_missing_cwd_are_not_checked(tmp_path):
    (tmp_path / "train.py").write_text("import json\n")
    rc, data = env_cli("--entrypoint", "train.py", "--python", str(tmp_path / "no-python"), cwd=tmp_path)
    assert rc == 2 and "TP-ENV-PYTHON-UNUSABLE" in findings(data)
    assert data["reports"][0]["reason"] and "\n" not in data["reports"][0]["reason"]
    rc, data = env_cli("--entrypoint", "train.py", "--cwd", str(tmp_path / "gone"), cwd=tmp_path)
    assert rc == 2 and "TP-ENV-CWD-MISSING" in findings(data)


def test_memory_and_disk_against_what_the_run_declares(tmp_path):
    rc, data = env_cli("--required-gb", "1000000", "--output-dir", tmp_path / "out", "--checkpoint-gb", "1e9",
                       "--keep", "2", cwd=tmp_path)
    got = findings(data)
    assert rc == 1 and "TP-ENV-MEM-INSUFFICIENT" in got and "TP-ENV-DISK-INSUFFICIENT" in got
    assert got["TP-ENV-DISK-INSUFFICIENT"][0]["evidence"]["needed_gb"] == 2e9
    rc, data = env_cli("--required-gb", "0.001", "--output-dir", tmp_path, "--checkpoint-gb", "0.001", cwd=tmp_path)
    got = findings(data)
    assert "TP-ENV-MEM-INFO" in got and "TP-ENV-DISK-INFO" in got
    assert not {"TP-ENV-MEM-INSUFFICIENT", "TP-ENV-DISK-INSUFFICIENT"} & set(got)


def test_missing_resume_checkpoint_fails(tmp_path):
    rc, data = env_cli("--checkpoint", tmp_path / "checkpoint-500" / "model.safetensors", cwd=tmp_path)
    assert rc == 1
    ckpt = data["reports"][1]
    assert [f["id"] for f in ckpt["findings"]] == ["TP-ENV-CKPT-MISSING"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal is Linux's prctl")
def test_probe_dies_with_a_killed_env_command(tmp_path):
    """The editor stops a cancelled environment check by killing `trainproof-lsp env` (and
    its process group) with SIGKILL; the probe, in a group of its own, must not live on
    until its timeout."""
    import signal
    import time

    pid_file = tmp_path / "probe.pid"
    (tmp_path / "slowmod.py").write_text(
        f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(120)\n")
    (tmp_path / "train.py").write_text("import slowmod\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cli = subprocess.Popen([sys.executable, "-m", "trainproof_lsp", "env", "--entrypoint", "train.py",
                            "--timeout", "120", "--json"], cwd=tmp_path, env=env, start_new_session=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    probe = int(pid_file.read_text())
    os.kill(probe, 0)  # the probe is importing slowmod
    os.killpg(cli.pid, signal.SIGKILL)
    cli.wait(timeout=10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(probe, 0)
        except ProcessLookupError:
            break
        # A dead probe whose parent is gone is reaped by init; until then it is a zombie.
        if Path(f"/proc/{probe}/stat").exists() and Path(f"/proc/{probe}/stat").read_text().split()[2] == "Z":
            break
        time.sleep(0.05)
    else:
        os.kill(probe, signal.SIGKILL)
        pytest.fail("the import probe outlived the killed env command")


# --- the entrypoint's top level never runs without --run-entrypoint ----------------------------

SELF_IMPORTING = """import helper
import train
open(MARKER, "w").write("train.py top level ran")
open(VICTIM, "w").write("overwritten")
"""


def _self_importing_project(root: Path) -> tuple[Path, Path, Path]:
    project, marks = root / "project", root / "marks"
    project.mkdir()
    marks.mkdir()
    victim = root / "victim.txt"
    victim.write_text("precious\n")
    source = SELF_IMPORTING.replace("MARKER", repr(str(marks / "TOP_LEVEL_RAN"))).replace("VICTIM", repr(str(victim)))
    (project / "train.py").write_text(source)
    (project / "helper.py").write_text("import train\nvalue = train.__name__\n")
    return project, marks, victim


def test_entrypoint_importing_itself_or_imported_by_a_local_module_never_runs(tmp_path):
    from limited_child import findings as all_findings, run_limited

    project, marks, victim = _self_importing_project(tmp_path)
    code, data, _ = run_limited("env", "--entrypoint", "train.py", "--cwd", project, "--timeout", "20",
                                cwd=project)
    assert list(marks.iterdir()) == [] and victim.read_text() == "precious\n"
    assert code == 2 and data["reports"][0]["verdict"] == "NOT-CHECKED"
    refused = {(f["message"].split(":")[0], f["location"]["range"]["start"]["line"])
               for f in all_findings(data, "TP-NOT-CHECKED")}
    # `import helper` (line 0) reaches train.py through helper.py; `import train` (line 1) is itself
    assert refused == {("helper", 0), ("train", 1)}
    assert all("whose top-level code is run only with --run-entrypoint" in f["message"]
               for f in all_findings(data, "TP-NOT-CHECKED"))
    assert not all_findings(data, "TP-ENV-IMPORT-FAIL")


def test_module_mode_never_runs_the_module_through_a_sibling_import(tmp_path):
    from limited_child import run_limited

    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "util.py").write_text("from pkg import train\n")
    (pkg / "train.py").write_text(f"from . import util\nopen({str(tmp_path / 'RAN')!r}, 'w')\n")
    code, data, _ = run_limited("env", "--module", "pkg.train", "--cwd", tmp_path, "--timeout", "20",
                                cwd=tmp_path)
    assert code == 2 and not (tmp_path / "RAN").exists()


def test_with_run_entrypoint_the_top_level_does_run(tmp_path):
    # The control: the same project, asked to run it, runs it (so the test above can fail).
    from limited_child import run_limited

    project, marks, victim = _self_importing_project(tmp_path)
    run_limited("env", "--entrypoint", "train.py", "--cwd", project, "--run-entrypoint", "--timeout", "20",
                cwd=project)
    assert (marks / "TOP_LEVEL_RAN").exists() and victim.read_text() == "overwritten"


def test_the_entrypoint_guard_works_in_an_interpreter_that_has_not_imported_importlib_machinery(tmp_path):
    # A bare interpreter (no site: nothing has imported importlib.machinery yet) once
    # recursed inside the guard and reported every import, `json` included, as an exit.
    bare = tmp_path / "bare-python"
    bare.write_text(f"#!/bin/sh\nexec {sys.executable} -S \"$@\"\n")
    bare.chmod(0o755)
    assert "importlib.machinery" not in subprocess.run(
        [str(bare), "-c", "import sys; print(sorted(sys.modules))"], capture_output=True, text=True).stdout
    (tmp_path / "train.py").write_text("import json\nimport definitely_not_installed_xyz\n")
    out = subprocess.run([sys.executable, "-m", "trainproof_lsp", "env", "--entrypoint", "train.py",
                          "--python", str(bare), "--timeout", "30", "--json"],
                         cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 1, out.stderr
    findings = [(f["id"], f["location"]["range"]["start"]["line"])
                for f in json.loads(out.stdout)["reports"][0]["findings"] if f["level"] == "FAIL"]
    assert findings == [("TP-ENV-IMPORT-FAIL", 1)]


# --- bf16 / tf32 against the GPU (nvidia-smi) ----------------------------------------------------

GPU_RULE = "TP-ENV-PRECISION-UNSUPPORTED-GPU"


def fake_nvidia_smi(folder: Path, lines: str) -> Path:
    """An nvidia-smi that answers the compute-capability query as the real one does."""
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "nvidia-smi"
    # (echo is the shell's own: the test's PATH holds nothing but this folder)
    exe.write_text("#!/bin/sh\n" + "".join(f"echo '{line}'\n" for line in lines.splitlines()), encoding="utf-8")
    exe.chmod(0o755)
    return bin_dir


def gpu_report(tmp_path: Path, monkeypatch, keywords: str, gpus: str | None):
    from trainproof_lsp.core.config import Config
    from trainproof_lsp.judge.engine import env
    from trainproof_lsp.readers.envcheck import EnvRequest

    script = tmp_path / "train.py"
    script.write_text(f'args = TrainingArguments(output_dir="out", {keywords}, max_steps=10, logging_steps=1, '
                      "save_steps=5)\n", encoding="utf-8")
    path = fake_nvidia_smi(tmp_path, gpus) if gpus is not None else tmp_path / "empty"
    path.mkdir(exist_ok=True)
    monkeypatch.setenv("PATH", str(path))
    (report,) = env(EnvRequest(entrypoint=script, cwd=tmp_path, python=sys.executable), Config()).reports
    return report


@pytest.mark.parametrize("keywords,gpus,fires", [
    ("bf16=True", "Tesla T4, 7.5\n", True),
    ("tf32=True", "Tesla V100-SXM2-16GB, 7.0\nTesla V100-SXM2-16GB, 7.0\n", True),
    ("bf16=True", "NVIDIA A100-SXM4-40GB, 8.0\n", False),
    ("bf16=True", "Tesla T4, 7.5\nNVIDIA L4, 8.9\n", False),  # the run can use the Ampere-class one
    ("fp16=True", "Tesla T4, 7.5\n", False),
])
def test_bf16_and_tf32_against_the_gpus_compute_capability(tmp_path, monkeypatch, keywords, gpus, fires):
    report = gpu_report(tmp_path, monkeypatch, keywords, gpus)
    hits = [f for f in report.findings if f.id == GPU_RULE]
    assert len(hits) == (1 if fires else 0), [f.message for f in report.findings]
    if fires:
        (hit,) = hits
        assert hit.level.value == "FAIL" and hit.location.span.start_line == 0
        assert hit.location.span.start_char == len('args = TrainingArguments(output_dir="out", ') + 5
        assert hit.evidence["compute_capability"] == float(gpus.split(", ")[1].split()[0])


def test_without_nvidia_smi_the_gpu_check_says_it_did_not_run(tmp_path, monkeypatch):
    report = gpu_report(tmp_path, monkeypatch, "bf16=True", None)
    (check,) = [c for c in report.checks if c.group == GPU_RULE]
    assert not check.ran
    assert check.reason == ("no GPU measured: nvidia-smi not found (no NVIDIA GPU or driver here); bf16/tf32 "
                            "support not checked")
