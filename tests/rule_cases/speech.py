"""Cases for the speech family: NeMo-style manifests beside WAV files written here with
soundfile (8 kHz clips, so a corpus stays small), listed and scanned by the readers
(readers/speech.list_speech, scan_speech on one process) into the SpeechScan the rules
judge; an eval listing is judged with its training listing (SpeechContext)."""

from __future__ import annotations

import json
import math
import re
import tempfile
from functools import cache
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from trainproof_lsp.readers.speech import SpeechScan, list_speech, scan_speech
from trainproof_lsp.rules.speech import SpeechContext

from . import Expect, FamilyCases, Fires, Quiet, RuleCases, straddle
from .checkpoint import _folder

RATE = 8000
TEXT = "the birch canoe slid on the smooth planks here"  # 46 characters, read in about 3 s


def voice(seconds: float, *, seed: int = 0, amp: float = 0.3) -> np.ndarray:
    """A tone with a little noise: voiced throughout, never silent, never near full scale."""
    t = np.arange(round(seconds * RATE)) / RATE
    noise = np.random.default_rng(seed).standard_normal(len(t))
    return np.clip(amp * np.sin(2 * np.pi * 180 * t) + 0.03 * noise, -0.6, 0.6)


def speech(clips: Sequence[dict[str, Any]], *, name: str = "train_manifest.json", folder: Path | None = None,
           files: dict[str, Any] | None = None, lines: Sequence[str] = (), tokenizer: Path | None = None) -> SpeechScan:
    """A manifest of `clips` (each: seconds or samples, text, and any manifest keys) written
    in `folder` (a fresh one by default) with its WAVs under wavs/, plus raw `lines`."""
    import soundfile as sf  # type: ignore[import-untyped,unused-ignore]  # the `speech` extra, in the test environment
    folder = folder or Path(tempfile.mkdtemp(dir=_folder()))
    (folder / "wavs").mkdir(exist_ok=True)
    records = []
    for i, c in enumerate(clips):
        c = dict(c)
        audio = c.pop("samples", None)
        seconds = c.pop("seconds", 3.0)
        rate = c.pop("rate", RATE)
        subtype = c.pop("subtype", "PCM_16")
        wav = c.pop("wav", f"wavs/{name.split('_')[0]}{i}.wav")
        if audio is None:
            audio = voice(seconds, seed=i)
        if not (folder / wav).exists() and c.pop("write", True):
            sf.write(folder / wav, audio, rate, subtype=subtype)
        c.pop("write", None)
        records.append({"audio_filepath": wav, "text": TEXT, **c})
    for fname, content in (files or {}).items():
        (folder / fname).write_text(content if isinstance(content, str) else json.dumps(content))
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records) + "".join(x + "\n" for x in lines)
    (folder / name).write_text(text, encoding="utf-8")
    return scan_speech(list_speech(folder / name), jobs=1, tokenizer=tokenizer)


LETTERS = "abcdefghijklmnopqrstuvwxyz"


@cache
def char_model() -> Path:
    """A character-level SentencePiece model of the 26 letters, trained here once."""
    import sentencepiece as spm  # type: ignore[import-untyped,unused-ignore]  # in the test environment
    folder = Path(tempfile.mkdtemp(dir=_folder()))
    (folder / "letters.txt").write_text("\n".join(LETTERS[i:] + LETTERS[:i] for i in range(26)) * 5 + "\n")
    spm.SentencePieceTrainer.train(input=str(folder / "letters.txt"), model_prefix=str(folder / "chars"), model_type="char",
                                   vocab_size=len(LETTERS) + 4, character_coverage=1.0, minloglevel=2)
    return folder / "chars.model"


def letters(n: int, unknown: int = 0) -> str:
    """n letters in one word (n + 1 pieces with the word's leading mark), the first
    `unknown` of them a letter the model never saw (an accented one), each between known ones."""
    text = [LETTERS[i % 26] for i in range(n)]
    for j in range(unknown):
        text[2 * j + 1] = "\u00e9"
    return "".join(text)


