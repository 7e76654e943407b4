"""The speech rules (rules/speech.py) proven whole: every finding asserted in full (message,
evidence, location, related places), every skip by its exact reason, each limit met exactly
and passed by the smallest step, several utterances in one listing (a rule that stopped at
the first one it passed over would be caught), and each input a rule reads another way.

Most scans are built here from the reader's own records (readers/speech.Utterance,
readers/audio.AudioFacts): the rules are pure functions of a SpeechScan, and a record built
in code states each fact a rule reads (a header's frames, a sample pass's counts) exactly.
The last tests write tiny WAV and FLAC files with soundfile and `wave`, in each listing
layout, and judge what the readers make of them."""

from __future__ import annotations

import json
import math
import wave
import zlib
from pathlib import Path
from typing import Any, Sequence

import pytest

from trainproof_lsp.core.config import Config
from trainproof_lsp.core.model import Hit, Location, Related, Span
from trainproof_lsp.judge.base import run_rules
from trainproof_lsp.readers.audio import AudioFacts, AudioHeader, SampleStats
from trainproof_lsp.readers.speech import (BadRecord, ConfigValue, SpeechConfig, SpeechListing, SpeechScan,
                                           TokenizerFacts, Utterance, list_speech, scan_speech)
from trainproof_lsp.rules import Rule, Skip
from trainproof_lsp.rules import speech as sp
from trainproof_lsp.rules.speech import (ClipLimits, MismatchLimits, OovLimits, OutlierLimits, RateLimits,
                                         SilenceLimits, SpeechContext, TpsLimits, at, duration_of, scripts_of)

ROOT = "/data"
LISTING = "/data/train_manifest.json"
RATE = 8000


# --- records built in code ----------------------------------------------------------------------

def utt(line: int, *, audio: str | None = None, raw: str | None = None, text: str = "the birch canoe",
        duration: float | None = None, segment: bool = False, speaker: str = "", outside: bool = False,
        width: int = 40, path: str = LISTING) -> Utterance:
    """Line `line` of a manifest: its audio is wavs/u<line>.wav unless named."""
    if audio is None:
        audio = f"{ROOT}/wavs/u{line}.wav"
    return Utterance(index=line, path=path, line=line, width=width, audio=audio,
                     audio_raw=raw if raw is not None else audio.removeprefix(ROOT + "/"), text=text,
                     duration=duration, segment=segment, speaker=speaker, outside=outside)


def wav(path: str, *, frames: int = 3 * RATE, rate: int = RATE, channels: int = 1, digest: int | None = None,
        size: int = 48044, samples: SampleStats | None = None) -> AudioFacts:
    """A readable file's facts (its digest the hash of its path unless given)."""
    return AudioFacts(path=path, size=size, digest=zlib.crc32(path.encode()) if digest is None else digest,
                      header=AudioHeader(container="wav", codec="pcm16", sample_rate=rate, channels=channels,
                                         frames=frames, bits=16), samples=samples)


def bad(path: str, problem: str, detail: str = "", size: int = 0) -> AudioFacts:
    return AudioFacts(path=path, size=size, problem=problem, detail=detail)


def scan(utts: Sequence[Utterance], facts: dict[str, AudioFacts] | None = None, *, bad_records: Sequence[BadRecord] = (),
         config: SpeechConfig | None = None, samples_note: str = "", tokenizer: TokenizerFacts | None = None,
         tokenizer_note: str = "", path: str = LISTING, layout: str = "nemo-manifest") -> SpeechScan:
    """A listing of `utts`; each named audio file is a 3-second 8 kHz WAV unless `facts` says otherwise."""
    audio = {u.audio: wav(u.audio) for u in utts if u.audio}
    audio.update(facts or {})
    listing = SpeechListing(path=path, layout=layout, root=ROOT, utterances=tuple(utts), bad=tuple(bad_records),
                            config=config)
    return SpeechScan(listing=listing, audio=audio, samples_note=samples_note, tokenizer=tokenizer,
                      tokenizer_note=tokenizer_note)


def a(line: int) -> str:
    return f"{ROOT}/wavs/u{line}.wav"


def place(line: int, width: int = 40, path: str = LISTING) -> Location:
    return Location(path=path, span=Span(line, 0, line, width))


def hits(rule: Rule[Any, Any], subject: SpeechScan, limits: Any = None, ctx: SpeechContext = SpeechContext()
         ) -> list[Hit]:
    return list(rule.check(subject, rule.limits() if limits is None else limits, ctx))  # type: ignore[misc]


def skipped(rule: Rule[Any, Any], subject: SpeechScan, ctx: SpeechContext = SpeechContext()) -> str:
    """The reason the engine records for the rule's skip (check.ran is False)."""
    findings, checks = run_rules([rule], subject, ctx, Config())
    assert findings == [] and len(checks) == 1 and not checks[0].ran, checks
    return str(checks[0].reason)


def ran(rule: Rule[Any, Any], subject: SpeechScan, ctx: SpeechContext = SpeechContext()) -> bool:
    _, checks = run_rules([rule], subject, ctx, Config())
    return checks[0].ran and checks[0].reason == ""


# --- where a finding sits ------------------------------------------------------------------------

def test_a_finding_spans_its_whole_line_and_a_folder_utterance_is_named_by_its_file():
    assert at(utt(4, width=17)) == Location(path=LISTING, span=Span(4, 0, 4, 17))
    # A manifest's first line (line 0 with a width) is "line 1"; a folder layout's audio file
    # without a transcript (line 0, width 0) is named by its file; a line past the first
    # with no width (an empty transcript line) is still "line N".
    lab = utt(0, text="", width=0, path="/data/alice/a9.wav")
    first = utt(0, text="", width=12)
    later = utt(3, text=" ", width=0)
    spoken = utt(1)
    got = hits(sp.EMPTY, scan([lab, spoken, first, later]))
    assert got == [
        Hit(message="a9.wav: empty transcript (3 of 4 utterances)",
            evidence={"line": 1, "empty": 3, "utterances": 4}, location=place(0, 0, "/data/alice/a9.wav")),
        Hit(message="line 1: empty transcript (3 of 4 utterances)",
            evidence={"line": 1, "empty": 3, "utterances": 4}, location=place(0, 12)),
        Hit(message="line 4: empty transcript (3 of 4 utterances)",
            evidence={"line": 4, "empty": 3, "utterances": 4}, location=place(3, 0)),
    ]


def test_duration_of_is_the_files_own_unless_the_record_cuts_a_segment():
    facts = wav(a(0), frames=12000)
    assert duration_of(utt(0, duration=9.0), facts) == 1.5
    assert duration_of(utt(0), facts) == 1.5
    # A segment (`offset`): the manifest's duration; with none declared, no duration.
    assert duration_of(utt(0, duration=0.4, segment=True), facts) == 0.4
    assert duration_of(utt(0, segment=True), facts) is None
    # No file facts, or a file whose header was not read: the manifest's, when positive.
    assert duration_of(utt(0, duration=0.5), None) == 0.5
    assert duration_of(utt(0, duration=2.0), bad(a(0), "truncated")) == 2.0
    assert duration_of(utt(0, duration=0.0), None) is None
    assert duration_of(utt(0, duration=-1.0), None) is None
    assert duration_of(utt(0), None) is None


# --- records and files ---------------------------------------------------------------------------

