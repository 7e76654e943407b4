"""CONTRACTS.md §1/§4: every NOT-CHECKED the exit code counts is printed with its one-line
reason in the default text output (no -v) — for doctor, epoch, preflight, compare and env.
Each command is run twice, --json and text; every NOT-CHECKED report's reason, every
NOT-CHECKED finding's message and every file not judged must be on a line of the text."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from trainproof_lsp.core.text import printable

REPO = Path(__file__).resolve().parent.parent
F = REPO / "fixtures"


def _setup(tmp: Path) -> None:
    (tmp / "short.jsonl").write_text("".join(json.dumps({"step": i, "loss": 3 - 0.1 * i}) + "\n" for i in range(5)),
                                     encoding="utf-8")
    tok = tmp / "tok"
    tok.mkdir()
    (tok / "tokenizer_config.json").write_text(json.dumps({
        "chat_template": "{{ raise_exception('no assistant turns here') }}", "eos_token": "</s>",
        "pad_token": "<pad>"}), encoding="utf-8")
    (tmp / "train.jsonl").write_text(json.dumps({"messages": [{"role": "user", "content": "hi"},
                                                              {"role": "assistant", "content": "hello"}]}) + "\n",
                                     encoding="utf-8")
    shutil.copy(F / "logs" / "lightning_csvlogger_metrics.csv", tmp / "base.csv")
    shutil.copy(F / "hf_runs" / "nan_loss" / "trainer_state.json", tmp / "trainer_state.json")
    (tmp / "train.py").write_text("import os\n", encoding="utf-8")
    (tmp / "run").mkdir()
    (tmp / "run" / "metrics.jsonl").write_text("", encoding="utf-8")  # empty: not judged


COMMANDS = {
    "doctor": ["doctor", "run", "tok", "short.jsonl"],
    "epoch": ["epoch", "short.jsonl"],
    "preflight": ["preflight", "train.jsonl", "--tokenizer", "tok", "--max-len", "64"],
    "compare": ["compare", "base.csv", "trainer_state.json"],
    "env": ["env", "--entrypoint", "train.py", "--python", "/nonexistent/python3"],
}


@pytest.mark.parametrize("name", COMMANDS)
def test_every_not_checked_is_printed_with_its_reason_without_v(name, tmp_path):
    _setup(tmp_path)

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "trainproof_lsp", *COMMANDS[name], *extra], cwd=tmp_path,
                              capture_output=True, text=True, timeout=300, check=False)

    data = json.loads(run("--json").stdout)
    text = run()
    assert "Traceback" not in text.stderr
    lines = text.stdout.splitlines()
    expected: list[tuple[str, ...]] = []  # pieces that must stand together on one line
    for r in data["reports"]:
        if r["verdict"] == "NOT-CHECKED" and r["reason"]:
            # "<path>[:line:col]: NOT-CHECKED <why>": the reason with the verdict after its place
            where, _, why = r["reason"].partition(": ")
            expected.append((where, "NOT-CHECKED", why) if why else (r["reason"],))
        expected += [(f["message"],) for f in r["findings"]
                     if f["level"] == "NOT-CHECKED"
                     and not (r["verdict"] == "NOT-CHECKED" and f["message"] == r["reason"])]  # that one is the reason
    expected += [(n["path"], n["reason"]) for n in data["not_judged"]]
    assert expected, "the case must hold something not checked"
    missing = [e for e in expected if not any(all(printable(p) in x for p in e) for x in lines)]
    assert missing == [], text.stdout
    assert text.returncode == (1 if data["worst_verdict"] == "FAIL" else 2)
