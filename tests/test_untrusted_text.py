"""Untrusted text is never printed raw (issue: hostile files). A run folder's name, a
log's metric key and a chat template's `raise_exception` message come from the files
judged: in the text output a newline in one must not start a line a CI runner reads as a
command (`::error file=...::`, `::add-mask::`, `##vso[task.setvariable ...]`), and no ESC
sequence or bidi override may reach the terminal. The hover's sparkline caption shows a
metric key as literal Markdown (no image loading from the key's host)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainproof_lsp.core.config import Config
from trainproof_lsp.core.text import printable
from trainproof_lsp.judge.engine import judge_file, read_run
from trainproof_lsp.readers.detect import detect
from trainproof_lsp.server.hover import hover_markdown

REPO = Path(__file__).resolve().parent.parent
NAN_LOG = REPO / "fixtures" / "logs" / "nan_at_step_40.jsonl"

# What a CI runner or a terminal would obey at the start of a line or anywhere in one.
FORGED = "\n::error file=app.py,line=1::forged\n::add-mask::x\n##vso[task.setvariable variable=A]1\n"
ESC = "\x1b[2J\x1b]8;;evil.example\x07"
BIDI = "\u202eexe.txt\u2066\u200f\u061c"


@pytest.mark.parametrize(("raw", "shown"), [
    ("a\nb", "a\\nb"),
    ("a\r\nb\tc", "a\\r\\nb\\tc"),
    ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),
    ("\x00\x07\x7f\x85\x9b", "\\x00\\x07\\x7f\\x85\\x9b"),
    ("\u202ab\u202e\u2066\u2069\u200e\u200f\u061c", "\\u202ab\\u202e\\u2066\\u2069\\u200e\\u200f\\u061c"),
    ("line\u2028sep\u2029", "line\\u2028sep\\u2029"),
    ("plain ünïcode → ▲ 中文 C:\\runs\\a", "plain ünïcode → ▲ 中文 C:\\runs\\a"),
])
def test_printable_spells_out_controls_bidi_and_separators_and_keeps_the_rest(raw, shown):
    assert printable(raw) == shown


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("TRAINPROOF_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "trainproof_lsp", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def _assert_no_raw_control(text: str) -> None:
    for line in text.splitlines():
        assert not line.startswith(("::", "##vso")), line
    assert not any(c in text for c in "\x1b\x07\u202e\u2066\u200f\u061c\r"), repr(text)


def test_a_run_folder_named_with_newlines_escapes_and_bidi_prints_one_line_per_finding(tmp_path):
    folder = tmp_path / f"run{FORGED}{ESC}{BIDI}"
    folder.mkdir()
    (folder / "metrics.jsonl").write_bytes(NAN_LOG.read_bytes())
    proc = _cli("doctor", ".", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    _assert_no_raw_control(proc.stdout)
    name = ("run\\n::error file=app.py,line=1::forged\\n::add-mask::x\\n##vso[task.setvariable variable=A]1\\n"
            "\\x1b[2J\\x1b]8;;evil.example\\x07\\u202eexe.txt\\u2066\\u200f\\u061c")
    lines = proc.stdout.splitlines()
    assert [x for x in lines if " FAIL TP-NAN " in x] == [
        f"{name}/metrics.jsonl:4:1: FAIL TP-NAN loss is nan at step 40; 7 of 10 logged losses are not finite (limit 0)"]
    assert any(x.startswith(f"== {name}/metrics.jsonl: FAIL — 2 finding(s); ") for x in lines), lines
    # JSON keeps the name exact (its own escaping is JSON's).
    data = json.loads(_cli("doctor", ".", "--json", cwd=tmp_path).stdout)
    assert [r["artefact"]["path"] for r in data["reports"]] == [f"{folder.name}/metrics.jsonl"]


def test_a_chat_templates_raise_exception_message_is_escaped(tmp_path):
    tok = tmp_path / "tok"
    tok.mkdir()
    template = "{{ raise_exception('bad row" + FORGED.replace("\n", "\\n") + "\\x1b[2J\\u202e') }}"
    (tok / "tokenizer_config.json").write_text(json.dumps({
        "chat_template": template, "eos_token": "</s>", "pad_token": "<pad>", "bos_token": "<s>",
        "model_max_length": 4096}), encoding="utf-8")
    data = tmp_path / "train.jsonl"
    data.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"},
                                             {"role": "assistant", "content": "hello"}]}) + "\n", encoding="utf-8")
    proc = _cli("preflight", "train.jsonl", "--tokenizer", "tok", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    _assert_no_raw_control(proc.stdout)
    # The check the template stopped is NOT-CHECKED: printed with its reason without -v.
    assert "tok/tokenizer_config.json:1:1: NOT-CHECKED TP-NOT-CHECKED TP-TOK-TEMPLATE-NO-EOS not checked: the chat " \
           "template could not render a user/assistant exchange: bad row\\n::error file=app.py,line=1::forged" \
           "\\n::add-mask::x\\n##vso[task.setvariable variable=A]1\\n\\x1b[2J\\u202e" in proc.stdout.splitlines()


def test_the_hover_sparkline_caption_shows_a_metric_key_as_literal_markdown(tmp_path):
    key = "![x](http://evil.example/p.png)\n# big\x1b[2J"
    log = tmp_path / "metrics.jsonl"
    rows = [json.loads(line) for line in NAN_LOG.read_text(encoding="utf-8").splitlines()]
    log.write_text("".join(json.dumps({**{k: v for k, v in r.items() if k != "loss"}, key: r["loss"]}) + "\n"
                           for r in rows), encoding="utf-8")
    config = Config(columns={"loss": key})
    report = judge_file(log, config)
    (nan,) = [f for f in report.findings if f.id == "TP-NAN"]
    run = read_run(log, detect(log, log.read_bytes()[:4096]), None, config)
    text = hover_markdown([nan], run)
    (caption,) = [x for x in text.splitlines() if ", steps " in x]
    assert caption.startswith("\\!\\[x\\](http://evil.example/p.png)\\\\n\\# big\\\\x1b\\[2J, steps "), caption
    markdown_it = pytest.importorskip("markdown_it", reason="markdown-it-py is in the test extra")
    html = markdown_it.MarkdownIt("commonmark").render(text)
    assert "<img" not in html and "<h1>" not in html
    assert "![x](http://evil.example/p.png)\\n# big\\x1b[2J, steps 10–100" in html


def test_watch_prints_a_run_folders_name_escaped(tmp_path):
    import io

    from trainproof_lsp.guardian.watch import Watch, WatchOptions

    folder = tmp_path / f"run{FORGED}{ESC}{BIDI}"
    folder.mkdir()
    (folder / "metrics.jsonl").write_bytes(NAN_LOG.read_bytes())
    out = io.StringIO()
    watch = Watch(tmp_path, Config(), WatchOptions(), out=out, err=out)
    watch.poll_once()
    text = out.getvalue()
    _assert_no_raw_control(text)
    name = ("run\\n::error file=app.py,line=1::forged\\n::add-mask::x\\n##vso[task.setvariable variable=A]1\\n"
            "\\x1b[2J\\x1b]8;;evil.example\\x07\\u202eexe.txt\\u2066\\u200f\\u061c")
    lines = text.splitlines()
    assert lines[0] == f"{printable(str(tmp_path))}/{name}/metrics.jsonl: step 100: FAIL", lines
    assert lines[1].startswith("  FAIL TP-NAN loss is nan at step 40")