def paced(pieces: float, n: int = 20) -> SpeechScan:
    """n one-second clips whose transcripts are `pieces` pieces each."""
    return speech(clips(n, seconds=1.0, text=letters(int(pieces) - 1)), tokenizer=char_model())


def unknown_share(rate: float) -> SpeechScan:
    """20 clips of 2.5 s and 100 pieces each (40 a second), `rate` of all 2000 pieces <unk>."""
    k = round(rate * 2000)
    texts = [letters(99, unknown=min(k - 40 * i, 40) if k > 40 * i else 0) for i in range(20)]
    return speech([{"seconds": 2.5, "text": t} for t in texts], tokenizer=char_model())


def clips(n: int = 24, **each: Any) -> list[dict[str, Any]]:
    return [dict(each) for _ in range(n)]


def with_clip(extra: dict[str, Any], n: int = 23, at: int = 5) -> list[dict[str, Any]]:
    out = clips(n)
    out.insert(at, extra)
    return out


def spread_corpus(spread: float, z: float, n: int = 23) -> list[dict[str, Any]]:
    """Clips whose log-durations sit +-a around 3 s (robust spread 1.4826 a = `spread`) and
    one clip z spreads from the median (above it for z > 0, below for z < 0): twelve on the
    outlier's other side, eleven on its own, so the median stays at 3 s."""
    a = spread / 1.4826
    side = 1 if z > 0 else -1
    out = [{"seconds": 3.0 * math.exp(side * (a if i % 2 else -a))} for i in range(n)]
    out.insert(5, {"seconds": 3.0 * math.exp(z * max(spread, 0.1))})
    return out


def tone(seconds: float, *, silent: tuple[float, float] | None = None, clipped: int = 0) -> np.ndarray:
    x = voice(seconds)
    if silent is not None:
        x[round(silent[0] * RATE):round(silent[1] * RATE)] = 0.0
    x[100:100 + clipped] = 1.0
    return x


WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def word(i: int) -> str:
    """A transcript's number spelled out, digit by digit (a digit would be unnormalised text)."""
    return " ".join(WORDS[int(d)] for d in str(i))


def context(_: SpeechScan) -> SpeechContext:
    return SpeechContext()


def with_train(_: SpeechScan) -> SpeechContext:
    """The training listing beside an eval one: 24 clips, speakers s0..s3 in turn."""
    train_folder = Path(tempfile.mkdtemp(dir=_folder()))
    train = speech([{"speaker": f"s{i % 4}", "text": f"{TEXT} {word(i)}"} for i in range(24)], folder=train_folder)
    return SpeechContext(train=(train,))


def eval_of(train_clips: Sequence[int], *, speakers: Sequence[str] = ("s9",)) -> SpeechScan:
    """An eval listing of 6 clips of its own (speakers given) and copies of the training
    clips `train_clips` (same audio and transcript, written the same way)."""
    own = [{"speaker": speakers[i % len(speakers)], "text": f"an eval sentence {word(i)}",
            "samples": voice(3.0, seed=100 + i)} for i in range(6)]
    copies = [{"speaker": f"s{k % 4}", "text": f"{TEXT} {word(k)}", "samples": voice(3.0, seed=k)} for k in train_clips]
    return speech(own + copies, name="val_manifest.json")


def normalize(text: str) -> str:
    return re.sub(re.escape(str(_folder())) + r"/[^/\s]+", "<tmp>", text)


COQUI = {"audio": {"sample_rate": RATE}, "max_audio_len": 4 * RATE,
         "characters": {"characters": "abcdefghijklmnopqrstuvwxyz", "punctuations": ".,!? "}}

