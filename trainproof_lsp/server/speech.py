"""Hover on a speech listing's line: the audio's facts beside the line's findings.

    duration · sample rate · channels · codec · peak (clipped samples) · longest silence ·
    characters per second against the corpus's median

The line's audio is read in full (one file: its header and samples, readers/audio.py);
the corpus's median speaking rate needs every file's duration, read from the headers only
(no samples) once per version of the buffer and kept for the next hovers. Both run in
the analyzer's worker threads, never on the event loop.
"""

from __future__ import annotations

import asyncio
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..readers.audio import AudioFacts, SampleOptions, read_audio, read_header
from ..readers.speech import SpeechListing, Utterance, list_speech

# Corpora kept (one per open listing, the last few): a 20k-utterance corpus's rates
# are 20k floats.
_KEPT = 4


@dataclass(frozen=True, kw_only=True)
class Corpus:
    version: int
    listing: SpeechListing
    median_rate: float | None  # characters per second over the utterances with a duration
    rated: int  # utterances the median is over


def _duration(u: Utterance) -> float | None:
    """As the rule measures it: utterances whose audio header reads, at the file's
    duration (a manifest's segment: its declared one)."""
    header = read_header(u.audio) if u.audio else None
    if header is None:
        return None
    if not u.segment:
        return header.duration if header.duration > 0 else None
    return u.duration if u.duration is not None and u.duration > 0 else None


def corpus_of(path: Path, data: bytes, version: int) -> Corpus | None:
    """The listing in `data` with its median characters per second (header durations, as
    TP-DATA-CHAR-RATE-OUTLIER measures them); None when it is not a speech listing."""
    try:
        listing = list_speech(path, data=data)
    except Exception:  # not (or no longer) a listing: no hover, never an error on the loop
        return None
    rates = []
    for u in listing.utterances:
        d = _duration(u)
        if d and u.text.strip():
            rates.append(len(u.text.strip()) / d)
    return Corpus(version=version, listing=listing, median_rate=statistics.median(rates) if rates else None,
                  rated=len(rates))


class SpeechHovers:
    """The corpora of open listings, by URI, each for one buffer version."""

    def __init__(self) -> None:
        self.corpora: dict[str, Corpus] = {}

    def corpus(self, uri: str, path: Path, data: bytes, version: int) -> Corpus | None:
        got = self.corpora.get(uri)
        if got is not None and got.version == version:
            return got
        made = corpus_of(path, data, version)
        if made is None:
            self.corpora.pop(uri, None)
            return None
        self.corpora[uri] = made
        while len(self.corpora) > _KEPT:
            self.corpora.pop(next(iter(self.corpora)))
        return made

    def markdown(self, uri: str, path: Path, data: bytes, version: int, line: int) -> str | None:
        corpus = self.corpus(uri, path, data, version)
        if corpus is None:
            return None
        u = next((u for u in corpus.listing.utterances if u.line == line and u.path == str(path)), None)
        if u is None:
            return None
        return facts_markdown(u, read_audio(u.audio, SampleOptions()) if u.audio else None, corpus)


def facts_markdown(u: Utterance, facts: AudioFacts | None, corpus: Corpus) -> str:
    """The hover's table for one utterance."""
    rows: list[tuple[str, str]] = []
    if facts is None or facts.problem:
        why = "no audio named" if facts is None else f"{facts.problem.replace('-', ' ')}: {facts.detail}"
        rows.append(("audio", why))
    h = facts.header if facts is not None else None
    if h is not None:
        declared = f" (listing says {u.duration:.3g} s)" if u.duration is not None else ""
        rows.append(("duration", f"{h.duration:.3f} s{declared}"))
        rows.append(("sample rate", f"{h.sample_rate:,} Hz"))
        rows.append(("channels", str(h.channels)))
        rows.append(("codec", f"{h.container} {h.codec}"))
    s = facts.samples if facts is not None else None
    if s is not None:
        rows.append(("peak", f"{s.peak:.4g} of full scale ({s.clipped:,} clipped samples)"))
        rows.append(("longest silence", f"{s.longest_silence:.3f} s from {s.silence_start:.3f} s"))
    elif facts is not None and facts.samples_note:
        rows.append(("samples", facts.samples_note))
    duration = h.duration if h is not None and not u.segment else u.duration
    text = u.text.strip()
    if duration and text:
        rate = len(text) / duration
        against = f"; corpus median {corpus.median_rate:.1f} over {corpus.rated:,} utterances " \
                  f"({rate / corpus.median_rate:.2f}x)" if corpus.median_rate else ""
        rows.append(("chars per second", f"{rate:.1f}{against}"))
    title = f"**audio** `{_plain(u.audio_raw)}`" if u.audio_raw else "**audio**"
    table = ["| fact | value |", "|---|---|"] + [f"| {k} | {_plain(v)} |" for k, v in rows]
    return "\n".join([title, "", *table])


def _plain(text: str) -> str:
    # Paths and reasons come from the listing: untrusted, one line, no table breaks.
    return " ".join(text.split()).replace("|", "\\|").replace("`", "'")


async def with_audio_hover(tp: Any, doc: Any, uri: str, line: int, hover: Any) -> Any:
    """The listing line's hover: the audio's facts, then its findings' hover (if any)."""
    from lsprotocol import types as lsp

    hovers = getattr(tp, "speech_hovers", None)
    if hovers is None:
        hovers = tp.speech_hovers = SpeechHovers()
    data = doc.text.encode("utf-8", "surrogatepass")
    version = getattr(doc, "version", 0)
    loop = asyncio.get_running_loop()
    try:
        extra = await loop.run_in_executor(tp.analyzer.executor, hovers.markdown, uri, doc.path, data, version, line)
    except Exception:  # a hover never breaks the server: the findings' hover stands alone
        extra = None
    if extra is None:
        return hover
    if not tp.features.hover_markdown:
        extra = extra.replace("**", "").replace("\\|", "|")
    if hover is not None:
        extra = f"{extra}\n\n---\n\n{hover.contents.value}"
    kind = lsp.MarkupKind.Markdown if tp.features.hover_markdown else lsp.MarkupKind.PlainText
    return lsp.Hover(contents=lsp.MarkupContent(kind=kind, value=extra))


__all__ = ["SpeechHovers", "Corpus", "corpus_of", "facts_markdown", "with_audio_hover"]