def test_each_bad_record_is_a_finding_at_its_own_line():
    records = [BadRecord(path=LISTING, line=3, width=31, message="not JSON (Expecting value)"),
               BadRecord(path=LISTING, line=7, width=19, message="no `text` string in the record")]
    got = hits(sp.BAD_RECORD, scan([utt(0)], bad_records=records))
    assert got == [
        Hit(message="line 4: not JSON (Expecting value)", evidence={"line": 4}, location=place(3, 31)),
        Hit(message="line 8: no `text` string in the record", evidence={"line": 8}, location=place(7, 19)),
    ]
    assert hits(sp.BAD_RECORD, scan([utt(0)])) == []


def test_missing_audio_counts_only_missing_files_among_every_utterance():
    utts = [utt(0), utt(1), utt(2, audio="", text="no audio named"), utt(3), utt(4)]
    facts = {a(1): bad(a(1), "missing", "no such file"), a(3): bad(a(3), "missing", "no such file"),
             a(4): bad(a(4), "truncated", "cut", 10)}
    got = hits(sp.MISSING, scan(utts, facts))
    assert got == [
        Hit(message="line 2: audio 'wavs/u1.wav' does not exist (2 of 5 utterances)",
            evidence={"line": 2, "missing": 2, "utterances": 5}, location=place(1)),
        Hit(message="line 4: audio 'wavs/u3.wav' does not exist (2 of 5 utterances)",
            evidence={"line": 4, "missing": 2, "utterances": 5}, location=place(3)),
    ]
    assert hits(sp.MISSING, scan(utts[:1])) == []


def test_unreadable_audio_says_what_is_wrong_with_each_file_and_passes_over_missing_ones():
    utts = [utt(0), utt(1), utt(2), utt(3, audio=""), utt(4), utt(5)]
    facts = {a(1): bad(a(1), "missing", "no such file"),
             a(2): bad(a(2), "not-regular", "a FIFO, not a regular file"),
             a(4): bad(a(4), "truncated", "the data chunk declares 48,000 bytes, the file holds 1,956", 2000),
             a(5): bad(a(5), "unreadable", "not a RIFF/WAVE file", 21)}
    got = hits(sp.UNREADABLE, scan(utts, facts))
    assert got == [
        Hit(message="line 3: audio 'wavs/u2.wav' is not regular: a FIFO, not a regular file",
            evidence={"line": 3, "kind": "not-regular", "bytes": 0}, location=place(2)),
        Hit(message="line 5: audio 'wavs/u4.wav' is truncated: the data chunk declares 48,000 bytes, the file holds 1,956",
            evidence={"line": 5, "kind": "truncated", "bytes": 2000}, location=place(4)),
        Hit(message="line 6: audio 'wavs/u5.wav' is unreadable: not a RIFF/WAVE file",
            evidence={"line": 6, "kind": "unreadable", "bytes": 21}, location=place(5)),
    ]


# --- the majority's sample rate and channels --------------------------------------------------------

def _rates(rates: Sequence[int], **extra: AudioFacts) -> SpeechScan:
    utts = [utt(i) for i in range(len(rates))]
    facts = {a(i): wav(a(i), rate=r, frames=3 * r) for i, r in enumerate(rates)}
    facts.update(extra)
    return scan(utts, facts)


def test_each_file_off_the_majority_rate_points_at_the_first_file_at_it():
    # The odd file comes first, and a missing one is no file of the count.
    s = _rates([16000, 8000, 8000, 22050, 8000, 8000])
    s = scan(list(s.utterances) + [utt(6)], {**s.audio, a(6): bad(a(6), "missing")})
    first = (Related(location=place(1), message="first file at 8000 Hz"),)
    assert hits(sp.INCONSISTENT_SR, s) == [
        Hit(message="line 1: 16000 Hz where 4 of 6 files are 8000 Hz (1 file(s) at 16000 Hz)",
            evidence={"line": 1, "sample_rate": 16000, "majority_sample_rate": 8000, "majority": 4, "files": 6,
                      "these": 1}, location=place(0), related=first),
        Hit(message="line 4: 22050 Hz where 4 of 6 files are 8000 Hz (1 file(s) at 22050 Hz)",
            evidence={"line": 4, "sample_rate": 22050, "majority_sample_rate": 8000, "majority": 4, "files": 6,
                      "these": 1}, location=place(3), related=first),
    ]


def test_on_a_tie_the_rate_met_first_is_the_majority():
    s = _rates([16000, 8000, 8000, 16000])
    first = (Related(location=place(0), message="first file at 16000 Hz"),)
    assert hits(sp.INCONSISTENT_SR, s) == [
        Hit(message=f"line {n + 1}: 8000 Hz where 2 of 4 files are 16000 Hz (2 file(s) at 8000 Hz)",
            evidence={"line": n + 1, "sample_rate": 8000, "majority_sample_rate": 16000, "majority": 2, "files": 4,
                      "these": 2}, location=place(n), related=first) for n in (1, 2)]
    s = _rates([8000, 16000, 16000, 8000])
    assert [h.evidence["majority_sample_rate"] for h in hits(sp.INCONSISTENT_SR, s)] == [8000, 8000]


def test_one_rate_throughout_is_quiet():
    assert hits(sp.INCONSISTENT_SR, _rates([8000, 8000, 8000])) == []
    assert hits(sp.INCONSISTENT_SR, _rates([8000])) == []


def test_a_stereo_file_among_mono_ones():
    utts = [utt(i) for i in range(4)]
    facts = {a(2): wav(a(2), channels=2)}
    first = (Related(location=place(0), message="first file at 1 channel(s)"),)
    assert hits(sp.INCONSISTENT_CHANNELS, scan(utts, facts)) == [
        Hit(message="line 3: 2 channel(s) where 3 of 4 files are 1 channel(s) (1 file(s) at 2 channel(s))",
            evidence={"line": 3, "channels": 2, "majority_channels": 1, "majority": 3, "files": 4, "these": 1},
            location=place(2), related=first)]
    assert hits(sp.INCONSISTENT_CHANNELS, scan(utts)) == []
    assert hits(sp.INCONSISTENT_SR, scan(utts, facts)) == []


# --- outliers against the corpus's own spread -------------------------------------------------------

def _timed(frames: Sequence[int], texts: Sequence[str] | None = None, **extra: Any) -> SpeechScan:
    """One utterance per entry of `frames` (8 kHz), with `extra` utterances appended as (utt, facts)."""
    texts = texts or ["the birch canoe slid on the smooth planks"] * len(frames)
    utts = [utt(i, text=t) for i, t in enumerate(texts)]
    facts = {a(i): wav(a(i), frames=f) for i, f in enumerate(frames)}
    return scan(utts, facts)


def _plus(s: SpeechScan, *more: tuple[Utterance, AudioFacts | None]) -> SpeechScan:
    facts = dict(s.audio)
    for u, f in more:
        if f is not None:
            facts[u.audio] = f
    return scan(list(s.utterances) + [u for u, _ in more], facts)


def _unknown_durations(s: SpeechScan, first: int) -> SpeechScan:
    """Utterances no duration is known for: a file of no frames, a segment declaring none, a
    missing file: none of them a value of the corpus."""
    return _plus(s, (utt(first), wav(a(first), frames=0)),
                 (utt(first + 1, segment=True), wav(a(first + 1))),
                 (utt(first + 2), bad(a(first + 2), "missing")))


