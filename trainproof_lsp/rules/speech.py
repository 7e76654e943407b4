"""Speech/TTS dataset rules: each utterance judged at its line, against the corpus's own spread.

Every check reads a `SpeechScan` (readers/speech.py): the listing's utterances and each
audio file's facts (readers/audio.py). Outliers are measured against the corpus itself
(median and median absolute deviation) rather than fixed numbers: a corpus of 0.5-second
commands and one of 20-second audiobook sentences are both healthy, and a fixed "too
long" would call one of them broken. The registry entries are the tuple SPEECH_RULES.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

from ..core.model import Hit, Level, Location, Related, Span
from ..readers.audio import AudioFacts, AudioHeader
from ..readers.speech import SpeechScan, Utterance
from ._stats import MAD_TO_SIGMA, mad, median
from .base import Family, NoLimits, Rule, Skip, fmt, times


@dataclass(frozen=True, kw_only=True)
class SpeechContext:
    """What a speech rule may know besides its own listing: for an eval listing, the
    training listings it must not share utterances with."""

    train: tuple[SpeechScan, ...] = ()


# Every rule here judges one speech listing's scan (readers/speech.py).
SPEECH: Family[SpeechScan, SpeechContext] = Family("speech")


def at(u: Utterance) -> Location:
    return Location(path=u.path, span=Span(u.line, 0, u.line, u.width))


def _line(u: Utterance) -> str:
    return f"line {u.line + 1}" if u.line or u.width else u.path.rsplit("/", 1)[-1]


def _readable(scan: SpeechScan) -> list[tuple[Utterance, AudioFacts]]:
    """Utterances whose audio header was read, in listing order (memoised per scan)."""
    key = "readable"
    if key not in scan.memo:
        out = []
        for u in scan.utterances:
            f = scan.facts(u)
            if f is not None and f.header is not None:
                out.append((u, f))
        scan.memo[key] = out
    got: list[tuple[Utterance, AudioFacts]] = scan.memo[key]
    return got


def duration_of(u: Utterance, facts: AudioFacts | None) -> float | None:
    """The utterance's duration: the file's own (its header), else the manifest's."""
    if facts is not None and facts.header is not None and not u.segment:
        return facts.header.duration
    return u.duration if u.duration is not None and u.duration > 0 else None


# --- records and files -----------------------------------------------------------------------

BAD_RECORD_DOC = """A line of the listing that is not an utterance the trainer can read.

What it flags: a manifest line that is not JSON, or a record without an `audio_filepath`
or `text` string; a metadata csv row with fewer than two `|`-separated columns.
Why it matters: NeMo's and Coqui's loaders raise on such a line (the run dies while
building the dataset) or, in formatters that skip it, train without it silently.
What it does not mean: anything about the other lines; each is judged on its own.
"""


def check_bad_record(scan: SpeechScan, limits: NoLimits, ctx: SpeechContext) -> Iterator[Hit]:
    for b in scan.listing.bad:
        yield Hit(message=f"line {b.line + 1}: {b.message}", evidence={"line": b.line + 1},
                  location=Location(path=b.path, span=Span(b.line, 0, b.line, b.width)))


BAD_RECORD = Rule(id="TP-SPEECH-BAD-RECORD", name="speech-bad-record", level=Level.FAIL, doc=BAD_RECORD_DOC,
                  check=check_bad_record, family=SPEECH)

MISSING_DOC = """An utterance's audio file does not exist.

What it flags: a manifest or metadata line (or a transcript file) whose audio path,
resolved against the listing's own folder, names no file.
Why it matters: the data loader raises when it reaches the line (often hours in, on a
shuffled epoch), or a formatter drops the utterance without a word.
What it does not mean: that the path is wrong everywhere; a relative path is resolved
against the manifest's folder as the trainers do, never the folder you ran from.
"""


def check_missing(scan: SpeechScan, limits: NoLimits, ctx: SpeechContext) -> Iterator[Hit]:
    total = len(scan.utterances)
    missing = [u for u in scan.utterances if (f := scan.facts(u)) is not None and f.problem == "missing"]
    for u in missing:
        yield Hit(message=f"{_line(u)}: audio {u.audio_raw!r} does not exist ({len(missing)} of {total} utterances)",
                  evidence={"line": u.line + 1, "missing": len(missing), "utterances": total}, location=at(u))


MISSING = Rule(id="TP-DATA-MISSING-AUDIO", name="missing-audio", level=Level.FAIL, doc=MISSING_DOC,
               check=check_missing, family=SPEECH, origin="trainproof")

UNREADABLE_DOC = """An utterance's audio file cannot be read: damaged, cut short, or not audio.

What it flags: a WAV whose data chunk declares more bytes than the file holds (cut off
mid-copy), a header that cannot be parsed, a file libsndfile cannot decode, or a path that
is not a regular file (a FIFO, a device, a folder).
Why it matters: the loader raises on it mid-epoch, or reads a short clip whose transcript
no longer matches it.
What it does not mean: a broken corpus; each file is judged on its own, and the message
says what is wrong with it.
"""


