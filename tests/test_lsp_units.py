"""The server's pure parts, without a client: settings, line store, column units,
sparklines, the CLI envelope read back, document kinds."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

pytest.importorskip("pygls")

from trainproof_lsp.readers.detect import HEAD_BYTES as DETECT_HEAD_BYTES  # noqa: E402
from trainproof_lsp.core.model import Level, Location, Report, Span  # noqa: E402
from trainproof_lsp.core.positions import client_column, code_point_column  # noqa: E402
from trainproof_lsp.server import analysis  # noqa: E402
from trainproof_lsp.server.commands import reports_from_json  # noqa: E402
from trainproof_lsp.server.diagnostics import Presentation, capped  # noqa: E402
from trainproof_lsp.server.documents import LineDocument, uri_to_path  # noqa: E402
from trainproof_lsp.server.hover import BLOCKS, NON_FINITE, sparkline  # noqa: E402
from trainproof_lsp.server.kinds import kind_of  # noqa: E402
from trainproof_lsp.server.settings import Settings, parse_settings, settings_json  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


# --- settings ---------------------------------------------------------------------------------

def test_good_settings_are_read_in_the_clients_spelling():
    settings, problems = parse_settings({"trainproof": {"maxDiagnosticsPerFile": 50, "debounceMs": 0,
                                                        "entrypoints": ["train.py"], "checkEnvironment": True}})
    assert problems == []
    assert settings.max_diagnostics_per_file == 50 and settings.debounce_ms == 0
    assert settings.entrypoints == ("train.py",) and settings.check_environment is True


@pytest.mark.parametrize("raw, name", [
    ({"maxDiagnosticsPerFile": "lots"}, "maxDiagnosticsPerFile"),
    ({"maxDiagnosticsPerFile": 0}, "maxDiagnosticsPerFile"),
    ({"debounceMs": 1.5}, "debounceMs"),
    ({"checkEnvironment": "yes"}, "checkEnvironment"),
    ({"entrypoints": "train.py"}, "entrypoints"),
])
def test_a_bad_setting_keeps_its_default_and_is_named_in_a_message(raw, name):
    settings, problems = parse_settings(raw)
    assert settings == Settings()
    assert len(problems) == 1 and name in problems[0]


def test_the_clients_own_settings_in_the_section_are_ignored_quietly():
    settings, problems = parse_settings({"interpreter": ["/usr/bin/python3"], "trace": {"server": "off"},
                                         "debounceMs": 10})
    assert problems == [] and settings.debounce_ms == 10


def test_settings_that_are_not_an_object_fall_back_to_defaults():
    settings, problems = parse_settings(["not", "an", "object"])
    assert settings == Settings() and "must be an object" in problems[0]
    assert settings_json(Settings())["maxDiagnosticsPerFile"] == 500


# --- column units -----------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["plain ascii", "café 😀 x", "😀😀", "", "日本語テキスト"])
def test_client_columns_round_trip_in_every_encoding(text: str):
    for encoding in ("utf-8", "utf-16", "utf-32"):
        for column in range(len(text) + 1):
            assert code_point_column(text, client_column(text, column, encoding), encoding) == column


def test_a_column_inside_a_character_rounds_down_and_past_the_end_clamps():
    assert code_point_column("a😀b", 2, "utf-16") == 1  # between the surrogates
    assert code_point_column("é", 1, "utf-8") == 0  # inside the two bytes
    assert code_point_column("abc", 99, "utf-16") == 3


# --- the line store ---------------------------------------------------------------------------

def test_edits_replace_only_the_lines_they_touch():
    doc = LineDocument.from_text("file:///x.jsonl", 1, "jsonl", "a\nb\nc\n")
    edit = doc.apply((1, 0), (1, 1), "B1\nB2", "utf-16")
    assert doc.text == "a\nB1\nB2\nc\n"
    assert (edit.start, edit.end, edit.count, edit.old, edit.delta) == (1, 1, 2, ("b",), 1)
    doc.apply((0, 1), (3, 0), "", "utf-16")
    assert doc.text == "ac\n"


def test_wild_edits_are_clamped_never_raised():
    doc = LineDocument.from_text("file:///x.json", 1, "json", "ab\r\ncd")
    doc.apply((99, 99), (0, 0), "X", "utf-16")  # reversed and out of range
    doc.apply((0, 50), (0, 60), "Y", "utf-8")  # past the end of a CRLF line: before the \r
    assert doc.lines[0] == "abY\r"
    doc.apply((1, 0), (500, 0), "", "utf-16")
    assert doc.lines[-1] == ""


def test_non_ascii_edits_use_the_clients_units():
    doc = LineDocument.from_text("file:///x.jsonl", 1, "jsonl", '{"text": "😀é"}')
    assert not doc.ascii
    doc.apply((0, 12), (0, 13), "e", "utf-16")  # é sits after the emoji's two UTF-16 units
    assert doc.text == '{"text": "😀e"}'


def test_uris_become_paths():
    assert uri_to_path("file:///tmp/a%20b/trainer_state.json") == Path("/tmp/a b/trainer_state.json")
    assert uri_to_path("untitled:Untitled-1").name == "Untitled-1"


# --- diagnostics ------------------------------------------------------------------------------

def _finding(level: Level, line: int, rule: str = "TP-NAN"):
    from trainproof_lsp.core.model import Finding

    return Finding(id=rule, level=level, message=f"{rule} at {line}", evidence={"value": math.nan},
                   location=Location(path="/x", span=Span(line, 0, line, 3)), limits={"max": math.inf})


def test_diagnostics_put_errors_first_cap_and_summarise_the_rest():
    findings = [_finding(Level.INFO, 1), _finding(Level.WARN, 2), _finding(Level.FAIL, 9), _finding(Level.FAIL, 3)]
    diags = capped(findings, "/x", lambda p, n: None, Presentation(), 2)
    assert [d.range.start.line for d in diags[:2]] == [3, 9]
    assert diags[2].data == {"id": None, "hidden": 2, "by_level": {"WARN": 1, "INFO": 1}}
    assert "2 more finding(s) not shown (1 WARN, 1 INFO)" in diags[2].message
    assert diags[0].data["evidence"] == {"value": "NaN"} and diags[0].data["limits"] == {"max": "Infinity"}
    json.dumps(diags[0].data)  # valid JSON: no bare NaN


# --- hover picture ----------------------------------------------------------------------------

def test_sparkline_scales_between_min_and_max_and_marks_non_finite_points():
    line = sparkline([1.0, 2.0, 3.0, math.nan, 5.0])
    assert line[0] == BLOCKS[0] and line[-1] == BLOCKS[-1] and line[3] == NON_FINITE
    assert sparkline([2.0, 2.0]) == BLOCKS[3] * 2
    assert sparkline([math.inf]) == NON_FINITE


# --- the CLI's JSON envelope, read back -------------------------------------------------------

def test_the_cli_envelope_reads_back_into_reports(tmp_path: Path):
    from trainproof_lsp.core.config import Config
    from trainproof_lsp.judge.engine import doctor
    from trainproof_lsp.output.render import to_json

    outcome = doctor([REPO / "fixtures" / "hf_runs" / "lr_hot_diverges"], Config())
    back = reports_from_json(json.loads(to_json(outcome)))
    assert [r.verdict for r in back] == [r.verdict for r in outcome.reports]
    original = [f for r in outcome.reports for f in r.findings]
    again = [f for r in back for f in r.findings]
    assert [(f.id, f.location.span, f.message) for f in again] == [(f.id, f.location.span, f.message) for f in original]
    assert isinstance(back[0], Report)


# --- document kinds ----------------------------------------------------------------------------

@pytest.mark.parametrize("name, head, kind", [
    ("trainer_state.json", b'{"log_history": []}', "metrics"),
    ("train.jsonl", b'{"text": "hello"}\n', "dataset"),
    ("metrics.csv", b"step,loss\n1,2.0\n", "metrics"),
    ("train.py", b"import torch\nfrom transformers import Trainer\n", "script"),
    ("util.py", b"import os\n", "other"),
    ("tokenizer_config.json", b"{}", "config"),
    ("package.json", b'{"name": "x"}', "other"),
])
def test_document_kinds_follow_the_engines_detection(name: str, head: bytes, kind: str):
    assert kind_of(Path("/w") / name, head).kind == kind


def test_a_configured_entrypoint_is_a_training_script():
    assert kind_of(Path("/w/run.py"), b"print(1)\n", ("run.py",)).kind == "script"


def test_the_servers_head_size_is_the_engines():
    assert analysis.HEAD_BYTES == DETECT_HEAD_BYTES


def test_a_chat_template_file_is_a_tokenizer_document():
    kind = kind_of(Path("/w/tok/chat_template.jinja"), b"{% for message in messages %}")
    assert (kind.kind, kind.lint) == ("config", True)
