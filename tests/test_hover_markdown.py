"""Hover text is Markdown: prose from findings (messages, evidence, related messages) is
escaped so a renderer shows it as written — `messages[1]` must not lose its brackets as
a shortcut link, `__init__` must not turn bold."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from trainproof_lsp.core.config import Config
from trainproof_lsp.judge.engine import judge_file
from trainproof_lsp.core.model import Finding, Level, Location, Related, Span
from trainproof_lsp.server.hover import escape_markdown, hover_markdown


def _chat_with_empty_answer(tmp_path: Path) -> Path:
    rows = [{"messages": [{"role": "user", "content": f"What is {i} + {i}?"},
                          {"role": "assistant", "content": str(2 * i)}]} for i in range(4)]
    rows[2]["messages"][1]["content"] = ""  # line 3: messages[1] is an empty assistant turn
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_the_empty_assistant_turn_hover_escapes_its_index(tmp_path):
    report = judge_file(_chat_with_empty_answer(tmp_path), Config())
    (finding,) = [f for f in report.findings if f.id == "TP-PRE-EMPTY-ASSISTANT"]
    assert finding.location.span.start_line == 2 and "messages[1]" in finding.message
    text = hover_markdown([finding], None)
    assert "messages\\[1\\]" in text and "messages[1]" not in text
    plain = hover_markdown([finding], None, markdown=False)
    assert "messages[1]" in plain and "\\[" not in plain


def test_escaped_prose_renders_as_written_in_commonmark():
    markdown_it = pytest.importorskip("markdown_it", reason="markdown-it-py is in the test extra")
    finding = Finding(id="TP-PRE-EMPTY-ASSISTANT", level=Level.FAIL,
                      message="messages[1]: the *assistant* turn of __init__ is `empty` <br> | x ~y~ #2",
                      evidence={"field": "messages[1].content"},
                      location=Location(path="train.jsonl", span=Span(2, 0, 2, 10)),
                      related=(Related(location=Location(path="train.jsonl", span=Span(0, 0, 0, 1)),
                                       message="first seen at [line 1](x)"),))
    html = markdown_it.MarkdownIt("commonmark").enable("table").render(hover_markdown([finding], None))
    assert "messages[1]: the *assistant* turn of __init__ is `empty` &lt;br&gt; | x ~y~ #2" in html
    assert "<td>messages[1].content</td>" in html
    assert "first seen at [line 1](x)" in html
    assert "<em>" not in html and "<strong>TP-PRE-EMPTY-ASSISTANT</strong>" in html


@pytest.mark.parametrize("raw", ["a[1]", "x_y_z", "`q`", "<b>", "a|b", "\\", "#1", "![i](u)", "plain 4.5 (7)"])
def test_escape_markdown_keeps_every_character_and_leaves_no_syntax_bare(raw):
    escaped = escape_markdown(raw)
    assert re.sub(r"\\(.)", r"\1", escaped) == raw  # unescaping gives the text back
    bare = re.sub(r"\\.", "", escaped)  # what is left once escaped pairs are taken out
    assert not set(bare) & set("\\`*_[]<>|~#!"), (raw, escaped)