def test_duration_outliers_above_and_below_the_median_are_each_found():
    # 19 clips of 3.000125 s (MAD 0: the spread is its floor, 0.1), a 9.123375-s one and a 0.5-s one.
    s = _unknown_durations(_timed([24001] * 10 + [72987] + [24001] * 9 + [4000]), 21)
    got = hits(sp.DURATION_OUTLIER, s)
    assert got == [
        Hit(message="line 11: 9.123 s is 3.04x the corpus median 3 s (robust z +11.1; limit 4.0, i.e. beyond 1.49x "
                    "either way)",
            evidence={"line": 11, "duration": 9.1234, "median": 3.0001, "z": 11.12}, location=place(10)),
        Hit(message="line 21: 0.5 s is 0.17x the corpus median 3 s (robust z -17.9; limit 4.0, i.e. beyond 1.49x "
                    "either way)",
            evidence={"line": 21, "duration": 0.5, "median": 3.0001, "z": -17.92}, location=place(20)),
    ]


def test_duration_outlier_judged_against_a_spread_wider_than_its_floor():
    # log-durations of 2 s, 3 s and 4 s: MAD 0.405 (of ln 3 - ln 2), a robust spread of 0.601.
    frames = [16000] * 10 + [24000] + [32000] * 9 + [320000]
    got = hits(sp.DURATION_OUTLIER, _timed(frames))
    assert got == [
        Hit(message="line 21: 40 s is 13.33x the corpus median 3 s (robust z +4.3; limit 4.0, i.e. beyond 11.07x "
                    "either way)",
            evidence={"line": 21, "duration": 40.0, "median": 3.0, "z": 4.31}, location=place(20))]


def test_duration_outlier_at_its_limit_exactly_is_quiet_and_just_past_it_fires():
    frames = [24001] * 19 + [72987]
    z = (math.log(72987 / RATE) - math.log(24001 / RATE)) / 0.1  # the rule's own arithmetic
    s = _timed(frames)
    assert hits(sp.DURATION_OUTLIER, s, OutlierLimits(max_z=z)) == []
    assert [h.evidence["line"] for h in hits(sp.DURATION_OUTLIER, s, OutlierLimits(max_z=math.nextafter(z, 0)))] \
        == [20]
    # The same below the median: |z| is judged.
    s = _timed([24001] * 19 + [8000])
    z = (math.log(8000 / RATE) - math.log(24001 / RATE)) / 0.1
    assert hits(sp.DURATION_OUTLIER, s, OutlierLimits(max_z=-z)) == []
    assert len(hits(sp.DURATION_OUTLIER, s, OutlierLimits(max_z=math.nextafter(-z, 0)))) == 1


def test_duration_outlier_floor_of_the_spread_is_read_from_the_limits():
    s = _timed([24000] * 19 + [48000])  # twice the median: ln 2 = 0.693 from it, MAD 0
    assert [h.message for h in hits(sp.DURATION_OUTLIER, s, OutlierLimits(min_spread=0.15))] == [
        "line 20: 6 s is 2.00x the corpus median 3 s (robust z +4.6; limit 4.0, i.e. beyond 1.82x either way)"]
    assert hits(sp.DURATION_OUTLIER, s, OutlierLimits(min_spread=0.2)) == []


def test_duration_outlier_needs_its_minimum_of_known_durations():
    s = _unknown_durations(_timed([24000] * 18 + [90000]), 19)
    assert skipped(sp.DURATION_OUTLIER, s) == "19 utterance(s) with a known value; the corpus spread needs 20"
    s = _unknown_durations(_timed([24000] * 19 + [90000]), 20)
    assert ran(sp.DURATION_OUTLIER, s) and [h.evidence["line"] for h in hits(sp.DURATION_OUTLIER, s)] == [20]
    s = _timed([24000] * 4 + [90000])
    with pytest.raises(Skip, match=r"^5 utterance\(s\) with a known value; the corpus spread needs 6$"):
        hits(sp.DURATION_OUTLIER, s, OutlierLimits(min_utterances=6))
    assert len(hits(sp.DURATION_OUTLIER, s, OutlierLimits(min_utterances=5))) == 1


TEXT45 = "the birch canoe slid on the smooth planks ok"  # 44 characters: 14.67 a second of 3 s


def test_char_rate_outliers_fast_and_slow_with_the_transcript_stripped():
    texts = [TEXT45] * 21
    texts[3] = "  " + TEXT45 * 3 + "  "  # 132 characters once stripped: 44 a second
    texts[17] = "slid"  # 4 characters: 1.33 a second
    s = _plus(_timed([24000] * 21, texts), (utt(21, text="   "), wav(a(21))), (utt(22), wav(a(22), frames=0)),
              (utt(23, text="the birch canoe", duration=1.0, segment=True), None))  # 15 a second of its segment
    got = hits(sp.CHAR_RATE, s)
    assert got == [
        Hit(message="line 4: 44.0 chars/s is 3.00x the corpus median 14.7 chars/s (robust z +11.0; limit 5.0): "
                    "does this transcript belong to this audio?",
            evidence={"line": 4, "chars_per_second": 44.0, "median": 14.667, "z": 10.99}, location=place(3)),
        Hit(message="line 18: 1.3 chars/s is 0.09x the corpus median 14.7 chars/s (robust z -24.0; limit 5.0): "
                    "does this transcript belong to this audio?",
            evidence={"line": 18, "chars_per_second": 1.333, "median": 14.667, "z": -23.98}, location=place(17)),
    ]


def test_char_rate_reads_each_of_its_own_limits():
    texts = [TEXT45] * 20
    texts[5] = TEXT45 + TEXT45[:30]  # 74 characters: ln(74/44) = 0.52 from the median
    s = _timed([24000] * 20, texts)
    z = (math.log(74 / 3) - math.log(44 / 3)) / 0.1
    assert [h.evidence["z"] for h in hits(sp.CHAR_RATE, s)] == [round(z, 2)]  # 5.2 against 5.0
    assert hits(sp.CHAR_RATE, s, RateLimits(max_z=z)) == []
    assert len(hits(sp.CHAR_RATE, s, RateLimits(max_z=math.nextafter(z, 0)))) == 1
    assert [h.message for h in hits(sp.CHAR_RATE, s, RateLimits(max_z=2.5, min_spread=0.2))] == [
        "line 6: 24.7 chars/s is 1.68x the corpus median 14.7 chars/s (robust z +2.6; limit 2.5): "
        "does this transcript belong to this audio?"]
    with pytest.raises(Skip, match=r"^20 utterance\(s\) with a known value; the corpus spread needs 21$"):
        hits(sp.CHAR_RATE, s, RateLimits(min_utterances=21))
    s = _plus(_timed([24000] * 18), (utt(18, text=""), wav(a(18))), (utt(19), wav(a(19), frames=0)))
    assert skipped(sp.CHAR_RATE, s) == "18 utterance(s) with a known value; the corpus spread needs 20"


# --- duplicates ------------------------------------------------------------------------------------

def test_duplicates_name_the_same_file_or_byte_identical_audio_and_point_at_its_first_use():
    utts = [utt(0), utt(1), utt(2, audio=a(0)), utt(3), utt(4), utt(5, audio="")]
    facts = {a(0): wav(a(0), digest=11, size=48044), a(1): wav(a(1), digest=22, size=1234567),
             a(3): wav(a(3), digest=11, size=48044), a(4): wav(a(4), digest=22, size=1234567)}
    got = hits(sp.DUPLICATES, scan(utts, facts))
    assert got == [
        Hit(message="line 3 names the same audio file as line 1 (48,044 bytes)",
            evidence={"line": 3, "first_line": 1, "bytes": 48044}, location=place(2),
            related=(Related(location=place(0), message="first use of this audio"),)),
        Hit(message="line 4 has audio byte-identical to line 1 (48,044 bytes)",
            evidence={"line": 4, "first_line": 1, "bytes": 48044}, location=place(3),
            related=(Related(location=place(0), message="first use of this audio"),)),
        Hit(message="line 5 has audio byte-identical to line 2 (1,234,567 bytes)",
            evidence={"line": 5, "first_line": 2, "bytes": 1234567}, location=place(4),
            related=(Related(location=place(1), message="first use of this audio"),)),
    ]
    assert hits(sp.DUPLICATES, scan(utts[:2] + utts[3:4], {a(3): wav(a(3), digest=33)})) == []


