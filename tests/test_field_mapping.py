"""Datasets in the user's own shape: a field mapping (`--field text=content`, `fields` in
`[tool.trainproof]`, the editor's `trainproof.fields`) names the keys that hold the
training fields, for preflight, doctor (in process, with --jobs, in the editor); without
one, a file whose every row lacks a training field is ONE finding with the count, and a
JSONL of text rows without metrics is a dataset from every door (not a metric log)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import pytest_asyncio
import pytest_lsp
from pytest_lsp import LanguageClient

from conftest import run_cli
from lsp_support import SERVER, Session
from trainproof_lsp.core.config import DATASET_FIELDS, Config, ConfigError, parse_fields
from trainproof_lsp.core.model import Verdict
from trainproof_lsp.judge.engine import doctor
from trainproof_lsp.judge.parallel import preflight_jobs
from trainproof_lsp.judge.preflight import preflight
from trainproof_lsp.readers.dataset import MAPPABLE_FIELDS, with_fields
from trainproof_lsp.readers.detect import detect

ROWS = 40


def qa_rows(empty_answer_at: int | None = None) -> list[dict[str, str]]:
    return [{"question": f"What is {i} + {i}?", "context": "arithmetic " * (i % 5),
             "answer": "" if i == empty_answer_at else str(2 * i)} for i in range(ROWS)]


def write_qa(folder: Path, rows: list[dict[str, str]], name: str = "qa.jsonl") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def findings(outcome) -> list[tuple[str, int | None]]:
    return [(f.id, f.location.span.start_line if f.location.span else None)
            for r in outcome.reports for f in r.findings]


# --- the mapping itself ------------------------------------------------------------------

def test_the_fields_a_mapping_may_name_are_the_formats_own():
    assert MAPPABLE_FIELDS == DATASET_FIELDS


def test_a_mapping_moves_a_key_only_where_the_field_is_absent():
    fields = {"text": "content"}
    assert with_fields({"content": "a", "id": 1}, fields) == {"text": "a", "id": 1}
    row = {"content": "a", "text": "b"}
    assert with_fields(row, fields) is row  # the row's own `text` stays


@pytest.mark.parametrize("value, error", [
    (["text"], "'text' is not FIELD=KEY"),
    (["body=content"], "unknown training field 'body'"),
    ({"text": ""}, "text must name a key"),
    (3, "must map training fields to your keys"),
])
def test_a_bad_mapping_is_refused_with_its_reason(value, error):
    with pytest.raises(ConfigError, match=error):
        parse_fields(value, "--field")


# --- without a mapping: one finding for the file, a dataset from every door ------------------

def test_rows_in_their_own_shape_are_one_finding_with_the_count(tmp_path):
    path = write_qa(tmp_path, qa_rows())
    assert detect(path, path.read_bytes()[:4096]).kind == "dataset"
    outcome = preflight([path], Config())
    (report,) = outcome.reports
    assert report.verdict is Verdict.FAIL
    (finding,) = report.findings
    assert finding.id == "TP-PRE-MISSING-KEYS" and finding.location.span.start_line == 0
    assert finding.evidence["rows"] == ROWS and finding.evidence["records"] == ROWS
    assert finding.message.startswith(f"every one of the {ROWS} rows, from line 1: no training field "
                                      "(keys: answer, context, question)")
    code, out, _ = run_cli("preflight", "--no-config", "--jobs", "1", str(path))
    assert code == 1 and out.count("TP-PRE-MISSING-KEYS") == 1
    # doctor takes it for the dataset it is: no "no loss column", no metric report
    report = doctor([tmp_path], Config()).reports
    assert [(r.artefact.kind, r.verdict) for r in report] == [("dataset", Verdict.FAIL)]


def test_some_rows_without_the_field_are_still_said_line_by_line(tmp_path):
    rows: list[dict[str, str]] = [{"text": f"row {i}"} for i in range(10)]
    rows[3] = {"body": "x"}
    rows[7] = {"body": "y"}
    path = write_qa(tmp_path, rows, "mixed.jsonl")
    assert findings(preflight([path], Config())) == [("TP-PRE-MISSING-KEYS", 3), ("TP-PRE-MISSING-KEYS", 7)]


# --- with a mapping: judged as the format it maps to ----------------------------------------

def test_the_command_line_mapping_judges_the_rows_as_their_format(tmp_path):
    path = write_qa(tmp_path, qa_rows(empty_answer_at=17))
    code, out, _ = run_cli("preflight", "--no-config", "--jobs", "1", "--field", "prompt=question",
                           "--field", "completion=answer", str(path))
    assert code == 1
    assert f"{path}:18:1: FAIL TP-PRE-EMPTY-TEXT line 18: completion is empty" in out
    assert "TP-PRE-MISSING-KEYS" not in out
    code, out, _ = run_cli("preflight", "--no-config", "--field", "body=answer", str(path))
    assert code == 2 and "unknown training field 'body'" in out + _


def test_the_settings_file_mapping_is_used_by_preflight_and_doctor(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.trainproof]\nfields = {text = "answer"}\n', encoding="utf-8")
    path = write_qa(tmp_path / "data", qa_rows(empty_answer_at=5))
    code, out, _ = run_cli("preflight", "--jobs", "1", str(path))
    assert code == 1 and f"{path}:6:1: FAIL TP-PRE-EMPTY-TEXT line 6: text is empty" in out
    code, out, _ = run_cli("doctor", str(tmp_path / "data"))
    assert code == 1 and out.count("TP-PRE-EMPTY-TEXT") == 1 and "TP-PRE-MISSING-KEYS" not in out


def test_worker_processes_map_the_fields_as_one_process_does(tmp_path):
    rows = qa_rows(empty_answer_at=33) * 20  # 800 rows: cut into many ranges below
    path = write_qa(tmp_path, rows)
    config = Config(fields={"prompt": "question", "completion": "answer"})
    one = preflight([path], config)
    many = preflight_jobs([path], config, jobs=2, part_bytes=4096, first_min=1024)
    assert findings(many) == findings(one)
    assert [f for f in findings(one) if f[0] == "TP-PRE-EMPTY-TEXT"] == [
        ("TP-PRE-EMPTY-TEXT", 33 + ROWS * k) for k in range(20)]


# --- the editor: trainproof.fields --------------------------------------------------------------

@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient):
    yield


@pytest_asyncio.fixture(params=["vscode"])
async def session(request, client: LanguageClient):
    s = Session(client, request.param)
    yield s
    await s.stop()


@pytest.mark.asyncio
async def test_the_editor_setting_maps_the_fields_as_you_type(session: Session, tmp_path: Path):
    path = write_qa(tmp_path, qa_rows())
    await session.start(root=tmp_path, settings={"fields": ["prompt=question", "completion=answer"]})
    uri = session.open(path)
    assert await session.diagnostics(uri) == []
    version = session.edit(uri, (4, 0), (5, 0), json.dumps({"question": "q", "answer": ""}) + "\n")
    got = await session.diagnostics(uri, version)
    assert [(d.code, d.range.start.line) for d in got] == [("TP-PRE-EMPTY-TEXT", 4)]


@pytest.mark.asyncio
async def test_the_editor_without_a_mapping_says_it_once(session: Session, tmp_path: Path):
    path = write_qa(tmp_path, qa_rows())
    await session.start(root=tmp_path)
    uri = session.open(path)
    got = await session.diagnostics(uri)
    assert [(d.code, d.range.start.line) for d in got] == [("TP-PRE-MISSING-KEYS", 0)]
