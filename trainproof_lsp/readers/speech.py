"""Speech/TTS datasets: the utterances a trainer reads, each at its line, with its audio.

Layouts (what the trainers themselves read):

    nemo-manifest   one JSON object a line (`.json`/`.jsonl`):
                    {"audio_filepath": "wavs/a.wav", "text": "...", "duration": 1.23,
                     "speaker": 3, "normalized_text": "..."}      (NeMo, ESPnet exports)
    ljspeech        metadata.csv, `id|text|normalized text`; audio `wavs/<id>.wav`
                    (Coqui's `ljspeech` formatter reads the third column)
    xtts            metadata_train.csv / metadata_eval.csv with the header
                    `audio_file|text|speaker_name` (Coqui's `coqui` formatter, XTTS recipes);
                    audio relative to the csv's folder
    vctk            a folder with `txt/<speaker>/<utt>.txt` and
                    `wav48_silence_trimmed/<speaker>/<utt>_mic1.flac` (or `wav48/.../<utt>.wav`)
    fish-lab        a folder of audio files, each with its transcript in `<stem>.lab` beside it
                    (Fish-speech); the speaker is the audio's folder
    audio-folder    a folder of audio files with `<stem>.txt` transcripts beside them

`list_speech` reads the listing (cheap: no audio opened); `scan_speech` adds every
audio file's facts (readers/audio.py, on all cores). Audio paths in a listing are
untrusted: a relative path is resolved against the listing's folder (never the working
directory), only regular files are read, each within a byte cap, and a path that leads
outside the listing's folder (absolute, `..`, or through a symlink) is marked `outside`
so the report says it was followed.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from ..core.model import ReadError
from .audio import AUDIO_SUFFIXES, AudioFacts, SampleOptions, scan_audio, soundfile_missing
from .common import open_regular, read_regular

NEMO, LJSPEECH, XTTS, VCTK, FISH, FOLDER = "nemo-manifest", "ljspeech", "xtts", "vctk", "fish-lab", "audio-folder"
LAYOUTS = (NEMO, LJSPEECH, XTTS, VCTK, FISH, FOLDER)

# The listing itself (a manifest or metadata.csv) is read whole: 20k utterances are ~3 MB,
# a 1M-utterance manifest ~200 MB.
MAX_LISTING_BYTES = 512 * 1024 * 1024
# Entries walked in a folder layout before it is refused: the largest public TTS corpora
# hold a few hundred thousand files.
MAX_FOLDER_ENTRIES = 2_000_000
# Transcript files (.lab/.txt) read per utterance: a transcript is a sentence or two.
MAX_TRANSCRIPT_BYTES = 64 * 1024
# A config beside the data, read for the trainer's limits: Coqui's are a few KiB.
MAX_CONFIG_BYTES = 4 * 1024 * 1024

_XTTS_HEADER = re.compile(r"\s*audio_file\s*\|\s*text\s*\|\s*speaker_name")
_LJ_ROW = re.compile(r"[^|\s/\\]+\|[^|]*(\|[^|]*)?\s*$")
_TEXT_KEYS = ("normalized_text", "text", "transcript")  # TTS trainers read the normalised text first
_SPEAKER_KEYS = ("speaker", "speaker_id", "speaker_name")


@dataclass(frozen=True, slots=True, kw_only=True)
class Utterance:
    """One training example: where it is written (file, 0-based line, width of the line),
    its audio (resolved; "" when none is named), its transcript and what the listing
    declares about it."""

    index: int
    path: str  # the file holding its transcript: the manifest, metadata.csv, a .lab/.txt
    line: int
    width: int
    audio: str  # resolved path ("" when the record names none)
    audio_raw: str  # as written in the listing
    text: str
    duration: float | None = None  # as declared in a manifest
    segment: bool = False  # the manifest cuts a segment (`offset`): its duration is not the file's
    speaker: str = ""
    outside: bool = False  # the audio path leads outside the listing's folder


@dataclass(frozen=True, slots=True, kw_only=True)
class BadRecord:
    """A line the trainer could not read as an utterance."""

    path: str
    line: int
    width: int
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigValue:
    path: str
    line: int
    key: str
    value: Any


@dataclass(frozen=True, kw_only=True)
class SpeechConfig:
    """The trainer's limits from a config beside the data (Coqui `config.json`, XTTS)."""

    path: str
    sample_rate: ConfigValue | None = None  # audio.sample_rate: what max_audio_len's samples count at
    max_audio_len: ConfigValue | None = None  # samples (Coqui), or model_args.max_wav_length (XTTS)
    min_audio_len: ConfigValue | None = None
    characters: ConfigValue | None = None  # the model's character set, all of it joined
    use_phonemes: bool = False