def check_unreadable(scan: SpeechScan, limits: NoLimits, ctx: SpeechContext) -> Iterator[Hit]:
    for u in scan.utterances:
        f = scan.facts(u)
        if f is None or f.problem in ("", "missing"):
            continue
        yield Hit(message=f"{_line(u)}: audio {u.audio_raw!r} is {f.problem.replace('-', ' ')}: {f.detail}",
                  evidence={"line": u.line + 1, "kind": f.problem, "bytes": f.size}, location=at(u))


UNREADABLE = Rule(id="TP-DATA-UNREADABLE-AUDIO", name="unreadable-audio", level=Level.WARN, doc=UNREADABLE_DOC,
                  check=check_unreadable, family=SPEECH, origin="trainproof")


def _minority(scan: SpeechScan, what: str, get: Callable[[AudioHeader], int], unit: str) -> Iterator[Hit]:
    # Every readable file has its header (that is what readable means).
    readable = [(u, get(f.header)) for u, f in _readable(scan) if f.header is not None]
    counts = Counter(v for _, v in readable)
    if len(counts) < 2:
        return
    # The majority: most files; on a tie, the value the listing meets first.
    order = {v: i for i, (_, v) in reversed(list(enumerate(readable)))}
    major, major_n = max(counts.items(), key=lambda kv: (kv[1], -order[kv[0]]))
    first = readable[order[major]][0]  # order holds the first index of each value
    for u, v in readable:
        if v != major:
            yield Hit(message=f"{_line(u)}: {v} {unit} where {major_n} of {len(readable)} files are {major} {unit} "
                              f"({counts[v]} file(s) at {v} {unit})",
                      evidence={"line": u.line + 1, what: v, f"majority_{what}": major, "majority": major_n,
                                "files": len(readable), "these": counts[v]},
                      location=at(u), related=(Related(location=at(first), message=f"first file at {major} {unit}"),))


def check_sample_rate(scan: SpeechScan, limits: NoLimits, ctx: SpeechContext) -> Iterator[Hit]:
    return _minority(scan, "sample_rate", lambda h: h.sample_rate, "Hz")


def check_channels(scan: SpeechScan, limits: NoLimits, ctx: SpeechContext) -> Iterator[Hit]:
    return _minority(scan, "channels", lambda h: h.channels, "channel(s)")


INCONSISTENT_SR_DOC = """An audio file's sample rate differs from the rest of the corpus.

What it flags: each file whose header rate is not the rate most files have (say 8 kHz
among 22.05 kHz); the message counts both.
Why it matters: TTS and ASR recipes train at one rate; loaders that do not resample
feed the model audio at the wrong speed and pitch, and those that do resample an 8 kHz
file cannot restore what it never held.
What it does not mean: which rate is right; the majority is only the reference.
"""

INCONSISTENT_SR = Rule(id="TP-DATA-INCONSISTENT-SR", name="inconsistent-sample-rate", level=Level.FAIL,
                       doc=INCONSISTENT_SR_DOC, family=SPEECH, origin="trainproof", check=check_sample_rate)

INCONSISTENT_CH_DOC = """An audio file's channel count differs from the rest of the corpus.

What it flags: each file with a channel count (stereo among mono) other than the count
most files have.
Why it matters: a loader expecting mono either raises on the shape or silently keeps the
first channel or the interleaved samples, training on audio at twice its length.
What it does not mean: that stereo is wrong in itself; the majority is the reference.
"""

INCONSISTENT_CHANNELS = Rule(id="TP-DATA-INCONSISTENT-CHANNELS", name="inconsistent-channels", level=Level.FAIL,
                             doc=INCONSISTENT_CH_DOC, family=SPEECH, origin="trainproof", check=check_channels)

EMPTY_DOC = """An utterance has an empty transcript.

What it flags: a record whose text is empty or only whitespace, or an audio file in a
folder layout with no transcript file beside it.
Why it matters: the model is trained to map audio to nothing (TTS: a zero-length input;
ASR: learning to emit nothing), and some collators raise on an empty sequence.
What it does not mean: anything about the audio.
"""


def check_empty(scan: SpeechScan, limits: NoLimits, ctx: SpeechContext) -> Iterator[Hit]:
    empty = [u for u in scan.utterances if not u.text.strip()]
    for u in empty:
        yield Hit(message=f"{_line(u)}: empty transcript ({len(empty)} of {len(scan.utterances)} utterances)",
                  evidence={"line": u.line + 1, "empty": len(empty), "utterances": len(scan.utterances)},
                  location=at(u))


EMPTY = Rule(id="TP-DATA-EMPTY-TRANSCRIPT", name="empty-transcript", level=Level.WARN, doc=EMPTY_DOC,
             check=check_empty, family=SPEECH, origin="trainproof")


# --- outliers against the corpus's own spread ----------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class OutlierLimits:
    # Robust z on log values: |log x - median| / (1.4826 MAD). Durations and speaking
    # rates are ratios (twice as long and half as long are equally odd), so they are judged
    # on a log scale; 4 robust sigmas lie outside 99.99% of a normal spread.
    max_z: float = 4.0
    # The spread is never taken below this (log units, ~10%): a synthetic corpus of
    # equal-length clips has MAD 0, and a 5% difference there is no outlier.
    min_spread: float = 0.1
    # Fewer utterances than this give no usable median/MAD: the check stands down.
    min_utterances: int = 20


