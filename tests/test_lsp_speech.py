"""Speech listings in the editor, end to end over stdio: an opened NeMo manifest or XTTS
metadata csv gets its speech findings at their lines, an edit re-judges it, and hovering a
line shows that utterance's audio facts (duration, rate, channels, peak, longest silence,
characters per second against the corpus median) above the line's findings."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
import pytest_asyncio
import pytest_lsp
from pytest_lsp import LanguageClient

from lsp_support import SERVER, Session, by_code

np = pytest.importorskip("numpy")
sf = pytest.importorskip("soundfile")

from test_speech import RATE, corpus, text_for, voice, write_manifest  # noqa: E402

pytestmark = pytest.mark.asyncio


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient):
    yield


@pytest_asyncio.fixture()
async def vscode(client: LanguageClient):
    s = Session(client, "vscode")
    yield s
    await s.stop()


def broken_manifest(folder: Path) -> Path:
    records = corpus(folder)
    records[3]["audio_filepath"] = "wavs/gone.wav"  # missing
    sf.write(folder / "wavs" / "u5.wav", voice(records[5]["duration"], rate=8000, seed=5), 8000, subtype="PCM_16")
    return write_manifest(folder, records)


async def test_an_opened_manifest_gets_its_speech_findings_at_their_lines(vscode: Session, tmp_path: Path):
    path = broken_manifest(tmp_path)
    await vscode.start(root=tmp_path)
    uri = vscode.open(path)
    got = by_code(await vscode.diagnostics(uri))
    assert got["TP-DATA-MISSING-AUDIO"].range.start.line == 3
    assert got["TP-DATA-INCONSISTENT-SR"].range.start.line == 5
    assert "8000 Hz" in got["TP-DATA-INCONSISTENT-SR"].message
    # Fix line 3 in the buffer: the missing audio is no longer reported.
    lines = path.read_text().splitlines()
    fixed = lines[3].replace("wavs/gone.wav", "wavs/u3.wav")
    version = vscode.edit(uri, (3, 0), (3, len(lines[3])), fixed)
    after = by_code(await vscode.diagnostics(uri, version))
    assert "TP-DATA-MISSING-AUDIO" not in after and after["TP-DATA-INCONSISTENT-SR"].range.start.line == 5


async def test_hover_on_a_manifest_line_shows_the_audios_facts_against_the_corpus(vscode: Session, tmp_path: Path):
    path = broken_manifest(tmp_path)
    records = [{"duration": round(1.0 + 0.05 * i, 3)} for i in range(24)]  # corpus()'s lengths
    await vscode.start(root=tmp_path)
    uri = vscode.open(path)
    await vscode.diagnostics(uri)
    hover = await vscode.hover(uri, 5, 2)
    assert hover is not None
    text = hover.contents.value
    lines = text.splitlines()
    assert lines[0] == "**audio** `wavs/u5.wav`"
    info = sf.info(str(tmp_path / "wavs" / "u5.wav"))
    rows = dict(line.strip("|").split(" | ", 1) for line in lines[2:] if line.startswith("| ") and " | " in line)
    rows = {k.strip(): v.strip() for k, v in rows.items()}
    assert rows["duration"] == f"{info.duration:.3f} s (listing says {records[5]['duration']:.3g} s)"
    assert rows["sample rate"] == "8,000 Hz" and rows["channels"] == "1" and rows["codec"] == "wav pcm16"
    data, _ = sf.read(str(tmp_path / "wavs" / "u5.wav"), dtype="float32")
    assert rows["peak"] == f"{float(np.abs(data).max()):.4g} of full scale (0 clipped samples)"
    assert rows["longest silence"].endswith(" s") and " from " in rows["longest silence"]
    # chars/s against the median over the utterances whose audio exists (line 3's is missing)
    durations = {i: sf.info(str(tmp_path / "wavs" / f"u{i}.wav")).duration for i in range(len(records)) if i != 3}
    rates = [len(text_for(records[i]["duration"])) / d for i, d in durations.items()]
    mine = len(text_for(records[5]["duration"])) / durations[5]
    med = statistics.median(rates)
    assert rows["chars per second"] == f"{mine:.1f}; corpus median {med:.1f} over {len(rates)} utterances " \
                                       f"({mine / med:.2f}x)"
    # The line's finding follows the facts.
    assert "**TP-DATA-INCONSISTENT-SR**" in text.split("---", 1)[1]
    # A healthy line: the facts alone.
    quiet = await vscode.hover(uri, 7, 2)
    assert quiet is not None and quiet.contents.value.startswith("**audio** `wavs/u7.wav`")
    assert "---" not in quiet.contents.value.replace("|---|---|", "")


async def test_an_opened_xtts_metadata_csv_is_judged_at_its_lines(vscode: Session, tmp_path: Path):
    (tmp_path / "wavs").mkdir()
    rows = ["audio_file|text|speaker_name"]
    for i in range(24):
        d = 1.0 + 0.05 * i
        sf.write(tmp_path / "wavs" / f"a{i}.wav", voice(d, seed=i), RATE, subtype="PCM_16")
        rows.append(f"wavs/a{i}.wav|{text_for(d)}|spk{i % 2}")
    rows[6] = "wavs/a5.wav||spk1"  # an empty transcript on line 6
    path = tmp_path / "metadata_train.csv"
    path.write_text("\n".join(rows) + "\n")
    await vscode.start(root=tmp_path)
    uri = vscode.open(path, language_id="csv")
    got = by_code(await vscode.diagnostics(uri))
    assert got["TP-DATA-EMPTY-TRANSCRIPT"].range.start.line == 6