# --- samples ---------------------------------------------------------------------------------------

def _stats(*, clipped: int = 0, peak: float = 0.6, silence: float = 0.2, start: float = 0.0) -> SampleStats:
    return SampleStats(peak=peak, clipped=clipped, longest_silence=silence, silence_start=start)


def _sampled(stats: Sequence[SampleStats | None], frames: int = 3 * RATE, note: str = "") -> SpeechScan:
    utts = [utt(i) for i in range(len(stats))]
    return scan(utts, {a(i): wav(a(i), frames=frames, samples=s) for i, s in enumerate(stats)}, samples_note=note)


def test_clipping_at_its_minimum_count_fires_and_one_below_it_does_not():
    s = _sampled([_stats(clipped=2, peak=1.0), _stats(clipped=3, peak=1.0), None, _stats(clipped=1234, peak=1.25),
                  _stats()])
    assert hits(sp.CLIPPING, s) == [
        Hit(message="line 2: 3 sample(s) at or above 0.999 of full scale (peak 1.0000); limit 3",
            evidence={"line": 2, "clipped": 3, "peak": 1.0}, location=place(1)),
        Hit(message="line 4: 1,234 sample(s) at or above 0.999 of full scale (peak 1.2500); limit 3",
            evidence={"line": 4, "clipped": 1234, "peak": 1.25}, location=place(3)),
    ]
    assert [h.message for h in hits(sp.CLIPPING, s, ClipLimits(clip_level=0.99, min_clipped=1234))] == [
        "line 4: 1,234 sample(s) at or above 0.99 of full scale (peak 1.2500); limit 1234"]
    assert [h.evidence["line"] for h in hits(sp.CLIPPING, s, ClipLimits(min_clipped=2))] == [1, 2, 4]


def test_sample_rules_are_skipped_with_the_scans_own_reason():
    s = _sampled([_stats(clipped=40)], note="soundfile is not installed (pip install soundfile)")
    assert skipped(sp.CLIPPING, s) == "soundfile is not installed (pip install soundfile)"
    assert skipped(sp.SILENCE, s) == "soundfile is not installed (pip install soundfile)"
    assert ran(sp.CLIPPING, _sampled([None])) and hits(sp.SILENCE, _sampled([None])) == []


def test_silence_past_its_limit_says_where_it_starts_or_that_the_whole_file_is_silent():
    frames = 48003  # 16 kHz: 3.0001875 s
    dur = frames / 16000
    utts = [utt(i) for i in range(5)]
    stats = [_stats(silence=2.0, start=0.5), _stats(silence=math.nextafter(2.0, 3.0), start=0.25),
             _stats(silence=dur - 1e-3, start=1e-3), _stats(silence=dur - 0.01, start=0.01), _stats(silence=2.5)]
    facts = {a(i): wav(a(i), frames=frames, rate=16000, samples=st) for i, st in enumerate(stats)}
    facts[a(4)] = wav(a(4), frames=int(2.5 * RATE), samples=stats[4])
    got = hits(sp.SILENCE, scan(utts, facts))
    assert got == [
        Hit(message="line 2: 2.00 s of silence (from 0.25 s; 3.00 s long); limit 2.0 s",
            evidence={"line": 2, "silence_s": math.nextafter(2.0, 3.0), "start_s": 0.25, "duration": 3.0002},
            location=place(1)),
        Hit(message="line 3: 3.00 s of silence (the whole file is silent; 3.00 s long); limit 2.0 s",
            evidence={"line": 3, "silence_s": dur - 1e-3, "start_s": 1e-3, "duration": 3.0002}, location=place(2)),
        Hit(message="line 4: 2.99 s of silence (from 0.01 s; 3.00 s long); limit 2.0 s",
            evidence={"line": 4, "silence_s": dur - 0.01, "start_s": 0.01, "duration": 3.0002}, location=place(3)),
        Hit(message="line 5: 2.50 s of silence (the whole file is silent; 2.50 s long); limit 2.0 s",
            evidence={"line": 5, "silence_s": 2.5, "start_s": 0.0, "duration": 2.5}, location=place(4)),
    ]
    assert [h.message for h in hits(sp.SILENCE, scan(utts, facts), SilenceLimits(max_silence_s=2.5))] == [
        "line 3: 3.00 s of silence (the whole file is silent; 3.00 s long); limit 2.5 s",
        "line 4: 2.99 s of silence (from 0.01 s; 3.00 s long); limit 2.5 s"]


# --- transcripts -----------------------------------------------------------------------------------

def test_each_kind_of_unnormalised_text_is_named_by_its_first_token():
    texts = ["it opened on 12/03/1999 at 10:30", "plain words only", "meet at 10:30 sharp", "on 1999-03-12",
             "in 1,887.5 years", "fifty % more", "you & me", "v2 of it"]
    s = scan([utt(i, text=t) for i, t in enumerate(texts)])
    got = [(h.message, dict(h.evidence), h.location) for h in hits(sp.UNNORMALIZED, s)]
    assert got == [
        ("line 1: date '12/03/1999' in the transcript is not spelled out",
         {"line": 1, "kind": "date", "token": "12/03/1999"}, place(0)),
        ("line 3: time '10:30' in the transcript is not spelled out", {"line": 3, "kind": "time", "token": "10:30"},
         place(2)),
        ("line 4: date '1999-03-12' in the transcript is not spelled out",
         {"line": 4, "kind": "date", "token": "1999-03-12"}, place(3)),
        ("line 5: number '1,887.5' in the transcript is not spelled out",
         {"line": 5, "kind": "number", "token": "1,887.5"}, place(4)),
        ("line 6: symbol '%' in the transcript is not spelled out", {"line": 6, "kind": "symbol", "token": "%"},
         place(5)),
        ("line 7: symbol '&' in the transcript is not spelled out", {"line": 7, "kind": "symbol", "token": "&"},
         place(6)),
        ("line 8: number '2' in the transcript is not spelled out", {"line": 8, "kind": "number", "token": "2"},
         place(7)),
    ]


def test_scripts_of_a_text_in_the_order_met():
    assert scripts_of("hello world") == ["LATIN"]
    assert scripts_of("12 + 3 = 15 !") == []
    assert scripts_of("") == []
    assert scripts_of("café") == ["LATIN"]
    assert scripts_of("— 12 € «»") == []
    assert scripts_of("αβγ abc жзи") == ["GREEK", "LATIN", "CYRILLIC"]
    # Kana, kanji and hangul are written together: one script.
    assert scripts_of("日本語のテキスト한국어") == ["CJK"]
    assert scripts_of("テキスト") == ["CJK"] and scripts_of("한국어") == ["CJK"] and scripts_of("の") == ["CJK"]


def test_a_letter_without_a_unicode_name_is_a_script_of_its_own():
    # Tangut ideographs are letters that Python 3.11's unicodedata gives no name; found here,
    # not hard-coded, since another Python's database may name them.
    import unicodedata

    nameless = next((chr(i) for i in range(0x10000, 0x32000) if chr(i).isalpha()
                     and unicodedata.name(chr(i), None) is None), None)
    if nameless is None:
        pytest.skip("every letter has a name in this Python's Unicode database")
    assert scripts_of("a" + nameless) == ["LATIN", "UNKNOWN"]
    assert [h.message for h in hits(sp.MIXED_SCRIPTS, scan([utt(0, text="ab" + nameless)]))] == [
        "line 1: letters of 2 scripts (Latin, Unknown)"]


