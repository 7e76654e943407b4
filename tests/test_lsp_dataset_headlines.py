"""The language server shows a dataset's headline (the share of rows that repeat an earlier
row) as one diagnostic beside the per-row ones: its dataset diagnostics come from the same
judge as preflight's (preflight.dataset_report), the first open and every edit alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import pytest_asyncio
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from lsp_support import SERVER, Session

pytestmark = pytest.mark.asyncio


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient):
    yield


@pytest_asyncio.fixture(params=["neovim-0.11", "vscode"])
async def session(request, client: LanguageClient):
    s = Session(client, request.param)
    yield s
    await s.stop()


def _row(i: int) -> str:
    return json.dumps({"messages": [{"role": "user", "content": f"question {i}"},
                                    {"role": "assistant", "content": f"answer {i}"}]})


async def test_a_mostly_repeated_dataset_shows_one_headline_and_its_rows(session: Session, tmp_path: Path):
    rows = [_row(i % 12) for i in range(40)]  # lines 13-40 repeat lines 1-12: 28 of 40, 70%
    path = tmp_path / "train.jsonl"
    path.write_text("\n".join(rows) + "\n")
    await session.start()
    uri = session.open(path, language_id="jsonl")
    diags = await session.diagnostics(uri)
    heads = [d for d in diags if d.code in ("TP-PRE-MOSTLY-DUPLICATES", "TP-PRE-DUPLICATE-SHARE")]
    assert [(d.code, d.range.start.line, d.severity) for d in heads] == \
        [("TP-PRE-MOSTLY-DUPLICATES", 12, lsp.DiagnosticSeverity.Error)]
    [head] = heads
    assert head.message.startswith("70% of rows repeat an earlier row of this file: 28 of 40, the first at line 13; "
                                   "12 distinct rows; limit 50%")
    assert head.data["evidence"] == {"line": 13, "first_line": 1, "count": 28, "total": 40, "share": 0.7,
                                     "exact": 28, "near": 0, "distinct": 12}
    assert len([d for d in diags if d.code == "TP-PRE-DUPLICATE-TEXT"]) == 28
    # Make 25 of the repeats distinct: 3 of 40 left (7.5%), below the WARN's 10% — the headline goes.
    text = "\n".join(rows[:15] + [_row(100 + i) for i in range(15, 40)]) + "\n"
    version = session.edit(uri, (0, 0), (len(rows), 0), text)
    after = await session.diagnostics(uri, version)
    assert [d.code for d in after if str(d.code).startswith(("TP-PRE-MOSTLY", "TP-PRE-DUPLICATE-SHARE"))] == []
    assert [d.range.start.line for d in after if d.code == "TP-PRE-DUPLICATE-TEXT"] == [12, 13, 14]
    # ... and 2 more repeats bring it back as a WARN (5 of 40, 12.5%)
    version = session.edit(uri, (15, 0), (17, 0), rows[3] + "\n" + rows[4] + "\n")
    after = await session.diagnostics(uri, version)
    assert [(d.code, d.range.start.line, d.severity) for d in after if d.code == "TP-PRE-DUPLICATE-SHARE"] == \
        [("TP-PRE-DUPLICATE-SHARE", 12, lsp.DiagnosticSeverity.Warning)]