def _outliers(limits: OutlierLimits, values: list[tuple[Utterance, float]]
              ) -> Iterator[tuple[Utterance, float, float, float, float]]:
    """(utterance, value, corpus median, robust z, threshold ratio) of each outlier."""
    if len(values) < limits.min_utterances:
        raise Skip(f"{len(values)} utterance(s) with a known value; the corpus spread needs {limits.min_utterances}")
    logs = [math.log(v) for _, v in values]
    centre = median(logs)
    spread = max(MAD_TO_SIGMA * mad(logs), limits.min_spread)
    for (u, v), lv in zip(values, logs):
        z = (lv - centre) / spread
        if abs(z) > limits.max_z:
            yield u, v, math.exp(centre), z, math.exp(limits.max_z * spread)


DURATION_OUTLIER_DOC = """An utterance is far longer or shorter than the corpus's own durations.

What it flags: a file whose duration lies more than `max_z` robust deviations from the
corpus's median on a log scale (the spread is the corpus's own median absolute deviation,
floored at `min_spread`); the message gives its duration, the median and the ratio.
Why it matters: a 40-second file in a corpus of 5-second sentences is usually an unsplit
recording or a wrong file; it blows the batch's memory or is silently dropped by length
filters, and a 0.1-second one is usually a cut or empty recording.
What it does not mean: a bad file; only one unlike the rest. Corpora mixing very short and
long utterances on purpose have a wide spread and flag little.
"""


def check_duration_outlier(scan: SpeechScan, limits: OutlierLimits, ctx: SpeechContext) -> Iterator[Hit]:
    values = [(u, d) for u, f in _readable(scan) if (d := duration_of(u, f)) is not None and d > 0]
    for u, v, med, z, ratio in _outliers(limits, values):
        yield Hit(message=f"{_line(u)}: {fmt(v)} s is {times(v / med)} the corpus median {fmt(med)} s "
                          f"(robust z {z:+.1f}; limit {limits.max_z}, i.e. beyond {times(ratio)} either way)",
                  evidence={"line": u.line + 1, "duration": round(v, 4), "median": round(med, 4),
                            "z": round(z, 2)}, location=at(u))


DURATION_OUTLIER = Rule(id="TP-SPEECH-DURATION-OUTLIER", name="duration-outlier", level=Level.WARN,
                        doc=DURATION_OUTLIER_DOC, check=check_duration_outlier, family=SPEECH, limits=OutlierLimits)


@dataclass(frozen=True, kw_only=True)
class RateLimits:
    # Robust z of log characters-per-second. Speaking rate varies less than duration
    # (one speaker, one style), so a transcript of another clip stands 8-15 robust sigmas
    # out; 5 keeps fast and slow but real sentences quiet.
    max_z: float = 5.0
    # Floor of the spread in log units (~10%): short clips' rates are noisy, a corpus
    # read by a metronome is not the norm.
    min_spread: float = 0.1
    # Fewer utterances than this give no usable median/MAD.
    min_utterances: int = 20


CHAR_RATE_DOC = """An utterance's characters per second are far from the corpus's own speaking rate.

What it flags: a transcript whose length over its audio's duration lies more than
`max_z` robust deviations (log scale, the corpus's own spread) from the median rate — the
signature of a transcript that belongs to another clip, a cut file, or a clip with a long
silence. The hover on the line shows its rate beside the median.
Why it matters: the model is taught to say (or hear) words that are not in the audio;
alignment-based TTS learns garbled attention from such pairs.
What it does not mean: a wrong transcript for certain; spelled-out numbers and very short
replies are also fast or slow. Read the line.
"""


def check_char_rate(scan: SpeechScan, limits: RateLimits, ctx: SpeechContext) -> Iterator[Hit]:
    values = [(u, len(u.text.strip()) / d) for u, f in _readable(scan)
              if u.text.strip() and (d := duration_of(u, f)) is not None and d > 0]
    for u, v, med, z, ratio in _outliers(OutlierLimits(max_z=limits.max_z, min_spread=limits.min_spread,
                                                       min_utterances=limits.min_utterances), values):
        yield Hit(message=f"{_line(u)}: {v:.1f} chars/s is {times(v / med)} the corpus median {med:.1f} chars/s "
                          f"(robust z {z:+.1f}; limit {limits.max_z}): does this transcript belong to this audio?",
                  evidence={"line": u.line + 1, "chars_per_second": round(v, 3), "median": round(med, 3),
                            "z": round(z, 2)}, location=at(u))


CHAR_RATE = Rule(id="TP-DATA-CHAR-RATE-OUTLIER", name="char-rate-outlier", level=Level.WARN, doc=CHAR_RATE_DOC,
                 check=check_char_rate, family=SPEECH, limits=RateLimits,
                 origin="trainproof")

DUPLICATES_DOC = """Two utterances use byte-identical audio.

What it flags: an utterance whose audio file has the same bytes (8-byte content hash) as
an earlier utterance's, or that names the same file again; the finding sits on the later
line and points at the first.
Why it matters: the same recording trained under two transcripts teaches a contradiction;
under one transcript it is weighted twice.
What it does not mean: perceptual duplicates; the same recording saved at another bit
depth or with another header is not found.
"""