def test_mixed_scripts_in_several_transcripts():
    texts = ["the fox s\u0430id hello", "café crème", "日本語のテキスト한국어", "αβγ abc жзи", "plain"]
    got = hits(sp.MIXED_SCRIPTS, scan([utt(i, text=t) for i, t in enumerate(texts)]))
    assert got == [
        Hit(message="line 1: letters of 2 scripts (Latin, Cyrillic)", evidence={"line": 1, "scripts": "LATIN+CYRILLIC"},
            location=place(0)),
        Hit(message="line 4: letters of 3 scripts (Greek, Latin, Cyrillic)",
            evidence={"line": 4, "scripts": "GREEK+LATIN+CYRILLIC"}, location=place(3)),
    ]


# --- what the listing and the trainer's config declare ------------------------------------------

def test_declared_durations_off_the_files_own_either_way_and_the_records_passed_over():
    utts = [utt(0), utt(1, duration=3.0), utt(2, duration=0.4, segment=True), utt(3, duration=3.5),
            utt(4, duration=2.5), utt(5, duration=9.0), utt(6, duration=3.1)]
    facts = {a(i): wav(a(i), frames=24001) for i in range(7)}
    facts[a(5)] = bad(a(5), "missing")
    got = hits(sp.DURATION_MISMATCH, scan(utts, facts))
    assert got == [
        Hit(message="line 4: declares 3.5 s, the file holds 3 s (24,001 frames at 8000 Hz); tolerance 0.1 s",
            evidence={"line": 4, "declared": 3.5, "actual": 3.0001}, location=place(3)),
        Hit(message="line 5: declares 2.5 s, the file holds 3 s (24,001 frames at 8000 Hz); tolerance 0.1 s",
            evidence={"line": 5, "declared": 2.5, "actual": 3.0001}, location=place(4)),
    ]
    # At the tolerance exactly: quiet; by the smallest step past it: a finding.
    gap = abs(24001 / RATE - 3.5)
    assert hits(sp.DURATION_MISMATCH, scan(utts[3:4], facts), MismatchLimits(tolerance_s=gap)) == []
    assert [h.message for h in hits(sp.DURATION_MISMATCH, scan(utts[3:4], facts),
                                    MismatchLimits(tolerance_s=math.nextafter(gap, 0)))] == [
        f"line 4: declares 3.5 s, the file holds 3 s (24,001 frames at 8000 Hz); tolerance {math.nextafter(gap, 0)} s"]


def test_duration_mismatch_is_skipped_only_when_no_record_declares_a_duration():
    assert skipped(sp.DURATION_MISMATCH, scan([utt(0), utt(1)])) == "the listing declares no durations"
    s = scan([utt(0), utt(1, duration=3.0)])
    assert ran(sp.DURATION_MISMATCH, s) and hits(sp.DURATION_MISMATCH, s) == []


def _config(*, max_len: float | None = 32000, key: str = "max_audio_len", rate: float | None = RATE,
            characters: str | None = None, phonemes: bool = False) -> SpeechConfig:
    cfg = "/data/config.json"
    return SpeechConfig(path=cfg,
                        sample_rate=ConfigValue(path=cfg, line=2, key="sample_rate", value=rate) if rate else None,
                        max_audio_len=ConfigValue(path=cfg, line=4, key=key, value=max_len) if max_len else None,
                        characters=ConfigValue(path=cfg, line=7, key="characters", value=characters)
                        if characters is not None else None, use_phonemes=phonemes)


def test_over_max_counts_samples_at_the_configs_rate_and_at_the_limit_is_kept():
    utts = [utt(i) for i in range(6)]
    facts = {a(0): wav(a(0), frames=3 * RATE), a(1): wav(a(1), frames=4 * RATE), a(2): wav(a(2), frames=5 * RATE),
             a(3): wav(a(3), frames=72000, rate=16000), a(4): bad(a(4), "missing"),
             a(5): wav(a(5), frames=32001)}
    where = (Related(location=Location(path="/data/config.json", span=Span(4, 0, 4, 0)), message="max_audio_len"),)
    got = hits(sp.OVER_MAX, scan(utts, facts, config=_config()))
    assert got == [
        Hit(message="line 3: 5.00 s is 40,000 samples at 8000 Hz, over max_audio_len 32,000 (4.00 s): the trainer "
                    "drops it (3 of 5 files)",
            evidence={"line": 3, "samples": 40000, "max": 32000.0, "dropped": 3}, location=place(2), related=where),
        Hit(message="line 4: 4.50 s is 36,000 samples at 8000 Hz, over max_audio_len 32,000 (4.00 s): the trainer "
                    "drops it (3 of 5 files)",
            evidence={"line": 4, "samples": 36000, "max": 32000.0, "dropped": 3}, location=place(3), related=where),
        Hit(message="line 6: 4.00 s is 32,001 samples at 8000 Hz, over max_audio_len 32,000 (4.00 s): the trainer "
                    "drops it (3 of 5 files)",
            evidence={"line": 6, "samples": 32001, "max": 32000.0, "dropped": 3}, location=place(5), related=where),
    ]


def test_over_max_without_a_config_rate_counts_each_files_own():
    utts = [utt(i) for i in range(3)]
    facts = {a(0): wav(a(0), frames=20000, rate=16000), a(1): wav(a(1), frames=3 * RATE),
             a(2): wav(a(2), frames=44100, rate=22050)}
    got = hits(sp.OVER_MAX, scan(utts, facts, config=_config(max_len=22050.5, key="max_wav_length", rate=None)))
    assert got == [
        Hit(message="line 2: 3.00 s is 24,000 samples at 8000 Hz, over max_wav_length 22,050 (2.76 s): the trainer "
                    "drops it (2 of 3 files)",
            evidence={"line": 2, "samples": 24000, "max": 22050.5, "dropped": 2}, location=place(1),
            related=(Related(location=Location(path="/data/config.json", span=Span(4, 0, 4, 0)),
                             message="max_wav_length"),)),
        Hit(message="line 3: 2.00 s is 44,100 samples at 22050 Hz, over max_wav_length 22,050 (1.00 s): the trainer "
                    "drops it (2 of 3 files)",
            evidence={"line": 3, "samples": 44100, "max": 22050.5, "dropped": 2}, location=place(2),
            related=(Related(location=Location(path="/data/config.json", span=Span(4, 0, 4, 0)),
                             message="max_wav_length"),)),
    ]


def test_over_max_is_skipped_without_a_configured_maximum():
    reason = "no config.json with max_audio_len / model_args.max_wav_length beside the data"
    assert skipped(sp.OVER_MAX, scan([utt(0)])) == reason
    assert skipped(sp.OVER_MAX, scan([utt(0)], config=_config(max_len=None, characters="abc"))) == reason
    assert ran(sp.OVER_MAX, scan([utt(0)], config=_config())) and hits(sp.OVER_MAX, scan([utt(0)], config=_config())) \
        == []


