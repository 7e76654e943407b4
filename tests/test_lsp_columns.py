"""The editor setting `trainproof.columns`: a log whose loss column the readers do not know
by name is NOT-CHECKED (with the columns it saw) until the setting maps it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import pytest_asyncio
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from lsp_support import CLIENTS, SERVER, Session

pytestmark = pytest.mark.asyncio


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient):
    yield


@pytest_asyncio.fixture(params=list(CLIENTS)[:1])
async def session(request, client: LanguageClient):
    s = Session(client, request.param)
    yield s
    await s.stop()


def _diverging_log(folder: Path) -> Path:
    values = [3.0 - 0.1 * i for i in range(20)] + [1.1 + 0.3 * i for i in range(20)]
    path = folder / "metrics.jsonl"
    path.write_text("".join(json.dumps({"it": 10 * (i + 1), "MyObjective": round(v, 4)}) + "\n"
                            for i, v in enumerate(values)), encoding="utf-8")
    return path


async def test_an_unmapped_log_says_how_to_map_it(session: Session, tmp_path: Path):
    await session.start()
    uri = session.open(_diverging_log(tmp_path))
    (d,) = await session.diagnostics(uri)
    assert d.code == "TP-NOT-CHECKED" and d.severity == lsp.DiagnosticSeverity.Information
    assert "columns seen: MyObjective, it" in d.message and "columns = {loss" in d.message


async def test_the_columns_setting_maps_the_loss(session: Session, tmp_path: Path):
    mapping = {"columns": ["loss=MyObjective", "step=it"]}
    await session.start(settings=mapping, init_options=mapping)
    log = _diverging_log(tmp_path)
    uri = session.open(log)
    diags = await session.diagnostics(uri)
    codes = {d.code for d in diags}
    assert "TP-DIVERGE" in codes and "TP-NOT-CHECKED" not in codes
    (div,) = [d for d in diags if d.code == "TP-DIVERGE"]
    assert div.severity == lsp.DiagnosticSeverity.Error and div.range.start.line == 39