def check_duplicates(scan: SpeechScan, limits: NoLimits, ctx: SpeechContext) -> Iterator[Hit]:
    first: dict[int, Utterance] = {}
    for u, f in _readable(scan):
        assert f.digest is not None
        seen = first.setdefault(f.digest, u)
        if seen is u:
            continue
        how = "names the same audio file as" if seen.audio == u.audio else "has audio byte-identical to"
        yield Hit(message=f"{_line(u)} {how} {_line(seen)} ({f.size:,} bytes)",
                  evidence={"line": u.line + 1, "first_line": seen.line + 1, "bytes": f.size}, location=at(u),
                  related=(Related(location=at(seen), message="first use of this audio"),))


DUPLICATES = Rule(id="TP-DATA-DUPLICATES", name="duplicate-audio", level=Level.WARN, doc=DUPLICATES_DOC,
                  check=check_duplicates, family=SPEECH, origin="trainproof")


# --- samples ---------------------------------------------------------------------------------

def _sampled(scan: SpeechScan) -> list[tuple[Utterance, AudioFacts]]:
    if scan.samples_note:
        raise Skip(scan.samples_note)
    return [(u, f) for u, f in _readable(scan) if f.samples is not None]


@dataclass(frozen=True, kw_only=True)
class ClipLimits:
    # Full scale is 1.0; 0.999 is within ~1 step of 16-bit full scale (32735/32768), where
    # a converter clamps what it could not represent.
    clip_level: float = 0.999
    # A single full-scale sample is what peak normalisation to 0 dBFS leaves; clipping
    # flattens the tops of waves, several samples at the rail.
    min_clipped: int = 3


CLIPPING_DOC = """An audio file is clipped: samples sit at full scale.

What it flags: a file with at least `min_clipped` samples at or above `clip_level` of full
scale (any channel), decoded in full; the message gives the count and the peak.
Why it matters: clipping is harsh distortion a TTS model learns to reproduce and an ASR
model hears as noise; it usually means a whole recording session was too hot.
What it does not mean: a file normalised to its peak (one sample at full scale is not
counted as clipping).
"""


def check_clipping(scan: SpeechScan, limits: ClipLimits, ctx: SpeechContext) -> Iterator[Hit]:
    for u, f in _sampled(scan):
        assert f.samples is not None
        if f.samples.clipped >= limits.min_clipped:
            yield Hit(message=f"{_line(u)}: {f.samples.clipped:,} sample(s) at or above {limits.clip_level} of full "
                              f"scale (peak {f.samples.peak:.4f}); limit {limits.min_clipped}",
                      evidence={"line": u.line + 1, "clipped": f.samples.clipped, "peak": f.samples.peak},
                      location=at(u))


CLIPPING = Rule(id="TP-DATA-CLIPPING", name="clipping", level=Level.WARN, doc=CLIPPING_DOC, check=check_clipping,
                family=SPEECH, limits=ClipLimits, origin="trainproof")


@dataclass(frozen=True, kw_only=True)
class SilenceLimits:
    # |sample| at or below this (about -46 dBFS) on every channel is silence: room tone
    # of a quiet studio, well under speech.
    silence_level: float = 0.005
    # Pauses between sentences last up to about a second; two seconds of silence inside
    # a training utterance is dead air the model learns to insert.
    max_silence_s: float = 2.0


SILENCE_DOC = """An audio file holds a long silence.

What it flags: a file whose longest run of samples at or below `silence_level` (every
channel) lasts more than `max_silence_s`; the message says where it starts. A file that
is silent throughout is flagged the same way.
Why it matters: TTS models learn to insert long pauses (and attention-based ones to skip
or repeat words around them); chars-per-second is skewed.
What it does not mean: a broken recording; leading and trailing silence can be trimmed
(`librosa.effects.trim`, Coqui's `do_trim_silence`).
"""


def check_silence(scan: SpeechScan, limits: SilenceLimits, ctx: SpeechContext) -> Iterator[Hit]:
    for u, f in _sampled(scan):
        s = f.samples
        assert s is not None and f.header is not None
        if s.longest_silence > limits.max_silence_s:
            whole = s.longest_silence >= f.header.duration - 1e-3
            where = "the whole file is silent" if whole else f"from {s.silence_start:.2f} s"
            yield Hit(message=f"{_line(u)}: {s.longest_silence:.2f} s of silence ({where}; "
                              f"{f.header.duration:.2f} s long); limit {limits.max_silence_s} s",
                      evidence={"line": u.line + 1, "silence_s": s.longest_silence, "start_s": s.silence_start,
                                "duration": round(f.header.duration, 4)}, location=at(u))


SILENCE = Rule(id="TP-DATA-SILENCE", name="long-silence", level=Level.WARN, doc=SILENCE_DOC, check=check_silence,
               family=SPEECH, limits=SilenceLimits, origin="trainproof")


# --- transcripts -------------------------------------------------------------------------------

_DATE = re.compile(r"\b\d{1,4}[/.\-]\d{1,2}[/.\-]\d{1,4}\b")
_TIME = re.compile(r"\b\d{1,2}:\d{2}\b")
_NUMBER = re.compile(r"\d[\d,.]*")
_SYMBOL = re.compile(r"[%$€£¥&@#+=]")