@dataclass(frozen=True, kw_only=True)
class SpeechListing:
    path: str  # the manifest, metadata.csv or folder
    layout: str
    root: str  # the folder relative audio paths are resolved against
    utterances: tuple[Utterance, ...]
    bad: tuple[BadRecord, ...] = ()
    config: SpeechConfig | None = None


@dataclass(frozen=True, kw_only=True)
class TokenizerFacts:
    """A SentencePiece model's pieces over the transcripts (token counts by utterance)."""

    path: str
    tokens: tuple[int, ...]  # pieces per utterance, in listing order
    unknown: tuple[int, ...]  # `<unk>` pieces per utterance


@dataclass(frozen=True, kw_only=True)
class SpeechScan:
    """A listing with every audio file's facts: what the speech rules read."""

    listing: SpeechListing
    audio: Mapping[str, AudioFacts]
    samples_note: str = ""  # non-empty: no sample facts (why)
    tokenizer: TokenizerFacts | None = None
    tokenizer_note: str = ""  # why there is no tokenizer facts, when one was looked for
    memo: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def path(self) -> str:
        return self.listing.path

    @property
    def utterances(self) -> tuple[Utterance, ...]:
        return self.listing.utterances

    def facts(self, u: Utterance) -> AudioFacts | None:
        return self.audio.get(u.audio) if u.audio else None


# --- what a file or folder is -----------------------------------------------------------------

def listing_layout(path: Path, head: bytes) -> str | None:
    """The speech layout a file's name and first bytes show, or None."""
    suffix = path.suffix.lower()
    if suffix in (".json", ".jsonl", ".ndjson") and b'"audio_filepath"' in head[:8192] \
            and head.lstrip()[:1] == b"{":
        return NEMO
    if suffix in (".csv", ".txt"):
        first = head.split(b"\n", 1)[0].decode("utf-8", "replace")
        if _XTTS_HEADER.match(first):
            return XTTS
        if path.name.lower() == "metadata.csv" and _LJ_ROW.match(first):
            return LJSPEECH
    return None


def folder_layout(folder: Path) -> str | None:
    """The speech layout of a folder (VCTK, .lab or .txt transcripts beside audio), or None.
    Looks at the folder's entries and one level of speaker folders only."""
    try:
        names = set(os.listdir(folder))
    except OSError:
        return None
    if "txt" in names and any(n.startswith("wav48") for n in names):
        return VCTK
    for where in [folder, *sorted(folder / n for n in names if (folder / n).is_dir())][:64]:
        try:
            entries = os.listdir(where)
        except OSError:
            continue
        stems = {os.path.splitext(e)[0] for e in entries if e.lower().endswith(AUDIO_SUFFIXES)}
        if not stems:
            continue
        if any(e.endswith(".lab") and e[:-4] in stems for e in entries):
            return FISH
        if any(e.endswith(".txt") and e[:-4] in stems for e in entries):
            return FOLDER
    return None


# --- reading listings -------------------------------------------------------------------------

def _resolve(root: Path, real_root: str, raw: str, real_dirs: dict[str, str] | None = None) -> tuple[str, bool]:
    """(the path to read, whether it leads outside `root`). Relative to the listing's
    folder, never the working directory. `real_dirs`: folders already resolved (a
    manifest's 20k files share a few folders: each is resolved once, and the file itself
    costs one lstat to see whether it is a symlink)."""
    full = raw if os.path.isabs(raw) else os.path.join(root, raw)
    if "//" in full or "/./" in full or full.endswith(("/", "/.")) or full.startswith("./"):
        full = str(Path(full))  # the spelling pathlib gives (no "." parts, no doubled or trailing "/")
    parent, name = os.path.split(full)
    if real_dirs is None or name in ("", ".", ".."):
        real = os.path.realpath(full)
    else:
        real_parent = real_dirs.get(parent)
        if real_parent is None:
            real_parent = real_dirs[parent] = os.path.realpath(parent)
        real = os.path.realpath(full) if os.path.islink(full) else os.path.join(real_parent, name)
    outside = not (real == real_root or real.startswith(real_root + os.sep))
    return full, outside


