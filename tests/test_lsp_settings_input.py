"""Settings and command arguments are input: a workspace's settings can name anything, so
every value that reaches a child process is checked (an existing path, an executable) and
passed so that it can never be read as an option (`--opt=value`, paths after `--`). The
victim file a hostile `trainproof.baseline = "--html=<victim>"` aims at must keep its bytes.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from lsp_pipe import PipeClient

REPO = Path(__file__).resolve().parent.parent
HF_RUNS = REPO / "fixtures" / "hf_runs"
VICTIM_BYTES = b"precious bytes that no setting may overwrite\n"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    shutil.copytree(HF_RUNS / "lr_hot_diverges", ws / "runs" / "hot")
    shutil.copytree(HF_RUNS / "healthy", ws / "runs" / "good")
    (ws / "train.py").write_text("import json\n")
    return ws


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    path = tmp_path / "victim.html"
    path.write_bytes(VICTIM_BYTES)
    return path


def start(ws: Path, tmp_path: Path, settings: dict) -> PipeClient:
    client = PipeClient([sys.executable, "-m", "trainproof_lsp", "serve"], cwd=tmp_path,
                        settings={"debounceMs": 0, **settings})
    client.initialize(ws, options=settings)
    return client


@pytest.mark.parametrize("option", ["--html", "--sarif"])
def test_a_baseline_setting_that_looks_like_an_option_writes_nothing(option: str, workspace: Path, victim: Path,
                                                                     tmp_path: Path):
    client = start(workspace, tmp_path, {"baseline": f"{option}={victim}"})
    try:
        log = workspace / "runs" / "hot" / "trainer_state.json"
        compare = client.command("trainproof.compare", str(log))
        assert compare["status"] == "error"
        assert compare["message"] == (f"trainproof compare trainer_state.json: not run — trainproof.baseline: "
                                      f"'{option}={victim}' does not exist")
        shown = client.command("trainproof.showRun", str(log))
        assert shown["status"] == "error" and "trainproof.baseline" in shown["message"]
        # An option-like command argument is refused the same way.
        second = client.command("trainproof.compare", str(log), f"{option}={victim}")
        assert second["status"] == "error" and "does not exist" in second["message"]
        warnings = [m["params"]["message"] for m in client.messages if m.get("method") == "window/showMessage"]
        assert any("not run" in w for w in warnings)
    finally:
        assert client.close() == 0
    assert victim.read_bytes() == VICTIM_BYTES


def test_a_config_file_setting_must_be_an_existing_file(workspace: Path, victim: Path, tmp_path: Path):
    client = start(workspace, tmp_path, {"configFile": f"--sarif={victim}"})
    try:
        doctor = client.command("trainproof.doctor", str(workspace / "runs"))
        assert doctor["status"] == "error"
        assert doctor["message"].endswith(f"trainproof.configFile: '--sarif={victim}' is not an existing file")
    finally:
        assert client.close() == 0
    assert victim.read_bytes() == VICTIM_BYTES


def test_relative_settings_are_read_from_the_workspace_folder_not_the_servers(workspace: Path, tmp_path: Path):
    (workspace / "pyproject.toml").write_text("[tool.trainproof]\n")
    client = start(workspace, tmp_path, {"baseline": "runs/good", "configFile": "pyproject.toml"})
    try:
        compare = client.command("trainproof.compare", str(workspace / "runs" / "hot" / "trainer_state.json"))
        assert compare["status"] == "done", compare
        # found in the workspace folder, and named relative to it as the command line would
        assert compare["message"].startswith("trainproof compare trainer_state.json with runs/good:")
    finally:
        assert client.close() == 0


@pytest.mark.parametrize(("python", "why"), [
    ("--version", "not an interpreter"),
    ("/no/such/python", "is not an existing file"),
    ("no-such-python-on-path", "is not on PATH"),
])
def test_the_environment_interpreter_must_be_an_existing_executable(python: str, why: str, workspace: Path,
                                                                    tmp_path: Path):
    client = start(workspace, tmp_path, {"checkEnvironment": True, "python": python})
    try:
        result = client.command("trainproof.checkEnvironment", str(workspace / "train.py"))
        assert result["status"] == "error" and "trainproof.python" in result["message"] and why in result["message"]
    finally:
        assert client.close() == 0


def test_the_environment_check_names_the_interpreter_it_used(workspace: Path, tmp_path: Path):
    client = start(workspace, tmp_path, {"checkEnvironment": True, "python": sys.executable, "envTimeoutS": 60})
    try:
        result = client.command("trainproof.checkEnvironment", str(workspace / "train.py"))
        assert result["status"] == "done", result
        assert result["python"] == str(Path(sys.executable).absolute())
        assert result["pythonSource"] == "the python setting"
        assert f"env train.py with {result['python']} (the python setting)" in result["message"]
    finally:
        assert client.close() == 0


# --- the checks themselves (server/children.py) ---------------------------------------------

def test_a_child_never_has_the_working_folder_on_its_path(monkeypatch):
    import os

    from trainproof_lsp.server import children

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["", ".", "src", "/opt/lib", ""]))
    launch = children.cli_child(["doctor", "--json", "--", "/w/run"])
    assert launch.argv[:4] == (sys.executable, *children.SAFE_PATH_FLAGS, "-m", "trainproof_lsp")[:4]
    assert launch.argv[-4:] == ("doctor", "--json", "--", "/w/run")
    assert ("-P" in launch.argv) == (sys.version_info >= (3, 11))
    assert Path(launch.cwd) == Path(__file__).resolve().parent.parent  # where trainproof_lsp lives
    assert launch.env["PYTHONPATH"] == "/opt/lib"
    monkeypatch.setenv("PYTHONPATH", os.pathsep)
    assert "PYTHONPATH" not in children.cli_child(["doctor"]).env


def test_values_that_cannot_go_to_a_child(tmp_path: Path):
    from trainproof_lsp.server.children import BadValue, existing_path, interpreter

    (tmp_path / "run").mkdir()
    assert existing_path("run", what="baseline", base=tmp_path) == tmp_path / "run"
    for raw, why in [("", "not a path"), ("a\x00b", "not a path"), ("--html=x", "does not exist")]:
        with pytest.raises(BadValue, match=why):
            existing_path(raw, what="baseline", base=tmp_path)
    with pytest.raises(BadValue, match="no workspace folder"):
        existing_path("run", what="baseline", base=None)
    with pytest.raises(BadValue, match="is not an existing file"):
        existing_path("run", what="trainproof.configFile", base=tmp_path, file=True)
    plain = tmp_path / "not-executable"
    plain.write_text("")
    with pytest.raises(BadValue, match="is not executable"):
        interpreter(str(plain), what="trainproof.python")
    assert interpreter(sys.executable, what="trainproof.python") == str(Path(sys.executable).absolute())