UNNORMALIZED_DOC = """A transcript holds digits, dates or symbols a TTS front end must spell out.

What it flags: a transcript with a date (`12/03/1999`), a time (`10:30`), a number
(`1887`, `3.5`) or a symbol read aloud (`%`, `$`, `&`, `@`, `+`, `=`); the message quotes the
first one. In an LJSpeech metadata.csv the normalised (third) column is judged, as
Coqui's formatter reads it.
Why it matters: the model cannot learn how `1887` is spoken ("eighteen eighty-seven")
from characters it never hears; it mumbles or skips them.
What it does not mean: an error if your recipe normalises text on the fly (a text
normaliser, `phonemizer`); the rule cannot see that.
"""


def _unnormalized(text: str) -> tuple[str, str] | None:
    for kind, pattern in (("date", _DATE), ("time", _TIME), ("number", _NUMBER), ("symbol", _SYMBOL)):
        m = pattern.search(text)
        if m:
            return kind, m.group(0)
    return None


def check_unnormalized(scan: SpeechScan, limits: NoLimits, ctx: SpeechContext) -> Iterator[Hit]:
    for u in scan.utterances:
        found = _unnormalized(u.text)
        if found is not None:
            kind, token = found
            yield Hit(message=f"{_line(u)}: {kind} {token!r} in the transcript is not spelled out",
                      evidence={"line": u.line + 1, "kind": kind, "token": token}, location=at(u))


UNNORMALIZED = Rule(id="TP-DATA-UNNORMALIZED", name="unnormalized-text", level=Level.WARN, doc=UNNORMALIZED_DOC,
                    check=check_unnormalized, family=SPEECH, origin="trainproof")

# Scripts written together in one language count as one (Japanese mixes kana and kanji).
_SCRIPT_GROUPS = {"HIRAGANA": "CJK", "KATAKANA": "CJK", "HANGUL": "CJK", "CJK": "CJK"}

MIXED_DOC = """A transcript mixes letters of several scripts.

What it flags: a transcript whose letters come from more than one script (Latin with
Cyrillic or Greek, and so on; kana, kanji and hangul count as one), often a look-alike
letter (Cyrillic `а` for Latin `a`) from a copy-paste.
Why it matters: a character-based TTS or CTC model gets symbols it barely sees in
training; a look-alike letter is a different token with no pronunciation.
What it does not mean: a mistake in a code-switched corpus; it is a WARN to read.
"""


def scripts_of(text: str) -> list[str]:
    """The scripts of a text's letters, in order of first appearance."""
    if text.isascii():
        return ["LATIN"] if any(c.isalpha() for c in text) else []
    found: dict[str, None] = {}
    for c in text:
        if c.isalpha():
            word = unicodedata.name(c, "UNKNOWN").split(" ", 1)[0]
            found[_SCRIPT_GROUPS.get(word, word)] = None
    return list(found)


def check_mixed(scan: SpeechScan, limits: NoLimits, ctx: SpeechContext) -> Iterator[Hit]:
    for u in scan.utterances:
        scripts = scripts_of(u.text)
        if len(scripts) > 1:
            yield Hit(message=f"{_line(u)}: letters of {len(scripts)} scripts ({', '.join(s.title() for s in scripts)})",
                      evidence={"line": u.line + 1, "scripts": "+".join(scripts)}, location=at(u))


MIXED_SCRIPTS = Rule(id="TP-DATA-MIXED-SCRIPTS", name="mixed-scripts", level=Level.WARN, doc=MIXED_DOC,
                     check=check_mixed, family=SPEECH, origin="trainproof")


# --- what the listing and the trainer's config declare ------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class MismatchLimits:
    # Manifests round durations (NeMo writes the soundfile value, exports often 2
    # decimals); a tenth of a second is far above rounding and far below a wrong file.
    tolerance_s: float = 0.1


MISMATCH_DOC = """A manifest's declared duration disagrees with the audio file's own.

What it flags: a manifest record whose `duration` differs from the duration the file's
header gives by more than `tolerance_s` (records cutting a segment with `offset` are
not compared).
Why it matters: NeMo buckets, filters (`max_duration`) and sorts by the declared
duration; a stale manifest (audio re-cut or re-encoded after it was written) batches
and filters the wrong files, and the mismatch often means the audio was replaced.
What it does not mean: that the audio is wrong; the manifest may be.
"""


def check_mismatch(scan: SpeechScan, limits: MismatchLimits, ctx: SpeechContext) -> Iterator[Hit]:
    if not any(u.duration is not None for u in scan.utterances):
        raise Skip("the listing declares no durations")
    for u, f in _readable(scan):
        if u.duration is None or u.segment or f.header is None:
            continue
        real = f.header.duration
        if abs(real - u.duration) > limits.tolerance_s:
            yield Hit(message=f"{_line(u)}: declares {fmt(u.duration)} s, the file holds {fmt(real)} s "
                              f"({f.header.frames:,} frames at {f.header.sample_rate} Hz); tolerance {limits.tolerance_s} s",
                      evidence={"line": u.line + 1, "declared": u.duration, "actual": round(real, 4)},
                      location=at(u))