def _lines(data: bytes) -> list[str]:
    text = data.decode("utf-8", "replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    return [line.rstrip("\r") for line in text.split("\n")]


def _read_listing_bytes(path: Path, data: bytes | None) -> bytes:
    if data is not None:
        return data
    raw = read_regular(path, MAX_LISTING_BYTES)
    if len(raw) > MAX_LISTING_BYTES:
        raise ReadError(f"{path}: over {MAX_LISTING_BYTES // 2**20} MiB; not read as a speech listing")
    return raw


def _as_float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _nemo(path: Path, lines: list[str], root: Path, real_root: str) -> tuple[list[Utterance], list[BadRecord]]:
    utts: list[Utterance] = []
    bad: list[BadRecord] = []
    real_dirs: dict[str, str] = {}
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError) as e:
            bad.append(BadRecord(path=str(path), line=i, width=len(line), message=f"not JSON ({e})"))
            continue
        if not isinstance(rec, dict) or not isinstance(rec.get("audio_filepath"), str) or not rec["audio_filepath"]:
            bad.append(BadRecord(path=str(path), line=i, width=len(line),
                                 message="no `audio_filepath` string in the record"))
            continue
        text = next((rec[k] for k in _TEXT_KEYS if isinstance(rec.get(k), str)), None)
        if text is None:
            bad.append(BadRecord(path=str(path), line=i, width=len(line), message="no `text` string in the record"))
            continue
        raw = rec["audio_filepath"]
        audio, outside = _resolve(root, real_root, raw, real_dirs)
        speaker = next((str(rec[k]) for k in _SPEAKER_KEYS if k in rec and rec[k] is not None), "")
        utts.append(Utterance(index=len(utts), path=str(path), line=i, width=len(line), audio=audio, audio_raw=raw,
                              text=text, duration=_as_float(rec.get("duration")),
                              segment=bool(_as_float(rec.get("offset"))), speaker=speaker, outside=outside))
    return utts, bad


def _csv(path: Path, lines: list[str], root: Path, real_root: str, layout: str
         ) -> tuple[list[Utterance], list[BadRecord]]:
    utts: list[Utterance] = []
    bad: list[BadRecord] = []
    real_dirs: dict[str, str] = {}
    for i, line in enumerate(lines):
        if not line.strip() or (layout == XTTS and i == 0):
            continue
        cols = line.split("|")
        if len(cols) < 2:
            bad.append(BadRecord(path=str(path), line=i, width=len(line),
                                 message=f"{len(cols)} column(s); a row is `{'audio_file|text|speaker_name' if layout == XTTS else 'id|text|normalized text'}`"))
            continue
        if layout == XTTS:
            raw, text, speaker = cols[0].strip(), cols[1], cols[2].strip() if len(cols) > 2 else ""
        else:
            # Coqui's ljspeech formatter trains on the normalised third column.
            raw, speaker = f"wavs/{cols[0].strip()}.wav", "ljspeech"
            text = cols[2] if len(cols) > 2 and cols[2].strip() else cols[1]
        audio, outside = _resolve(root, real_root, raw, real_dirs)
        utts.append(Utterance(index=len(utts), path=str(path), line=i, width=len(line), audio=audio, audio_raw=raw,
                              text=text, speaker=speaker, outside=outside))
    return utts, bad


def _transcript(path: Path) -> tuple[str, int]:
    """A .lab/.txt transcript's text (its lines joined) and its first line's width."""
    try:
        with open_regular(path) as fh:
            raw = fh.read(MAX_TRANSCRIPT_BYTES)
    except OSError:
        return "", 0
    lines = [line for line in _lines(raw) if line.strip()]
    return " ".join(s.strip() for s in lines), len(lines[0]) if lines else 0


def _walk(folder: Path) -> Iterable[tuple[Path, list[str]]]:
    seen = 0
    for where, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        seen += len(files) + len(dirs)
        if seen > MAX_FOLDER_ENTRIES:
            raise ReadError(f"{folder}: more than {MAX_FOLDER_ENTRIES:,} entries; not walked as a speech folder")
        yield Path(where), sorted(files)