def test_out_of_charset_compares_in_lower_case_when_the_set_has_no_capitals():
    texts = ["The Birch Canoe, slid!", "naïve café; ok", "0123456789@#$", "the birch canoe"]
    s = scan([utt(i, text=t) for i, t in enumerate(texts)],
             config=_config(characters="abcdefghijklmnopqrstuvwxyz.,!? "))
    where = (Related(location=Location(path="/data/config.json", span=Span(7, 0, 7, 0)),
                     message="the model's character set"),)
    assert hits(sp.OUT_OF_CHARSET, s) == [
        Hit(message="line 2: 3 character(s) not in the model's set: ';éï'",
            evidence={"line": 2, "characters": ";éï", "count": 3}, location=place(1), related=where),
        Hit(message="line 3: 13 character(s) not in the model's set: '#$0123456789'",
            evidence={"line": 3, "characters": "#$0123456789", "count": 13}, location=place(2), related=where),
    ]


def test_out_of_charset_keeps_the_case_when_the_set_has_capitals():
    s = scan([utt(0, text="Abc abc"), utt(1, text="aBc d"), utt(2, text="Aa")], config=_config(characters="Aabc "))
    assert [(h.message, h.evidence["line"]) for h in hits(sp.OUT_OF_CHARSET, s)] == [
        ("line 2: 2 character(s) not in the model's set: 'Bd'", 2)]


def test_out_of_charset_skips_without_a_set_and_for_phoneme_models():
    assert skipped(sp.OUT_OF_CHARSET, scan([utt(0)])) == "no config.json with a `characters` set beside the data"
    assert skipped(sp.OUT_OF_CHARSET, scan([utt(0)], config=_config())) == \
        "no config.json with a `characters` set beside the data"
    assert skipped(sp.OUT_OF_CHARSET, scan([utt(0, text="ðə")], config=_config(characters="abc", phonemes=True))) \
        == "use_phonemes is true: transcripts are phonemised before the character set applies"


def test_audio_outside_locates_the_first_and_counts_the_rest():
    utts = [utt(0), utt(1, audio="/elsewhere/x.wav", raw="../../elsewhere/x.wav", outside=True), utt(2),
            utt(3, audio="/srv/y.wav", outside=True)]
    assert hits(sp.AUDIO_OUTSIDE, scan(utts)) == [
        Hit(message="2 of 4 audio path(s) lead outside /data, first '../../elsewhere/x.wav' (line 2); they were read",
            evidence={"outside": 2, "utterances": 4, "line": 2}, location=place(1))]
    assert hits(sp.AUDIO_OUTSIDE, scan([utts[0], utts[2]])) == []


# --- train and eval ------------------------------------------------------------------------------

def _train() -> SpeechContext:
    """Two training listings: the first's line 2 has line 1's bytes; the second is another file."""
    t = [utt(0, speaker="s1", text="Hello  World"), utt(1, speaker="s1", text="another one"),
         utt(2, speaker="s2", text="   "), utt(3, speaker="s3", text="a sentence")]
    first = scan(t, {a(0): wav(a(0), digest=100), a(1): wav(a(1), digest=100), a(2): wav(a(2), digest=200),
                     a(3): bad(a(3), "missing")})
    other = scan([utt(0, audio="/data/other/x.wav", speaker="s4", text="other words", path="/data/other_train.json")],
                 {"/data/other/x.wav": wav("/data/other/x.wav", digest=300)}, path="/data/other_train.json")
    return SpeechContext(train=(first, other))


def test_eval_overlap_by_file_by_bytes_and_by_speaker_and_transcript():
    ev = "/data/val_manifest.json"

    def e(line: int, name: str, **kw: Any) -> Utterance:
        return utt(line, audio=f"/data/eval/{name}.wav", path=ev, **kw)

    utts = [e(0, "n0", speaker="s7", text="fresh words"),
            utt(1, audio=a(0), path=ev, speaker="s7", text="unrelated"),
            e(2, "n2", speaker="s8", text="unrelated too"),
            e(3, "n3", speaker="s1", text="  hello   WORLD "),
            e(4, "n4", speaker="s2", text="   "),
            e(5, "n5", speaker="s9", text="hello world"),
            e(6, "n6", speaker="s4", text="nothing shared"),
            e(7, "n7", speaker="s3", text="a sentence"),
            e(8, "n8", speaker="s5", text="missing audio")]
    facts = {"/data/eval/n2.wav": wav("/data/eval/n2.wav", digest=100),
             "/data/eval/n4.wav": wav("/data/eval/n4.wav", digest=999),
             "/data/eval/n6.wav": wav("/data/eval/n6.wav", digest=300),
             "/data/eval/n8.wav": bad("/data/eval/n8.wav", "missing")}
    got = hits(sp.EVAL_OVERLAP, scan(utts, facts, path=ev), ctx=_train())

    def hit(line: int, how: str, listing: str, train_line: int) -> Hit:
        train_path = "/data/other_train.json" if listing == "other_train.json" else LISTING
        return Hit(message=f"eval line {line + 1} {how} training {listing} line {train_line + 1}",
                   evidence={"line": line + 1, "train_line": train_line + 1}, location=place(line, path=ev),
                   related=(Related(location=place(train_line, path=train_path), message="in the training data"),))

    assert got == [
        hit(1, "is the same audio file as", "train_manifest.json", 0),
        hit(2, "has audio byte-identical to", "train_manifest.json", 0),
        hit(3, "has the speaker and transcript of", "train_manifest.json", 0),
        hit(6, "has audio byte-identical to", "other_train.json", 0),
        hit(7, "has the speaker and transcript of", "train_manifest.json", 3),
    ]


def test_eval_overlap_compares_transcripts_case_folded_in_lower_case():
    # German "Maße" (measures) and "Masse" (mass) are two words: lower case keeps them apart
    # (upper case would write both MASSE).
    train = SpeechContext(train=(scan([utt(0, speaker="s1", text="die Maße")]),))
    ev = scan([utt(0, audio="/data/eval/a.wav", speaker="s1", text="DIE MASSE"),
               utt(1, audio="/data/eval/b.wav", speaker="s1", text="DIE MAßE")], path="/data/eval.json")
    assert [h.message for h in hits(sp.EVAL_OVERLAP, ev, ctx=train)] == [
        "eval line 2 has the speaker and transcript of training train_manifest.json line 1"]


def test_eval_overlap_with_relative_listing_paths_and_training_audio_never_read():
    # Listings named without a folder, and a training utterance whose audio has no facts at
    # all (never scanned): it is still matched by its path and its transcript.
    t = scan([utt(0, path="metadata_train.csv", speaker="s1", text="first one"),
              utt(1, path="metadata_train.csv", speaker="s1", text="second one")], path="metadata_train.csv")
    train = SpeechScan(listing=t.listing, audio={a(0): wav(a(0), digest=5)})
    ev = scan([utt(0, audio="/data/eval/x.wav", path="metadata_eval.csv", speaker="s1", text="second one"),
               utt(1, audio=a(1), path="metadata_eval.csv", speaker="s2", text="other"),
               utt(2, audio="/data/eval/y.wav", path="metadata_eval.csv", speaker="s2", text="other")],
              {"/data/eval/y.wav": wav("/data/eval/y.wav", digest=5)}, path="metadata_eval.csv")
    assert [h.message for h in hits(sp.EVAL_OVERLAP, ev, ctx=SpeechContext(train=(train,)))] == [
        "eval line 1 has the speaker and transcript of training metadata_train.csv line 2",
        "eval line 2 is the same audio file as training metadata_train.csv line 2",
        "eval line 3 has audio byte-identical to training metadata_train.csv line 1",
    ]
    assert [h.message for h in hits(sp.EMPTY, scan([utt(0, path="a9.wav", width=0, text="")]))] == [
        "a9.wav: empty transcript (1 of 1 utterances)"]


def test_eval_rules_are_skipped_without_a_training_listing():
    for rule in (sp.EVAL_OVERLAP, sp.EVAL_SPEAKERS):
        assert skipped(rule, scan([utt(0)])) == "no training listing to compare with"