DURATION_MISMATCH = Rule(id="TP-SPEECH-DURATION-MISMATCH", name="duration-mismatch", level=Level.WARN,
                         doc=MISMATCH_DOC, check=check_mismatch, family=SPEECH, limits=MismatchLimits)

OVER_MAX_DOC = """An utterance is longer than the run's configured maximum and will be dropped.

What it flags: audio longer than `max_audio_len` (Coqui, in samples at the config's
`audio.sample_rate`) or `model_args.max_wav_length` (XTTS) of the `config.json` in the
data's folder or the folder above it; the message counts them.
Why it matters: the trainer filters these out at load time (Coqui prints one line about
it); a corpus of long files can lose most of its data without an error.
What it does not mean: anything without such a config beside the data (the check is skipped).
"""


def check_over_max(scan: SpeechScan, limits: NoLimits, ctx: SpeechContext) -> Iterator[Hit]:
    cfg = scan.listing.config
    if cfg is None or cfg.max_audio_len is None:
        raise Skip("no config.json with max_audio_len / model_args.max_wav_length beside the data")
    cap = float(cfg.max_audio_len.value)
    rate_cfg = float(cfg.sample_rate.value) if cfg.sample_rate is not None else None
    over = []
    for u, f in _readable(scan):
        assert f.header is not None
        rate = rate_cfg or f.header.sample_rate
        samples = f.header.duration * rate
        if samples > cap:
            over.append((u, f, samples, rate))
    where = Location(path=cfg.max_audio_len.path, span=Span(cfg.max_audio_len.line, 0, cfg.max_audio_len.line, 0))
    for u, f, samples, rate in over:
        assert f.header is not None
        yield Hit(message=f"{_line(u)}: {f.header.duration:.2f} s is {samples:,.0f} samples at {rate:g} Hz, over "
                          f"{cfg.max_audio_len.key} {cap:,.0f} ({cap / rate:.2f} s): the trainer drops it "
                          f"({len(over)} of {len(_readable(scan))} files)",
                  evidence={"line": u.line + 1, "samples": round(samples), "max": cap, "dropped": len(over)},
                  location=at(u), related=(Related(location=where, message=f"{cfg.max_audio_len.key}"),))


OVER_MAX = Rule(id="TP-SPEECH-OVER-MAX-LEN", name="over-max-audio-len", level=Level.WARN, doc=OVER_MAX_DOC,
                check=check_over_max, family=SPEECH)

CHARSET_DOC = """A transcript holds characters outside the model's character set.

What it flags: characters of a transcript that the `characters` block of the Coqui
`config.json` beside the data (its `characters` and `punctuations`, and the space) does
not hold; when the set has no capital letters, the text is compared in lower case, as
the cleaners lower it.
Why it matters: Coqui's tokenizer drops unknown characters with one console line per
character; words lose letters and the model learns the shortened text.
What it does not mean: anything for phoneme models (`use_phonemes`: the text is
phonemised first; the check is skipped) or without such a config.
"""


def check_charset(scan: SpeechScan, limits: NoLimits, ctx: SpeechContext) -> Iterator[Hit]:
    cfg = scan.listing.config
    if cfg is None or cfg.characters is None:
        raise Skip("no config.json with a `characters` set beside the data")
    if cfg.use_phonemes:
        raise Skip("use_phonemes is true: transcripts are phonemised before the character set applies")
    allowed = set(str(cfg.characters.value))
    lower = not any(c.isupper() for c in allowed)
    where = Location(path=cfg.characters.path, span=Span(cfg.characters.line, 0, cfg.characters.line, 0))
    for u in scan.utterances:
        text = u.text.lower() if lower else u.text
        outside = sorted(set(text) - allowed)
        if outside:
            shown = "".join(outside[:12])
            yield Hit(message=f"{_line(u)}: {len(outside)} character(s) not in the model's set: {shown!r}",
                      evidence={"line": u.line + 1, "characters": shown, "count": len(outside)}, location=at(u),
                      related=(Related(location=where, message="the model's character set"),))


OUT_OF_CHARSET = Rule(id="TP-SPEECH-OUT-OF-CHARSET", name="out-of-charset", level=Level.WARN, doc=CHARSET_DOC,
                      check=check_charset, family=SPEECH)

OUTSIDE_DOC = """Audio paths lead outside the listing's folder, and were followed.

What it flags: utterances whose audio path is absolute, climbs out with `..`, or goes
through a symlink to a place outside the manifest's folder; the first is located, the
rest counted.
Why it matters: the dataset is not self-contained: copied elsewhere (a cluster, CI), its
audio will be missing. In a folder you did not write, it also says which files outside it
were opened (only regular files, headers and samples, never shown).
What it does not mean: an error; NeMo manifests often hold absolute paths. It is INFO.
"""


def check_outside(scan: SpeechScan, limits: NoLimits, ctx: SpeechContext) -> Iterator[Hit]:
    outside = [u for u in scan.utterances if u.outside]
    if outside:
        u = outside[0]
        yield Hit(message=f"{len(outside)} of {len(scan.utterances)} audio path(s) lead outside "
                          f"{scan.listing.root}, first {u.audio_raw!r} ({_line(u)}); they were read",
                  evidence={"outside": len(outside), "utterances": len(scan.utterances), "line": u.line + 1},
                  location=at(u))