def _folder(folder: Path, layout: str) -> list[Utterance]:
    """Utterances of a folder layout, in path order: each at its transcript file (or at its
    audio file when it has none)."""
    suffix = ".lab" if layout == FISH else ".txt"
    utts: list[Utterance] = []
    for where, files in _walk(folder):
        names = set(files)
        for f in files:
            stem, ext = os.path.splitext(f)
            if ext.lower() not in AUDIO_SUFFIXES:
                if ext == suffix and not any(stem + a in names for a in AUDIO_SUFFIXES):
                    text, width = _transcript(where / f)  # a transcript whose audio is missing
                    utts.append(Utterance(index=len(utts), path=str(where / f), line=0, width=width,
                                          audio=str(where / (stem + ".wav")), audio_raw=stem + ".wav", text=text,
                                          speaker=where.name))
                continue
            tpath = where / (stem + suffix)
            text, width = _transcript(tpath) if stem + suffix in names else ("", 0)
            utts.append(Utterance(index=len(utts), path=str(tpath if stem + suffix in names else where / f), line=0,
                                  width=width, audio=str(where / f), audio_raw=f, text=text, speaker=where.name))
    return utts


def _vctk(folder: Path) -> list[Utterance]:
    """VCTK: txt/<spk>/<utt>.txt with its audio under wav48_silence_trimmed/<spk>/<utt>_mic1.flac
    (0.92, what Coqui's `vctk` formatter reads by default) or wav48/<spk>/<utt>.wav (0.80)."""
    audio_dirs = sorted((folder / n for n in os.listdir(folder) if n.startswith("wav48")), reverse=True)
    utts: list[Utterance] = []
    for where, files in _walk(folder / "txt"):
        for f in files:
            if not f.endswith(".txt"):
                continue
            stem, speaker = f[:-4], where.name
            text, width = _transcript(where / f)
            candidates = [d / speaker / f"{stem}_mic1.flac" for d in audio_dirs] + \
                         [d / speaker / f"{stem}.wav" for d in audio_dirs]
            audio = next((c for c in candidates if c.exists()), candidates[0] if candidates else where / f"{stem}.wav")
            utts.append(Utterance(index=len(utts), path=str(where / f), line=0, width=width, audio=str(audio),
                                  audio_raw=str(audio.relative_to(folder)) if audio_dirs else audio.name,
                                  text=text, speaker=speaker))
    return utts


def list_speech(path: Path, *, data: bytes | None = None, layout: str | None = None) -> SpeechListing:
    """The utterances of a speech listing (a manifest, a metadata csv, or a folder).
    ReadError (one line) when it is not one."""
    if path.is_dir() and data is None:
        layout = layout or folder_layout(path)
        if layout is None:
            raise ReadError(f"{path}: no speech layout (manifest, metadata.csv, .lab/.txt beside audio, VCTK)")
        utts = _vctk(path) if layout == VCTK else _folder(path, layout)
        return SpeechListing(path=str(path), layout=layout, root=str(path), utterances=tuple(utts),
                             config=read_speech_config(path))
    raw = _read_listing_bytes(path, data)
    layout = layout or listing_layout(path, raw[:65536])
    if layout is None:
        raise ReadError(f"{path}: not a speech listing (no `audio_filepath` records, no `audio_file|text|"
                        "speaker_name` header, not an LJSpeech metadata.csv)")
    root = path.parent
    real_root = os.path.realpath(root)
    lines = _lines(raw)
    if layout == NEMO:
        utts, bad = _nemo(path, lines, root, real_root)
    else:
        utts, bad = _csv(path, lines, root, real_root, layout)
    return SpeechListing(path=str(path), layout=layout, root=str(root), utterances=tuple(utts), bad=tuple(bad),
                         config=read_speech_config(root))


# --- the trainer's config beside the data ------------------------------------------------------

def _key_line(text: str, key: str) -> int:
    at = text.find(f'"{key}"')
    return text.count("\n", 0, at) if at >= 0 else 0


def read_speech_config(folder: Path) -> SpeechConfig | None:
    """A Coqui/XTTS config.json in the data's folder or the folder above it, read for the
    limits the trainer applies to the data; None when there is none."""
    for where in (folder, folder.parent):
        cfg = where / "config.json"
        try:
            raw = read_regular(cfg, MAX_CONFIG_BYTES)
        except OSError:
            continue
        if len(raw) > MAX_CONFIG_BYTES:
            continue
        try:
            doc = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        if not isinstance(doc, dict):
            continue
        text = raw.decode("utf-8", "replace")
        found = _config_values(str(cfg), text, doc)
        if found is not None:
            return found
    return None