CASES: dict[str, RuleCases] = {
    "TP-SPEECH-BAD-RECORD": RuleCases(
        fires=Fires(subject=lambda: speech(clips(3), lines=['{"audio_filepath": "wavs/x.wav"', '{"text": "no audio"}']),
                    hits=(Expect(message="line 4: not JSON (Expecting ',' delimiter: line 1 column 32 (char 31))",
                           evidence={'line': 4}, line=3),
                     Expect(message='line 5: no `audio_filepath` string in the record',
                           evidence={'line': 5}, line=4),),
                    family=('TP-SPEECH-BAD-RECORD', 'TP-SPEECH-BAD-RECORD')),
        quiet=Quiet(subject=lambda: speech(clips(3))),
    ),
    "TP-DATA-MISSING-AUDIO": RuleCases(
        fires=Fires(subject=lambda: speech(with_clip({"wav": "wavs/gone.wav", "write": False}, n=3, at=1)), hits=(Expect(message="line 2: audio 'wavs/gone.wav' does not exist (1 of 4 utterances)",
                           evidence={'line': 2, 'missing': 1, 'utterances': 4}, line=1),),
                    family=('TP-DATA-MISSING-AUDIO',)),
        quiet=Quiet(subject=lambda: speech(clips(3))),
    ),
    "TP-DATA-UNREADABLE-AUDIO": RuleCases(
        fires=Fires(subject=lambda: speech(clips(3), lines=[json.dumps({"audio_filepath": "wavs/cut.wav", "text": TEXT})],
                                           files={"wavs/cut.wav": "RIFF\u0000\u0000not a wave file"}), hits=(Expect(message="line 4: audio 'wavs/cut.wav' is unreadable: not a RIFF/WAVE file",
                           evidence={'line': 4, 'kind': 'unreadable', 'bytes': 21}, line=3),),
                    family=('TP-DATA-UNREADABLE-AUDIO',)),
        quiet=Quiet(subject=lambda: speech(clips(3))),
    ),
    "TP-DATA-INCONSISTENT-SR": RuleCases(
        fires=Fires(subject=lambda: speech(with_clip({"rate": 16000}, n=5, at=2)), hits=(Expect(message='line 3: 16000 Hz where 5 of 6 files are 8000 Hz (1 file(s) at 16000 Hz)',
                           evidence={'line': 3, 'sample_rate': 16000, 'majority_sample_rate': 8000, 'majority': 5, 'files': 6, 'these': 1}, line=2),),
                    family=('TP-DATA-INCONSISTENT-SR',)),
        quiet=Quiet(subject=lambda: speech(clips(6))),
    ),
    "TP-DATA-INCONSISTENT-CHANNELS": RuleCases(
        fires=Fires(subject=lambda: speech(with_clip({"samples": np.stack([voice(3.0)] * 2, axis=1)}, n=5, at=2)), hits=(Expect(message='line 3: 2 channel(s) where 5 of 6 files are 1 channel(s) (1 file(s) at 2 channel(s))',
                           evidence={'line': 3, 'channels': 2, 'majority_channels': 1, 'majority': 5, 'files': 6, 'these': 1}, line=2),),
                    family=('TP-DATA-INCONSISTENT-CHANNELS',)),
        quiet=Quiet(subject=lambda: speech(clips(6))),
    ),
    "TP-DATA-EMPTY-TRANSCRIPT": RuleCases(
        fires=Fires(subject=lambda: speech(with_clip({"text": "  "}, n=3, at=1)), hits=(Expect(message='line 2: empty transcript (1 of 4 utterances)',
                           evidence={'line': 2, 'empty': 1, 'utterances': 4}, line=1),),
                    family=('TP-DATA-EMPTY-TRANSCRIPT',)),
        quiet=Quiet(subject=lambda: speech(clips(3))),
    ),
    "TP-SPEECH-DURATION-OUTLIER": RuleCases(
        fires=Fires(subject=lambda: speech(with_clip({"seconds": 9.0})), hits=(Expect(message='line 6: 9 s is 3.00x the corpus median 3 s (robust z +11.0; limit 4.0, i.e. beyond 1.49x either way)',
                           evidence={'line': 6, 'duration': 9.0, 'median': 3.0, 'z': 10.99}, line=5),),
                    family=('TP-SPEECH-DURATION-OUTLIER', 'TP-DATA-CHAR-RATE-OUTLIER')),
        quiet=(Quiet(subject=lambda: speech(with_clip({"seconds": 3.3}))),
               Quiet(subject=lambda: speech(with_clip({"seconds": 9.0}, n=10)), skip="the corpus spread needs 20")),
        straddles=(straddle("max_z", 4.0, lambda z: speech(spread_corpus(0.05, z)), fire=4.1, quiet=3.9),
                   straddle("min_spread", 0.1, lambda s: speech(spread_corpus(s, 4.3 * s / max(s, 0.1))),
                            fire=0.11, quiet=0.09),
                   straddle("min_utterances", 20, lambda n: speech(with_clip({"seconds": 9.0}, n=int(n) - 1)), fire=20, quiet=19,
                            skip="the corpus spread needs 20")),
    ),
    "TP-DATA-CHAR-RATE-OUTLIER": RuleCases(
        fires=Fires(subject=lambda: speech(with_clip({"text": TEXT + " " + TEXT + " " + TEXT})), hits=(Expect(message='line 6: 46.7 chars/s is 3.04x the corpus median 15.3 chars/s (robust z +11.1; limit 5.0): does this transcript belong to this audio?',
                           evidence={'line': 6, 'chars_per_second': 46.667, 'median': 15.333, 'z': 11.13}, line=5),),
                    family=('TP-DATA-CHAR-RATE-OUTLIER',)),
        quiet=(Quiet(subject=lambda: speech(with_clip({"text": TEXT + " ok"}))),
               Quiet(subject=lambda: speech(with_clip({"text": TEXT * 3}, n=10)), skip="the corpus spread needs 20")),
        straddles=(straddle("max_z", 5.0, lambda z: speech(with_clip({"seconds": 3.0 * math.exp(-0.1 * z)})), fire=5.1, quiet=4.9),
                   straddle("min_spread", 0.1, lambda s: speech(spread_corpus(s, -5.3 * s / max(s, 0.1))), fire=0.11, quiet=0.09),
                   straddle("min_utterances", 20, lambda n: speech(with_clip({"text": TEXT * 3}, n=int(n) - 1)), fire=20, quiet=19,
                            skip="the corpus spread needs 20")),
    ),
    "TP-DATA-DUPLICATES": RuleCases(
        fires=Fires(subject=lambda: speech(with_clip({"wav": "wavs/train0.wav"}, n=3, at=2)), hits=(Expect(message='line 3 names the same audio file as line 1 (48,044 bytes)',
                           evidence={'line': 3, 'first_line': 1, 'bytes': 48044}, line=2),),
                    family=('TP-DATA-DUPLICATES',)),
        quiet=Quiet(subject=lambda: speech(clips(3))),
    ),
    "TP-DATA-CLIPPING": RuleCases(
        fires=Fires(subject=lambda: speech(with_clip({"samples": tone(3.0, clipped=40), "subtype": "FLOAT"}, n=3, at=1)),
                    hits=(Expect(message='line 2: 40 sample(s) at or above 0.999 of full scale (peak 1.0000); limit 3',
                           evidence={'line': 2, 'clipped': 40, 'peak': 1.0}, line=1),),
                    family=('TP-DATA-CLIPPING',)),
        quiet=Quiet(subject=lambda: speech(with_clip({"samples": tone(3.0, clipped=1), "subtype": "FLOAT"}, n=3, at=1))),
        straddles=(straddle("min_clipped", 3, lambda k: speech(with_clip({"samples": tone(3.0, clipped=int(k)), "subtype": "FLOAT"},
                                                                         n=3, at=1)), fire=3, quiet=2),),
    ),
    "TP-DATA-SILENCE": RuleCases(
        fires=Fires(subject=lambda: speech(with_clip({"samples": tone(6.0, silent=(1.0, 4.5))}, n=3, at=1)), hits=(Expect(message='line 2: 3.50 s of silence (from 1.00 s; 6.00 s long); limit 2.0 s',
                           evidence={'line': 2, 'silence_s': 3.5, 'start_s': 1.0, 'duration': 6.0}, line=1),),
                    family=('TP-DATA-SILENCE',)),
        quiet=Quiet(subject=lambda: speech(with_clip({"samples": tone(6.0, silent=(1.0, 2.5))}, n=3, at=1))),
        straddles=(straddle("max_silence_s", 2.0, lambda s: speech(with_clip({"samples": tone(6.0, silent=(1.0, 1.0 + s))}, n=3, at=1)),
                            fire=2.05, quiet=1.95),),
    ),
    "TP-DATA-UNNORMALIZED": RuleCases(
        fires=Fires(subject=lambda: speech(with_clip({"text": "it opened on 12/03/1999 at 10:30"}, n=3, at=1)), hits=(Expect(message="line 2: date '12/03/1999' in the transcript is not spelled out",
                           evidence={'line': 2, 'kind': 'date', 'token': '12/03/1999'}, line=1),),
                    family=('TP-DATA-UNNORMALIZED',)),
        quiet=Quiet(subject=lambda: speech(with_clip({"text": "it opened on the twelfth of march"}, n=3, at=1))),
    ),
    "TP-DATA-MIXED-SCRIPTS": RuleCases(
        fires=Fires(subject=lambda: speech(with_clip({"text": "the birch c\u0430noe slid"}, n=3, at=1)), hits=(Expect(message='line 2: letters of 2 scripts (Latin, Cyrillic)',
                           evidence={'line': 2, 'scripts': 'LATIN+CYRILLIC'}, line=1),),
                    family=('TP-DATA-MIXED-SCRIPTS',)),
        quiet=Quiet(subject=lambda: speech(with_clip({"text": "the birch canoe slid"}, n=3, at=1))),
    ),
    "TP-SPEECH-DURATION-MISMATCH": RuleCases(
        fires=Fires(subject=lambda: speech(with_clip({"duration": 3.5}, n=3, at=1)), hits=(Expect(message='line 2: declares 3.5 s, the file holds 3 s (24,000 frames at 8000 Hz); tolerance 0.1 s',
                           evidence={'line': 2, 'declared': 3.5, 'actual': 3.0}, line=1),),
                    family=('TP-SPEECH-DURATION-MISMATCH',)),
        quiet=(Quiet(subject=lambda: speech(with_clip({"duration": 3.04}, n=3, at=1))),
               Quiet(subject=lambda: speech(clips(3)), skip="declares no durations")),
        straddles=(straddle("tolerance_s", 0.1, lambda x: speech(with_clip({"duration": 3.0 + x}, n=3, at=1)), fire=0.11, quiet=0.09),),
    ),
    "TP-SPEECH-OVER-MAX-LEN": RuleCases(
        fires=Fires(subject=lambda: speech(with_clip({"seconds": 5.0}, n=3, at=1), files={"config.json": COQUI}), hits=(Expect(message='line 2: 5.00 s is 40,000 samples at 8000 Hz, over max_audio_len 32,000 (4.00 s): the trainer drops it (1 of 4 files)',
                           evidence={'line': 2, 'samples': 40000, 'max': 32000.0, 'dropped': 1}, line=1),),
                    family=('TP-SPEECH-OVER-MAX-LEN',)),
        quiet=Quiet(subject=lambda: speech(clips(3), files={"config.json": COQUI})),
    ),
    "TP-SPEECH-OUT-OF-CHARSET": RuleCases(
        fires=Fires(subject=lambda: speech(with_clip({"text": "na\u00efve caf\u00e9; ok"}, n=3, at=1), files={"config.json": COQUI}),
                    hits=(Expect(message="line 2: 3 character(s) not in the model's set: ';éï'",
                           evidence={'line': 2, 'characters': ';éï', 'count': 3}, line=1),),
                    family=('TP-SPEECH-OUT-OF-CHARSET',)),
        quiet=Quiet(subject=lambda: speech(clips(3), files={"config.json": COQUI})),
    ),
    "TP-SPEECH-AUDIO-OUTSIDE": RuleCases(
        fires=Fires(subject=lambda: speech(with_clip({"wav": "../elsewhere.wav"}, n=3, at=1)), hits=(Expect(message="1 of 4 audio path(s) lead outside <tmp> first '../elsewhere.wav' (line 2); they were read",
                           evidence={'outside': 1, 'utterances': 4, 'line': 2}, line=1),),
                    family=('TP-SPEECH-AUDIO-OUTSIDE',)),
        quiet=Quiet(subject=lambda: speech(clips(3))),
    ),
    "TP-SPEECH-EVAL-OVERLAP": RuleCases(
        fires=Fires(subject=lambda: eval_of([3, 7]), hits=(Expect(message='eval line 7 has audio byte-identical to training train_manifest.json line 4',
                           evidence={'line': 7, 'train_line': 4}, line=6),
                     Expect(message='eval line 8 has audio byte-identical to training train_manifest.json line 8',
                           evidence={'line': 8, 'train_line': 8}, line=7),),
                    family=('TP-SPEECH-EVAL-OVERLAP', 'TP-SPEECH-EVAL-OVERLAP', 'TP-SPEECH-EVAL-SPEAKERS')),
        quiet=(Quiet(subject=lambda: eval_of([])),),
        context=with_train,
    ),
    "TP-SPEECH-EVAL-SPEAKERS": RuleCases(
        fires=Fires(subject=lambda: eval_of([], speakers=("s1", "s2", "s9")), hits=(Expect(message='2 of 3 eval speaker(s) also speak in the training data (s1, s2)',
                           evidence={'shared': 2, 'train_speakers': 4}, line=0),),
                    family=('TP-SPEECH-EVAL-SPEAKERS',)),
        quiet=Quiet(subject=lambda: eval_of([], speakers=("s8", "s9"))),
        context=with_train,
    ),
}