AUDIO_OUTSIDE = Rule(id="TP-SPEECH-AUDIO-OUTSIDE", name="audio-outside", level=Level.INFO, doc=OUTSIDE_DOC,
                     check=check_outside, family=SPEECH)


# --- train and eval ------------------------------------------------------------------------------

EVAL_OVERLAP_DOC = """An eval utterance is also in the training data.

What it flags: an eval listing's utterance whose audio is byte-identical to (or the same
file as) a training utterance's, or whose speaker and transcript are a training
utterance's; at the eval line, pointing at the training line. Train and eval are paired
by name (`metadata_train.csv`/`metadata_eval.csv`, `train_manifest.json`/`val_manifest.json`)
or given with `preflight --eval`.
Why it matters: the eval loss measures memorisation of those utterances, not
generalisation; a leaked eval set hides overfitting.
What it does not mean: that a shared speaker is a leak (see TP-SPEECH-EVAL-SPEAKERS).
"""


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def check_eval_overlap(scan: SpeechScan, limits: NoLimits, ctx: SpeechContext) -> Iterator[Hit]:
    if not ctx.train:
        raise Skip("no training listing to compare with")
    by_digest: dict[int, Utterance] = {}
    by_path: dict[str, Utterance] = {}
    by_text: dict[tuple[str, str], Utterance] = {}
    for t in ctx.train:
        for u in t.utterances:
            f = t.facts(u)
            if f is not None and f.digest is not None:
                by_digest.setdefault(f.digest, u)
            by_path.setdefault(u.audio, u)
            if u.text.strip():
                by_text.setdefault((u.speaker, _norm(u.text)), u)
    for u in scan.utterances:
        f = scan.facts(u)
        hit = by_path.get(u.audio)
        how = "is the same audio file as"
        if hit is None and f is not None and f.digest is not None and f.digest in by_digest:
            hit, how = by_digest[f.digest], "has audio byte-identical to"
        if hit is None and u.text.strip() and (u.speaker, _norm(u.text)) in by_text:
            hit, how = by_text[(u.speaker, _norm(u.text))], "has the speaker and transcript of"
        if hit is not None:
            # a listing's line after its file's name; an utterance known by its file alone, once
            name, where = hit.path.rsplit("/", 1)[-1], _line(hit)
            training = name if where == name else f"{name} {where}"
            yield Hit(message=f"eval {_line(u)} {how} training {training}",
                      evidence={"line": u.line + 1, "train_line": hit.line + 1}, location=at(u),
                      related=(Related(location=at(hit), message="in the training data"),))


EVAL_OVERLAP = Rule(id="TP-SPEECH-EVAL-OVERLAP", name="speech-eval-overlap", level=Level.WARN,
                    doc=EVAL_OVERLAP_DOC, check=check_eval_overlap, family=SPEECH)

EVAL_SPEAKERS_DOC = """The eval listing's speakers are also training speakers.

What it flags: speakers named in both a multi-speaker training listing and its eval
listing; the message counts them.
Why it matters: for speaker-independent evaluation (ASR, zero-shot voice cloning) the
eval speakers must be unseen, or the eval overstates what the model does for a new voice.
What it does not mean: a problem for a TTS recipe that evaluates its own voices; it is INFO.
"""


def check_eval_speakers(scan: SpeechScan, limits: NoLimits, ctx: SpeechContext) -> Iterator[Hit]:
    if not ctx.train:
        raise Skip("no training listing to compare with")
    train = {u.speaker for t in ctx.train for u in t.utterances if u.speaker}
    if len(train) < 2:
        raise Skip("the training data names fewer than two speakers")
    mine = [u for u in scan.utterances if u.speaker]
    shared = sorted({u.speaker for u in mine} & train)
    if shared:
        first = next(u for u in mine if u.speaker in train)
        yield Hit(message=f"{len(shared)} of {len({u.speaker for u in mine})} eval speaker(s) also speak in the "
                          f"training data ({', '.join(shared[:5])}{', ...' if len(shared) > 5 else ''})",
                  evidence={"shared": len(shared), "train_speakers": len(train)}, location=at(first))


EVAL_SPEAKERS = Rule(id="TP-SPEECH-EVAL-SPEAKERS", name="eval-speakers-seen", level=Level.INFO,
                     doc=EVAL_SPEAKERS_DOC, check=check_eval_speakers, family=SPEECH)


# --- a SentencePiece tokenizer against the transcripts --------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class OovLimits:
    # The share of `<unk>` pieces: a SentencePiece model trained on the corpus has none; one
    # in a thousand means whole characters (accents, a script) the model cannot write.
    max_oov_rate: float = 0.001


def _tokens(scan: SpeechScan) -> tuple[Sequence[int], Sequence[int]]:
    tok = scan.tokenizer
    if tok is None:
        raise Skip(scan.tokenizer_note or "no SentencePiece model given (preflight --tokenizer FILE.model) or found "
                                          "beside the data (tokenizer.model)")
    return tok.tokens, tok.unknown