def _speakers(names: Sequence[str], path: str = LISTING) -> SpeechScan:
    return scan([utt(i, speaker=n, path=path) for i, n in enumerate(names)], path=path)


def test_eval_speakers_counts_the_shared_ones_and_lists_five():
    train = SpeechContext(train=(_speakers(["s1", "s2", "s3", "", "s4"]), _speakers(["s5", "s6", "s7", "s1"])))
    ev = "/data/val_manifest.json"
    got = hits(sp.EVAL_SPEAKERS, _speakers(["s9", "", "s6", "s3", "s1", "s2", "s5", "s4", "s9"], ev), ctx=train)
    assert got == [Hit(message="6 of 7 eval speaker(s) also speak in the training data (s1, s2, s3, s4, s5, ...)",
                       evidence={"shared": 6, "train_speakers": 7}, location=place(2, path=ev))]
    got = hits(sp.EVAL_SPEAKERS, _speakers(["s9", "s3", "s1", "s2", "s5", "s4", "s9", "s8"], ev), ctx=train)
    assert [(h.message, h.location) for h in got] == [
        ("5 of 7 eval speaker(s) also speak in the training data (s1, s2, s3, s4, s5)", place(1, path=ev))]
    assert hits(sp.EVAL_SPEAKERS, _speakers(["s8", "s9", ""], ev), ctx=train) == []


def test_eval_speakers_needs_two_training_speakers():
    one = SpeechContext(train=(_speakers(["s1", "", "s1"]),))
    assert skipped(sp.EVAL_SPEAKERS, _speakers(["s1"]), one) == "the training data names fewer than two speakers"
    two = SpeechContext(train=(_speakers(["s1", ""]), _speakers(["s2"])))
    assert [h.message for h in hits(sp.EVAL_SPEAKERS, _speakers(["", "s2"]), ctx=two)] == [
        "1 of 1 eval speaker(s) also speak in the training data (s2)"]


# --- a SentencePiece tokenizer against the transcripts --------------------------------------------

def _tok(tokens: Sequence[int], unknown: Sequence[int], facts: dict[str, AudioFacts] | None = None) -> SpeechScan:
    utts = [utt(i) for i in range(len(tokens))]
    return scan(utts, facts, tokenizer=TokenizerFacts(path="/data/tokenizer.model", tokens=tuple(tokens),
                                                      unknown=tuple(unknown)))


def test_high_oov_counts_unknown_pieces_and_points_at_the_lines_holding_them():
    # Five lines with <unk> pieces: the first is located, the next three are related places.
    s = _tok([50000] * 6, [100, 300, 0, 334, 200, 300])
    related = tuple(Related(location=place(n), message="transcript with <unk> pieces") for n in (1, 3, 4))
    assert hits(sp.HIGH_OOV, s) == [
        Hit(message="1,234 of 300,000 pieces are <unk> (0.411%) in 5 transcript(s), first line 1; limit 0.100%",
            evidence={"unknown": 1234, "pieces": 300000, "rate": 0.004113, "line": 1}, location=place(0),
            related=related)]


def test_high_oov_at_its_limit_exactly_is_quiet_and_one_piece_more_fires():
    assert hits(sp.HIGH_OOV, _tok([1000, 1000], [2, 0])) == []  # 2 of 2,000: 0.100%
    got = hits(sp.HIGH_OOV, _tok([1000, 1000], [0, 3]))
    assert got == [Hit(message="3 of 2,000 pieces are <unk> (0.150%) in 1 transcript(s), first line 2; limit 0.100%",
                       evidence={"unknown": 3, "pieces": 2000, "rate": 0.0015, "line": 2}, location=place(1))]
    assert [h.message for h in hits(sp.HIGH_OOV, _tok([1000, 1000], [0, 3]), OovLimits(max_oov_rate=0.01))] == []


def test_tokenizer_rules_skip_with_the_scans_note_or_without_a_model():
    no_model = scan([utt(0, duration=1.0)])
    default = ("no SentencePiece model given (preflight --tokenizer FILE.model) or found beside the data "
               "(tokenizer.model)")
    assert skipped(sp.HIGH_OOV, no_model) == default and skipped(sp.HIGH_TPS, no_model) == default
    noted = scan([utt(0)], tokenizer_note="tokenizer checks not run: bogus.model is not a SentencePiece model")
    assert skipped(sp.HIGH_OOV, noted) == "tokenizer checks not run: bogus.model is not a SentencePiece model"
    assert skipped(sp.HIGH_OOV, _tok([0, 0], [0, 0])) == "the transcripts gave no pieces"


def test_tokens_per_second_over_every_timed_utterance_and_its_fastest_line():
    facts = {a(0): wav(a(0), frames=2 * RATE), a(1): wav(a(1), frames=RATE), a(2): bad(a(2), "missing"),
             a(3): wav(a(3), frames=0), a(4): wav(a(4), frames=7 * RATE)}
    # Line 3: no file, a declared 10 s; line 4: a file of no frames; line 5: a segment of 2 s.
    s = scan([utt(0), utt(1), utt(2, duration=10.0), utt(3), utt(4, duration=2.0, segment=True)], facts,
             tokenizer=TokenizerFacts(path="/data/tokenizer.model", tokens=(100, 70, 500, 900, 10), unknown=(0,) * 5))
    got = hits(sp.HIGH_TPS, s, TpsLimits(max_tokens_per_s=50.0))
    assert got == []  # 680 pieces over 15 s: 45.3 a second
    got = hits(sp.HIGH_TPS, s, TpsLimits(max_tokens_per_s=45.0))
    assert got == [Hit(message="45.3 pieces per second of audio (680 pieces over 15.0 s, 4 utterances); fastest "
                               "line 2 at 70.0/s; limit 45.0",
                       evidence={"tokens_per_second": 45.333, "pieces": 680, "seconds": 15.0, "line": 2},
                       location=place(1))]


