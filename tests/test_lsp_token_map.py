"""The token map in the editor, end to end over stdio: with `trainproof.tokenizer` and
`trainproof.maxLen` set, hovering a dataset line shows that row's map (the rendered
conversation with the trained tokens between ⟦ ⟧, the counts, ✂ where truncation cuts),
and the dataset's code lens gives the length percentiles and shares; clicked, it runs
preflight with the run's tokenizer, max length and loss. Without the setting, neither shows."""

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


# --- the map lens, clicked: trainproof.checkDataset with the run's tokenizer, max length and loss
async def test_the_map_lens_runs_preflight_with_the_runs_tokenizer(vscode: Session, dataset: tuple[Path, Path]):
    folder, path = dataset
    settings = {"tokenizer": str(folder), "maxLen": 14, "loss": "assistant-only"}
    await vscode.start(settings=settings, init_options=settings)
    uri = vscode.open(path)
    await vscode.diagnostics(uri)
    (cmd,) = [lens.command for lens in await vscode.lenses(uri)
              if lens.command is not None and lens.command.title.startswith("token map")]
    assert cmd.command == "trainproof.checkDataset" and list(cmd.arguments or ()) == [str(path)]
    # the histogram's empty bins are no-break spaces: VS Code draws the title as HTML, where
    # plain spaces would collapse and the bars lose their bins
    bars = cmd.title.split(" · 0% train nothing · ", 1)[1]
    assert len(bars) == 16 and set(bars) == {"\u00a0", "█"} and bars.count("█") == 2, repr(bars)
    result = await vscode.command(cmd.command, *(cmd.arguments or ()))
    assert result["status"] == "done" and result["worst_verdict"] == "WARN"
    ids = sorted(f["id"] for f in result["findings"])
    # row 1 is 19 tokens: cut at 14, 5 of its 11 trained tokens lost (the lens's "50% cut")
    assert ids == ["TP-MAP-LENGTHS", "TP-MAP-RESPONSE-CUT", "TP-PRE-CONTEXT-OVERFLOW"], result["findings"]
    by_id = {f["id"]: f for f in result["findings"]}
    assert by_id["TP-MAP-LENGTHS"]["message"].startswith("token map of 2 rows: loss assistant-only;")
    assert "1 (50%) over max length 14 (keep_start)" in by_id["TP-MAP-LENGTHS"]["message"]
    assert by_id["TP-MAP-RESPONSE-CUT"]["message"].startswith("1 of 2 mapped rows (50%) lose trained tokens")
    # the open document shows the map's findings beside its own (the buffer's check builds no map)
    published = await vscode.published(uri, lambda p: any(d.code == "TP-MAP-RESPONSE-CUT" for d in p.diagnostics))
    codes = sorted(str(d.code) for d in published.diagnostics)
    assert codes == ["TP-MAP-LENGTHS", "TP-MAP-RESPONSE-CUT", "TP-PRE-CONTEXT-OVERFLOW"], codes


async def test_without_a_tokenizer_the_lens_command_checks_the_dataset_alone(vscode: Session,
                                                                           dataset: tuple[Path, Path]):
    _, path = dataset
    await vscode.start()
    result = await vscode.command("trainproof.checkDataset", str(path))
    assert result["status"] == "done" and result["worst_verdict"] == "PASS" and result["findings"] == []


async def test_a_tokenizer_setting_that_does_not_exist_is_refused_with_its_name(vscode: Session,
                                                                               dataset: tuple[Path, Path]):
    _, path = dataset
    missing = path.parent / "no-such-tokenizer"
    settings = {"tokenizer": str(missing), "maxLen": 14}
    await vscode.start(settings=settings, init_options=settings)
    result = await vscode.command("trainproof.checkDataset", str(path))
    assert result["status"] == "error"
    assert f"trainproof preflight {path}: not run — trainproof.tokenizer: {str(missing)!r} does not exist" in result["message"]