HIGH_OOV_DOC = """The SentencePiece tokenizer cannot write the transcripts: too many `<unk>` pieces.

What it flags: the share of `<unk>` pieces over every transcript's pieces above
`max_oov_rate`, with the tokenizer found beside the data (`tokenizer.model`) or given
(`preflight --tokenizer FILE.model`); located at the first line with an unknown piece.
Why it matters: every `<unk>` is text the model is trained to pronounce (or emit) as one
catch-all symbol; characters the tokenizer was not trained on never get learned.
What it does not mean: a broken tokenizer for another corpus; retrain or extend it on this one.
"""


def check_high_oov(scan: SpeechScan, limits: OovLimits, ctx: SpeechContext) -> Iterator[Hit]:
    tokens, unknown = _tokens(scan)
    total, unk = sum(tokens), sum(unknown)
    if total == 0:
        raise Skip("the transcripts gave no pieces")
    rate = unk / total
    if rate > limits.max_oov_rate:
        lines = [u for u, n in zip(scan.utterances, unknown) if n]
        yield Hit(message=f"{unk:,} of {total:,} pieces are <unk> ({rate:.3%}) in {len(lines)} transcript(s), "
                          f"first {_line(lines[0])}; limit {limits.max_oov_rate:.3%}",
                  evidence={"unknown": unk, "pieces": total, "rate": round(rate, 6), "line": lines[0].line + 1},
                  location=at(lines[0]),
                  related=tuple(Related(location=at(u), message="transcript with <unk> pieces") for u in lines[1:4]))


HIGH_OOV = Rule(id="TP-TOK-HIGH-OOV", name="high-oov", level=Level.FAIL, doc=HIGH_OOV_DOC, check=check_high_oov,
                family=SPEECH, limits=OovLimits, origin="trainproof")


@dataclass(frozen=True, kw_only=True)
class TpsLimits:
    # Speech runs at ~12-15 characters a second; a subword tokenizer writes 3-8 pieces a
    # second of it. 50 a second is a tokenizer splitting into single characters or bytes,
    # which makes sequences long enough to overflow a TTS decoder's context.
    max_tokens_per_s: float = 50.0


HIGH_TPS_DOC = """The tokenizer writes too many pieces per second of audio.

What it flags: all transcripts' pieces over all their audio's seconds (the file's own
duration, else the manifest's) above `max_tokens_per_s`; located at the fastest line.
Why it matters: a tokenizer that falls back to characters or bytes on this corpus makes
long sequences: attention cost grows with their square, and a TTS model must align many
more symbols to each frame.
What it does not mean: a wrong tokenizer for a character-level model on purpose.
"""


def check_high_tps(scan: SpeechScan, limits: TpsLimits, ctx: SpeechContext) -> Iterator[Hit]:
    tokens, _ = _tokens(scan)
    timed = [(u, n, d) for u, n in zip(scan.utterances, tokens)
             if (d := duration_of(u, scan.facts(u))) is not None and d > 0]
    if not timed:
        raise Skip("no utterance with a known duration")
    count, seconds = sum(n for _, n, _ in timed), sum(d for _, _, d in timed)
    tps = count / seconds
    if tps > limits.max_tokens_per_s:
        u, n, d = max(timed, key=lambda t: t[1] / t[2])
        yield Hit(message=f"{tps:.1f} pieces per second of audio ({count:,} pieces over {seconds:.1f} s, "
                          f"{len(timed)} utterances); fastest {_line(u)} at {n / d:.1f}/s; limit {limits.max_tokens_per_s}",
                  evidence={"tokens_per_second": round(tps, 3), "pieces": count, "seconds": round(seconds, 3),
                            "line": u.line + 1}, location=at(u))


HIGH_TPS = Rule(id="TP-TOK-HIGH-TPS", name="high-tokens-per-second", level=Level.WARN, doc=HIGH_TPS_DOC,
                check=check_high_tps, family=SPEECH, limits=TpsLimits, origin="trainproof")

SPEECH_RULES: tuple[Rule[SpeechScan, SpeechContext], ...] = (
    BAD_RECORD, MISSING, UNREADABLE, INCONSISTENT_SR, INCONSISTENT_CHANNELS, EMPTY, DURATION_OUTLIER, CHAR_RATE,
    DUPLICATES, CLIPPING, SILENCE, UNNORMALIZED, MIXED_SCRIPTS, DURATION_MISMATCH, OVER_MAX, OUT_OF_CHARSET,
    AUDIO_OUTSIDE, EVAL_OVERLAP, EVAL_SPEAKERS, HIGH_OOV, HIGH_TPS,
)
# The rules that read decoded samples: without soundfile they are NOT-CHECKED, with why.
SAMPLE_RULES = (CLIPPING, SILENCE)
# The rules that read a tokenizer's pieces.
TOKENIZER_RULES = (HIGH_OOV, HIGH_TPS)
EVAL_RULES = (EVAL_OVERLAP, EVAL_SPEAKERS)

__all__ = ["SPEECH", "SpeechContext", "SPEECH_RULES", "SAMPLE_RULES", "TOKENIZER_RULES", "EVAL_RULES",
           "duration_of", "scripts_of", "at"]