CASES.update({
    "TP-TOK-HIGH-OOV": RuleCases(
        fires=Fires(subject=lambda: unknown_share(0.01), hits=(Expect(message='20 of 2,000 pieces are <unk> (1.000%) in 1 transcript(s), first line 1; limit 0.100%',
                           evidence={'unknown': 20, 'pieces': 2000, 'rate': 0.01, 'line': 1}, line=0),),
                    family=('TP-TOK-HIGH-OOV',)),
        quiet=(Quiet(subject=lambda: unknown_share(0.0)),
               Quiet(subject=lambda: speech(clips(3)), skip="no SentencePiece model given")),
        straddles=(straddle("max_oov_rate", 0.001, unknown_share, fire=0.0015, quiet=0.001),),
    ),
    "TP-TOK-HIGH-TPS": RuleCases(
        fires=Fires(subject=lambda: paced(60), hits=(Expect(message='60.0 pieces per second of audio (1,200 pieces over 20.0 s, 20 utterances); fastest line 1 at 60.0/s; limit 50.0',
                           evidence={'tokens_per_second': 60.0, 'pieces': 1200, 'seconds': 20.0, 'line': 1}, line=0),),
                    family=('TP-TOK-HIGH-TPS',)),
        quiet=(Quiet(subject=lambda: paced(15)), Quiet(subject=lambda: speech(clips(3)), skip="no SentencePiece model given")),
        straddles=(straddle("max_tokens_per_s", 50.0, paced, fire=51, quiet=50),),
    ),
})

FAMILY = FamilyCases(cases=CASES, context=context, normalize=normalize)