def test_tokens_per_second_at_its_limit_exactly_is_quiet():
    facts = {a(0): wav(a(0), frames=2 * RATE), a(1): wav(a(1), frames=2 * RATE)}
    assert hits(sp.HIGH_TPS, _tok([100, 100], [0, 0], facts)) == []
    got = hits(sp.HIGH_TPS, _tok([100, 1000], [0, 0], {a(0): wav(a(0), frames=20 * RATE),
                                                       a(1): wav(a(1), frames=RATE // 2)}))
    assert [h.message for h in got] == ["53.7 pieces per second of audio (1,100 pieces over 20.5 s, 2 utterances); "
                                        "fastest line 2 at 2000.0/s; limit 50.0"]


def test_tokens_per_second_is_skipped_without_a_known_duration():
    s = _tok([10, 10], [0, 0], {a(0): bad(a(0), "missing"), a(1): wav(a(1), frames=0)})
    assert skipped(sp.HIGH_TPS, s) == "no utterance with a known duration"


# --- real files: WAV and FLAC in each listing layout, read by the readers --------------------------

np = pytest.importorskip("numpy")
sf = pytest.importorskip("soundfile")


def _tone(seconds: float, rate: int = RATE, seed: int = 0) -> Any:
    t = np.arange(round(seconds * rate)) / rate
    return 0.3 * np.sin(2 * np.pi * 180 * t) + 0.02 * np.random.default_rng(seed).standard_normal(len(t))


def _wave_file(path: Path, seconds: float, *, rate: int = RATE, channels: int = 1, seed: int = 0) -> None:
    """A 16-bit PCM WAV written with the standard `wave` module."""
    x = (np.stack([_tone(seconds, rate, seed)] * channels, 1) * 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(x.tobytes())


def _real(path: Path, train: Sequence[Path] = ()) -> tuple[SpeechScan, SpeechContext]:
    ctx = SpeechContext(train=tuple(scan_speech(list_speech(p), jobs=1) for p in train))
    return scan_speech(list_speech(path), jobs=1), ctx


def test_ljspeech_metadata_with_a_flac_at_another_rate_and_a_missing_wav(tmp_path):
    (tmp_path / "wavs").mkdir()
    for i in range(3):
        _wave_file(tmp_path / "wavs" / f"LJ{i}.wav", 1.0, seed=i)
    sf.write(tmp_path / "wavs" / "LJ3.flac", _tone(1.0, 16000), 16000)  # the formatter reads wavs/<id>.wav
    rows = ["LJ0|one|one", "LJ1|two|two", "LJ3|three|three", "LJ2|four|four"]
    (tmp_path / "metadata.csv").write_text("\n".join(rows) + "\n")
    s, _ = _real(tmp_path / "metadata.csv")
    assert s.listing.layout == "ljspeech"
    assert [(h.message, h.location) for h in hits(sp.MISSING, s)] == [
        ("line 3: audio 'wavs/LJ3.wav' does not exist (1 of 4 utterances)",
         Location(path=str(tmp_path / "metadata.csv"), span=Span(2, 0, 2, 15)))]  # the row "LJ3|three|three"
    (tmp_path / "wavs" / "LJ3.flac").rename(tmp_path / "wavs" / "LJ3.wav")  # a FLAC under a .wav name
    s, _ = _real(tmp_path / "metadata.csv")
    assert hits(sp.MISSING, s) == [] and hits(sp.UNREADABLE, s) == []
    assert [h.message for h in hits(sp.INCONSISTENT_SR, s)] == [
        "line 3: 16000 Hz where 3 of 4 files are 8000 Hz (1 file(s) at 16000 Hz)"]


def test_fish_lab_folder_finds_are_named_by_their_files(tmp_path):
    spk = tmp_path / "alice"
    spk.mkdir()
    for i in range(3):
        _wave_file(spk / f"a{i}.wav", 1.0, channels=2 if i == 2 else 1, seed=i)
        (spk / f"a{i}.lab").write_text("the birch canoe" if i != 1 else "in 2024")
    sf.write(spk / "a9.flac", _tone(1.0), RATE)  # no transcript beside it
    s, _ = _real(tmp_path)
    assert s.listing.layout == "fish-lab"
    assert hits(sp.EMPTY, s) == [Hit(message="a9.flac: empty transcript (1 of 4 utterances)",
                                     evidence={"line": 1, "empty": 1, "utterances": 4},
                                     location=Location(path=str(spk / "a9.flac"), span=Span(0, 0, 0, 0)))]
    assert [h.message for h in hits(sp.UNNORMALIZED, s)] == ["line 1: number '2024' in the transcript is not spelled out"]
    ch = hits(sp.INCONSISTENT_CHANNELS, s)
    assert [(h.message, h.location.path, h.related[0].location.path) for h in ch] == [
        ("line 1: 2 channel(s) where 3 of 4 files are 1 channel(s) (1 file(s) at 2 channel(s))", str(spk / "a2.lab"),
         str(spk / "a0.lab"))]


def test_xtts_train_and_eval_csvs_share_a_file_a_recording_and_speakers(tmp_path):
    (tmp_path / "wavs").mkdir()
    for i in range(4):
        _wave_file(tmp_path / "wavs" / f"t{i}.wav", 1.0, seed=i)
    _wave_file(tmp_path / "wavs" / "e0.wav", 1.0, seed=2)  # t2's samples again, under another name
    _wave_file(tmp_path / "wavs" / "e1.wav", 1.0, seed=9)
    head = "audio_file|text|speaker_name"
    (tmp_path / "metadata_train.csv").write_text("\n".join(
        [head] + [f"wavs/t{i}.wav|sentence {'abcd'[i]}|spk{i % 2}" for i in range(4)]) + "\n")
    (tmp_path / "metadata_eval.csv").write_text("\n".join(
        [head, "wavs/e1.wav|Sentence  B|spk1", "wavs/e0.wav|another|spk7", "wavs/t0.wav|new text|spk9"]) + "\n")
    s, ctx = _real(tmp_path / "metadata_eval.csv", [tmp_path / "metadata_train.csv"])
    train = str(tmp_path / "metadata_train.csv")  # its rows are 27 characters wide
    got = [(h.message, h.related[0].location) for h in hits(sp.EVAL_OVERLAP, s, ctx=ctx)]
    assert got == [
        ("eval line 2 has the speaker and transcript of training metadata_train.csv line 3",
         Location(path=train, span=Span(2, 0, 2, 27))),
        ("eval line 3 has audio byte-identical to training metadata_train.csv line 4",
         Location(path=train, span=Span(3, 0, 3, 27))),
        ("eval line 4 is the same audio file as training metadata_train.csv line 2",
         Location(path=train, span=Span(1, 0, 1, 27))),
    ]
    assert [h.message for h in hits(sp.EVAL_SPEAKERS, s, ctx=ctx)] == [
        "1 of 3 eval speaker(s) also speak in the training data (spk1)"]


def test_nemo_manifest_declared_durations_and_a_coqui_config_beside_it(tmp_path):
    (tmp_path / "wavs").mkdir()
    records = []
    for i, seconds in enumerate((1.0, 1.5, 2.5)):
        _wave_file(tmp_path / "wavs" / f"u{i}.wav", seconds, seed=i)
        records.append({"audio_filepath": f"wavs/u{i}.wav", "text": "the birch canoe", "duration": seconds})
    records[1]["duration"] = 1.75
    records[2].update(offset=0.5, duration=1.0)  # a segment: its duration is not the file's
    (tmp_path / "manifest.json").write_text("".join(json.dumps(r) + "\n" for r in records))
    (tmp_path / "config.json").write_text(json.dumps({"audio": {"sample_rate": RATE}, "max_audio_len": 2 * RATE,
                                                      "characters": {"characters": "abcdefghijklmnopqrstuvwxyz",
                                                                     "punctuations": ".,"}}, indent=2))
    s, _ = _real(tmp_path / "manifest.json")
    assert [h.message for h in hits(sp.DURATION_MISMATCH, s)] == [
        "line 2: declares 1.75 s, the file holds 1.5 s (12,000 frames at 8000 Hz); tolerance 0.1 s"]
    over = hits(sp.OVER_MAX, s)
    assert [(h.message, h.related) for h in over] == [
        ("line 3: 2.50 s is 20,000 samples at 8000 Hz, over max_audio_len 16,000 (2.00 s): the trainer drops it "
         "(1 of 3 files)",
         (Related(location=Location(path=str(tmp_path / "config.json"), span=Span(4, 0, 4, 0)), message="max_audio_len"),))]
    assert hits(sp.OUT_OF_CHARSET, s) == []


def test_eval_overlap_names_a_training_utterance_known_by_its_file_once():
    # a folder layout: the training utterance is its audio file (no listing line)
    folder = scan([utt(0, audio="/data/alice/a9.wav", path="/data/alice/a9.wav", width=0, speaker="alice",
                       text="")], path="/data/alice")
    ev = scan([utt(0, audio="/data/alice/a9.wav", path="/data/eval.json", speaker="alice")], path="/data/eval.json")
    assert [h.message for h in hits(sp.EVAL_OVERLAP, ev, ctx=SpeechContext(train=(folder,)))] == [
        "eval line 1 is the same audio file as training a9.wav"]
