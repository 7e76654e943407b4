"""The bundle in the editor: a cross-file finding shows on both of its files, each pointing
at the other's line, and the hover on an eos_token_id line lists what every file of the
folder says. A real server over stdio (pytest-lsp); every wait is on a notification. The
folder is written by transformers and tokenizers (tests/bundle_folders.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import pytest_asyncio
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from bundle_folders import _eot_tokenizer, model, set_generation
from conftest import line_with
from lsp_support import SERVER, Session

pytestmark = pytest.mark.asyncio


@pytest.fixture(scope="module")
def stop_missing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model whose template ends turns with <|eot|> (63) and whose generation stops on 61 only."""
    folder = tmp_path_factory.mktemp("lsp_bundle") / "out"
    m = model(bos=60, eos=61)
    set_generation(m, bos_token_id=60, eos_token_id=61)
    m.save_pretrained(str(folder))
    _eot_tokenizer().save_pretrained(str(folder))
    return folder


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient):
    yield


@pytest_asyncio.fixture(params=["vscode", "neovim-0.11"])  # push and pull diagnostics
async def session(request, client: LanguageClient):
    s = Session(client, request.param)
    yield s
    await s.stop()


@pytest_asyncio.fixture
async def vscode(client: LanguageClient):
    s = Session(client, "vscode")
    yield s
    await s.stop()


def stop_diagnostic(diagnostics: list[lsp.Diagnostic]) -> lsp.Diagnostic:
    (d,) = [d for d in diagnostics if d.code == "TP-BUNDLE-STOP-TOKEN"]
    return d


async def test_the_stop_token_finding_shows_on_both_files_each_pointing_at_the_other(session, stop_missing):
    await session.start(root=stop_missing.parent)
    template = stop_missing / "chat_template.jinja"
    gen = stop_missing / "generation_config.json"
    eos_line = line_with(gen, '"eos_token_id"')
    d = stop_diagnostic(await session.diagnostics(session.open(template, language_id="jinja")))
    assert (d.range.start.line, d.severity) == (0, lsp.DiagnosticSeverity.Error)
    assert d.data["evidence"] == {"marker": "<|eot|>", "marker_id": 63, "stop_ids": "61",
                                  "stop_file": "generation_config.json"}
    (rel,) = d.related_information
    assert rel.location.uri == gen.as_uri() and rel.location.range.start.line == eos_line

    d = stop_diagnostic(await session.diagnostics(session.open(gen)))
    assert (d.range.start.line, d.severity) == (eos_line, lsp.DiagnosticSeverity.Error)
    assert "ends the assistant's turn with '<|eot|>' (id 63)" in d.message
    back = d.related_information[0]
    assert back.location.uri == template.as_uri() and back.location.range.start.line == 0


async def test_hover_on_eos_token_id_lists_what_each_file_says(vscode, stop_missing):
    await vscode.start(root=stop_missing.parent)
    cfg = stop_missing / "config.json"
    gen = stop_missing / "generation_config.json"
    tok_line = line_with(stop_missing / "tokenizer_config.json", '"eos_token"') + 1
    gen_line = line_with(gen, '"eos_token_id"') + 1
    listing = [f"generation_config.json line {gen_line}: eos_token_id 61",
               f"tokenizer_config.json line {tok_line}: eos_token '</s>' (id 61)",
               "chat_template.jinja line 1: the chat template ends an assistant turn with '<|eot|>' (id 63)"]

    uri = vscode.open(cfg)
    await vscode.diagnostics(uri)
    line = line_with(cfg, '"eos_token_id"')
    hover = await vscode.hover(uri, line)
    assert hover is not None
    text = hover.contents.value.replace("\\", "")  # the markdown escapes
    assert text.startswith("**eos** in this folder:")
    assert f"config.json line {line + 1}: eos_token_id 61" in text and all(s in text for s in listing)
    # a line that names no token id: no listing (and no finding there)
    assert await vscode.hover(uri, line_with(cfg, '"hidden_size"')) is None

    # On the finding's line the finding comes first, then the listing.
    uri = vscode.open(gen)
    await vscode.diagnostics(uri)
    hover = await vscode.hover(uri, gen_line - 1)
    assert hover is not None
    text = hover.contents.value.replace("\\", "")
    at = text.index("in this folder:")
    assert text.startswith("**TP-BUNDLE-STOP-TOKEN** · FAIL") and all(s in text[at:] for s in listing)
