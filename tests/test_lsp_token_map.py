"""The token map in the editor, end to end over stdio: with `trainproof.tokenizer` and
`trainproof.maxLen` set, hovering a dataset line shows that row's map (the rendered
conversation with the trained tokens between ⟦ ⟧, the counts, ✂ where truncation cuts),
and the dataset's code lens gives the length percentiles and shares. Without the setting,
neither shows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import pytest_asyncio
import pytest_lsp
from pytest_lsp import LanguageClient

from lsp_support import SERVER, Session
from token_map_tokenizer import make_tokenizer

pytest.importorskip("tokenizers")
pytestmark = pytest.mark.asyncio

ROWS = [
    {"messages": [{"role": "user", "content": "what is two plus two?"},
                  {"role": "assistant", "content": "it is four. the cat sat on the mat"}]},
    {"messages": [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hello there"}]},
]


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient):
    yield


@pytest_asyncio.fixture()
async def vscode(client: LanguageClient):
    s = Session(client, "vscode")
    yield s
    await s.stop()


@pytest.fixture
def dataset(tmp_path: Path) -> tuple[Path, Path]:
    folder = make_tokenizer(tmp_path / "tok")
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    return folder, path


def settings(folder: Path) -> dict[str, object]:
    return {"tokenizer": str(folder), "maxLen": 14, "loss": "assistant-only"}


async def test_hover_on_a_dataset_line_shows_the_rows_map(vscode: Session, dataset: tuple[Path, Path]):
    folder, path = dataset
    await vscode.start(settings=settings(folder), init_options=settings(folder))
    uri = vscode.open(path)
    await vscode.diagnostics(uri)
    hover = await vscode.hover(uri, 0, 2)
    assert hover is not None
    lines = hover.contents.value.splitlines()
    assert lines[0] == "**Token map** · line 1 · chat · loss assistant-only · max length 14 (keep_start)"
    assert lines[2] == ("19 tokens, 6 trained (11 before truncation); truncation cuts 5 token(s) after token 14; "
                        "turns: user, assistant")
    assert lines[4] == "<|user|>what is two plus two?<|assistant|>⟦it is four. the cat⟧✂ sat on the mat</s>"
    second = await vscode.hover(uri, 1, 2)
    assert second is not None
    assert "⟦hello there</s>⟧" in second.contents.value and "✂" not in second.contents.value.splitlines()[4]


async def test_the_dataset_lens_gives_the_percentiles_and_shares(vscode: Session, dataset: tuple[Path, Path]):
    folder, path = dataset
    await vscode.start(settings=settings(folder), init_options=settings(folder))
    uri = vscode.open(path)
    await vscode.diagnostics(uri)
    titles = [lens.command.title for lens in await vscode.lenses(uri)]
    (title,) = [t for t in titles if t.startswith("token map")]
    assert title.startswith("token map: p50 ") and "· 50% over 14 · 50% cut · 0% train nothing · " in title


async def test_without_a_tokenizer_setting_no_map_shows(vscode: Session, dataset: tuple[Path, Path]):
    _, path = dataset
    await vscode.start()
    uri = vscode.open(path)
    await vscode.diagnostics(uri)
    assert await vscode.hover(uri, 0, 2) is None
    assert not [lens for lens in await vscode.lenses(uri) if lens.command.title.startswith("token map")]