def _config_values(path: str, text: str, doc: dict[str, Any]) -> SpeechConfig | None:
    def value(key: str, v: Any) -> ConfigValue | None:
        n = _as_float(v)
        if n is None or n != n or n in (float("inf"), float("-inf")) or n <= 0:
            return None
        return ConfigValue(path=path, line=_key_line(text, key), key=key, value=n)

    audio: dict[str, Any] = doc["audio"] if isinstance(doc.get("audio"), dict) else {}
    args: dict[str, Any] = doc["model_args"] if isinstance(doc.get("model_args"), dict) else {}
    rate = value("sample_rate", audio.get("sample_rate"))
    max_len = value("max_audio_len", doc.get("max_audio_len")) or value("max_wav_length", args.get("max_wav_length"))
    min_len = value("min_audio_len", doc.get("min_audio_len"))
    chars = doc.get("characters")
    characters = None
    if isinstance(chars, dict) and isinstance(chars.get("characters"), str):
        # Coqui's CharactersConfig: letters, punctuation and the special tokens make the set.
        joined = "".join(str(chars.get(k) or "") for k in ("characters", "punctuations")) + " "
        characters = ConfigValue(path=path, line=_key_line(text, "characters"), key="characters", value=joined)
    if rate is None and max_len is None and min_len is None and characters is None:
        return None
    return SpeechConfig(path=path, sample_rate=rate, max_audio_len=max_len, min_audio_len=min_len,
                        characters=characters, use_phonemes=doc.get("use_phonemes") is True)


# --- audio and tokenizer facts -----------------------------------------------------------------

def scan_speech(listing: SpeechListing, options: SampleOptions = SampleOptions(), *, jobs: int | None = None,
                progress: Callable[[int, int], None] | None = None, max_bytes: int | None = None,
                tokenizer: Path | None = None) -> SpeechScan:
    """The listing with every audio file's facts (headers, 8-byte hashes, and the sample
    pass when soundfile is there), read on `jobs` processes; and the SentencePiece
    `tokenizer`'s pieces over the transcripts when one is given."""
    missing = soundfile_missing() if options.decode else "samples not decoded"
    kw = {"max_bytes": max_bytes} if max_bytes is not None else {}
    audio = scan_audio((u.audio for u in listing.utterances if u.audio), options, jobs=jobs, progress=progress, **kw)
    tok: TokenizerFacts | None = None
    note = ""
    if tokenizer is not None:
        got = sentencepiece_pieces(tokenizer, [u.text for u in listing.utterances])
        tok, note = (got, "") if isinstance(got, TokenizerFacts) else (None, got)
    return SpeechScan(listing=listing, audio=audio, samples_note=missing or "", tokenizer=tok, tokenizer_note=note)


def sentencepiece_pieces(model: Path, texts: list[str]) -> TokenizerFacts | str:
    """Pieces and `<unk>` pieces per transcript with a SentencePiece model, or why not."""
    try:
        import sentencepiece  # type: ignore[import-untyped,unused-ignore]  # optional: the `speech` extra
    except ImportError as e:
        return f"sentencepiece is not installed ({e}); pip install 'trainproof-lsp[speech]'"
    try:
        proto = read_regular(model, 256 * 1024 * 1024)
        sp = sentencepiece.SentencePieceProcessor()
        sp.LoadFromSerializedProto(proto)
        unk = sp.unk_id()
        ids = sp.encode(texts)
    except OSError as e:
        return f"{model}: cannot read ({e.strerror or e})"
    except Exception as e:  # sentencepiece's own errors on a file that is not a model
        return f"{model}: not a SentencePiece model ({type(e).__name__}: {' '.join(str(e).split())[:160]})"
    return TokenizerFacts(path=str(model), tokens=tuple(len(x) for x in ids),
                          unknown=tuple(x.count(unk) for x in ids))


__all__ = ["Utterance", "BadRecord", "SpeechListing", "SpeechScan", "SpeechConfig", "ConfigValue", "TokenizerFacts",
           "list_speech", "scan_speech", "listing_layout", "folder_layout", "read_speech_config",
           "sentencepiece_pieces", "LAYOUTS", "NEMO", "LJSPEECH", "XTTS", "VCTK", "FISH", "FOLDER"]
