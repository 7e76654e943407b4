"""Speech datasets: each layout read with every utterance at its line, and each speech rule
firing (exact line and numbers) and quiet. Fixtures are written here with soundfile and the
standard `wave` module."""

from __future__ import annotations

import json
import wave
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")
sf = pytest.importorskip("soundfile")

from trainproof_lsp.core.config import Config  # noqa: E402
from trainproof_lsp.core.model import Level, Verdict  # noqa: E402
from trainproof_lsp.judge.speech import judge_speech, judge_speech_paths  # noqa: E402
from trainproof_lsp.readers import audio as audio_reader  # noqa: E402
from trainproof_lsp.readers.audio import read_audio, scan_audio  # noqa: E402
from trainproof_lsp.readers.detect import detect  # noqa: E402
from trainproof_lsp.readers.speech import list_speech  # noqa: E402

RATE = 22050


def voice(seconds: float, rate: int = RATE, amp: float = 0.3, seed: int = 0) -> "np.ndarray":
    """A voiced-sounding signal: a tone with noise, never silent for long, never clipped."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate
    x = amp * np.sin(2 * np.pi * 180 * t) + 0.05 * rng.standard_normal(len(t))
    return np.clip(x, -0.6, 0.6)


def text_for(seconds: float) -> str:
    # ~14 characters a second, as read speech.
    base = "the quick brown fox jumps over the lazy dog and runs away again "
    return (base * 4)[: int(14 * seconds)].strip()


def corpus(folder: Path, n: int = 24) -> list[dict]:
    """n healthy utterances (1.0 to ~2.1 s) under folder/wavs, as manifest records."""
    (folder / "wavs").mkdir(parents=True, exist_ok=True)
    records = []
    for i in range(n):
        d = round(1.0 + 0.05 * i, 3)
        sf.write(folder / "wavs" / f"u{i}.wav", voice(d, seed=i), RATE, subtype="PCM_16")
        records.append({"audio_filepath": f"wavs/u{i}.wav", "text": text_for(d), "duration": d})
    return records


def write_manifest(folder: Path, records: list[dict], name: str = "manifest.jsonl") -> Path:
    p = folder / name
    p.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return p


def judged(path: Path, **kw):
    return judge_speech(path, Config(), jobs=1, **kw)


def hits(report, rule_id: str) -> list[tuple[int, dict]]:
    return [(f.location.span.start_line if f.location.span else -1, dict(f.evidence))
            for f in report.findings if f.id == rule_id]


def ran(report, rule_id: str) -> bool:
    return next(c for c in report.checks if c.group == rule_id).ran


# --- a healthy corpus is quiet ----------------------------------------------------------------

def test_healthy_manifest_passes_with_every_audio_check_run(tmp_path):
    report = judged(write_manifest(tmp_path, corpus(tmp_path)))
    assert report.verdict is Verdict.PASS, [f.message for f in report.findings]
    assert report.artefact.kind == "speech" and report.artefact.format == "nemo-manifest"
    for rid in ("TP-DATA-MISSING-AUDIO", "TP-DATA-INCONSISTENT-SR", "TP-DATA-CLIPPING", "TP-DATA-SILENCE",
                "TP-SPEECH-DURATION-OUTLIER", "TP-DATA-CHAR-RATE-OUTLIER", "TP-SPEECH-DURATION-MISMATCH"):
        assert ran(report, rid), rid


# --- one rule each: firing at its line, with its numbers --------------------------------------------

def test_missing_audio_is_a_fail_at_its_line_resolved_against_the_manifest_folder(tmp_path, monkeypatch):
    recs = corpus(tmp_path)
    recs[5]["audio_filepath"] = "wavs/gone.wav"
    monkeypatch.chdir(tmp_path.parent)  # not the manifest's folder: paths must still resolve
    report = judged(write_manifest(tmp_path, recs))
    assert hits(report, "TP-DATA-MISSING-AUDIO") == [(5, {"line": 6, "missing": 1, "utterances": 24})]
    assert report.verdict is Verdict.FAIL


def test_truncated_wav_header_and_data_are_unreadable_audio(tmp_path):
    recs = corpus(tmp_path)
    whole = (tmp_path / "wavs" / "u3.wav").read_bytes()
    (tmp_path / "wavs" / "u3.wav").write_bytes(whole[:30])  # cut inside the fmt chunk
    (tmp_path / "wavs" / "u4.wav").write_bytes((tmp_path / "wavs" / "u4.wav").read_bytes()[:2000])
    report = judged(write_manifest(tmp_path, recs))
    got = {line: ev["kind"] for line, ev in hits(report, "TP-DATA-UNREADABLE-AUDIO")}
    assert got == {3: "truncated", 4: "truncated"}
    msg = next(f.message for f in report.findings if f.id == "TP-DATA-UNREADABLE-AUDIO" and f.location.span.start_line == 4)
    assert "data chunk declares" in msg and "the file holds 1,956" in msg


def test_8khz_among_22khz_is_inconsistent_sample_rate_with_counts(tmp_path):
    recs = corpus(tmp_path)
    sf.write(tmp_path / "wavs" / "u7.wav", voice(1.35, rate=8000), 8000, subtype="PCM_16")
    report = judged(write_manifest(tmp_path, recs))
    assert hits(report, "TP-DATA-INCONSISTENT-SR") == [(7, {"line": 8, "sample_rate": 8000, "majority_sample_rate": 22050,
                                                             "majority": 23, "files": 24, "these": 1})]
    assert hits(judged(write_manifest(tmp_path, corpus(tmp_path))), "TP-DATA-INCONSISTENT-SR") == []


def test_stereo_among_mono_is_inconsistent_channels_written_with_wave(tmp_path):
    recs = corpus(tmp_path)
    frames = (np.stack([voice(1.45), voice(1.45)], 1) * 32767).astype("<i2").tobytes()
    with wave.open(str(tmp_path / "wavs" / "u9.wav"), "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(frames)
    report = judged(write_manifest(tmp_path, recs))
    assert [(line, ev["channels"], ev["majority"]) for line, ev in hits(report, "TP-DATA-INCONSISTENT-CHANNELS")] \
        == [(9, 2, 23)]


def test_empty_transcript_is_a_warn_at_its_line(tmp_path):
    recs = corpus(tmp_path)
    recs[2]["text"] = "   "
    report = judged(write_manifest(tmp_path, recs))
    assert hits(report, "TP-DATA-EMPTY-TRANSCRIPT") == [(2, {"line": 3, "empty": 1, "utterances": 24})]


def test_a_transcript_of_another_clip_is_a_chars_per_second_outlier(tmp_path):
    recs = corpus(tmp_path)
    recs[0]["text"] = text_for(2.1) * 3  # 1.0 s of audio with ~87 characters
    report = judged(write_manifest(tmp_path, recs))
    found = hits(report, "TP-DATA-CHAR-RATE-OUTLIER")
    assert [line for line, _ in found] == [0]
    assert found[0][1]["chars_per_second"] == 87.0 and found[0][1]["z"] > 5


def test_duration_outlier_against_the_corpus_spread(tmp_path):
    recs = corpus(tmp_path)
    sf.write(tmp_path / "wavs" / "u11.wav", voice(30.0, seed=11), RATE, subtype="PCM_16")
    recs[11]["duration"], recs[11]["text"] = 30.0, text_for(30.0)
    report = judged(write_manifest(tmp_path, recs))
    found = hits(report, "TP-SPEECH-DURATION-OUTLIER")
    assert [(line, ev["duration"]) for line, ev in found] == [(11, 30.0)]
    assert hits(report, "TP-DATA-CHAR-RATE-OUTLIER") == []  # its transcript fits its length


def test_byte_identical_audio_sits_on_the_later_line(tmp_path):
    recs = corpus(tmp_path)
    recs[6]["audio_filepath"] = "wavs/u1.wav"
    recs[6]["duration"] = recs[1]["duration"]
    report = judged(write_manifest(tmp_path, recs))
    dupes = [f for f in report.findings if f.id == "TP-DATA-DUPLICATES"]
    assert [(f.location.span.start_line, f.evidence["first_line"]) for f in dupes] == [(6, 2)]
    assert dupes[0].related[0].location.span.start_line == 1


def test_clipped_audio_is_flagged_with_its_count_and_a_normalised_peak_is_not(tmp_path):
    recs = corpus(tmp_path)
    x = voice(1.2) * 0
    x[100:110] = 1.0  # ten samples at the rail
    x[200] = -1.0
    x[300:20000] = 0.3 * np.sin(np.arange(19700) / 5)
    sf.write(tmp_path / "wavs" / "u4.wav", x, RATE, subtype="FLOAT")
    y = voice(1.25)
    y[50] = 0.9995  # one sample at full scale: a peak-normalised file
    sf.write(tmp_path / "wavs" / "u5.wav", y, RATE, subtype="FLOAT")
    report = judged(write_manifest(tmp_path, recs))
    assert hits(report, "TP-DATA-CLIPPING") == [(4, {"line": 5, "clipped": 11, "peak": 1.0})]


def test_long_silence_says_where_it_starts(tmp_path):
    recs = corpus(tmp_path)
    x = voice(4.0, seed=3)
    x[int(0.5 * RATE):int(3.0 * RATE)] = 0.0
    sf.write(tmp_path / "wavs" / "u3.wav", x, RATE, subtype="PCM_16")
    recs[3]["duration"], recs[3]["text"] = 4.0, text_for(4.0)
    report = judged(write_manifest(tmp_path, recs))
    found = hits(report, "TP-DATA-SILENCE")
    assert [(line, ev["silence_s"], ev["start_s"]) for line, ev in found] == [(3, 2.5, 0.5)]


def test_a_silent_file_is_flagged_whole(tmp_path):
    recs = corpus(tmp_path)
    sf.write(tmp_path / "wavs" / "u2.wav", np.zeros(int(2.5 * RATE)), RATE, subtype="PCM_16")
    recs[2]["duration"] = 2.5
    report = judged(write_manifest(tmp_path, recs))
    msg = [f.message for f in report.findings if f.id == "TP-DATA-SILENCE"]
    assert msg == ["line 3: 2.50 s of silence (the whole file is silent; 2.50 s long); limit 2.0 s"]


def test_digits_and_dates_are_unnormalised_text(tmp_path):
    recs = corpus(tmp_path)
    recs[1]["text"] = "born on 12/03/1999 in the north"
    recs[8]["text"] = "in 1887 the fox ran"
    recs[9]["text"] = "ten percent of twelve"
    report = judged(write_manifest(tmp_path, recs))
    assert [(line, ev["kind"], ev["token"]) for line, ev in hits(report, "TP-DATA-UNNORMALIZED")] == \
        [(1, "date", "12/03/1999"), (8, "number", "1887")]


def test_mixed_scripts_name_the_scripts(tmp_path):
    recs = corpus(tmp_path)
    recs[3]["text"] = "the fox s\u0430id hello"  # a Cyrillic a in a Latin word
    recs[4]["text"] = "日本語のテキスト"  # kanji and kana: one language
    report = judged(write_manifest(tmp_path, recs))
    assert hits(report, "TP-DATA-MIXED-SCRIPTS") == [(3, {"line": 4, "scripts": "LATIN+CYRILLIC"})]


def test_manifest_duration_disagreeing_with_the_file(tmp_path):
    recs = corpus(tmp_path)
    recs[10]["duration"] = 9.0
    recs[12]["duration"] = recs[12]["duration"] + 0.05  # rounding: within tolerance
    recs[13]["duration"], recs[13]["offset"] = 0.4, 0.2  # a segment: not compared
    report = judged(write_manifest(tmp_path, recs))
    assert hits(report, "TP-SPEECH-DURATION-MISMATCH") == [(10, {"line": 11, "declared": 9.0, "actual": 1.5})]


def test_bad_manifest_line_is_a_fail_and_the_rest_is_judged(tmp_path):
    recs = corpus(tmp_path)
    p = write_manifest(tmp_path, recs)
    p.write_text(p.read_text() + "{oops\n" + json.dumps({"text": "no audio"}) + "\n")
    report = judged(p)
    assert [line for line, _ in hits(report, "TP-SPEECH-BAD-RECORD")] == [24, 25]
    assert ran(report, "TP-DATA-CLIPPING")


# --- layouts ------------------------------------------------------------------------------------

def _xtts(tmp_path: Path, n: int = 24) -> tuple[Path, Path]:
    recs = corpus(tmp_path, n)
    rows = ["audio_file|text|speaker_name"] + [f"{r['audio_filepath']}|{r['text']}|spk{i % 2}"
                                               for i, r in enumerate(recs[:20])]
    (tmp_path / "metadata_train.csv").write_text("\n".join(rows) + "\n")
    ev = ["audio_file|text|speaker_name"] + [f"{r['audio_filepath']}|{r['text']}|spk{i % 2}"
                                             for i, r in enumerate(recs[20:], 20)]
    ev.append(f"wavs/u3.wav|{recs[3]['text']}|spk1")  # a training utterance again
    (tmp_path / "metadata_eval.csv").write_text("\n".join(ev) + "\n")
    return tmp_path / "metadata_train.csv", tmp_path / "metadata_eval.csv"


def test_xtts_metadata_eval_is_paired_with_train_and_a_leaked_utterance_is_found(tmp_path):
    train, ev = _xtts(tmp_path)
    assert detect(train, train.read_bytes()).kind == "speech"
    reports = {Path(r.artefact.path).name: r for r in judge_speech_paths([train, ev], Config(), jobs=1)}
    assert reports["metadata_train.csv"].artefact.format == "xtts"
    leak = [f for f in reports["metadata_eval.csv"].findings if f.id == "TP-SPEECH-EVAL-OVERLAP"]
    assert [(f.location.span.start_line, f.evidence["train_line"]) for f in leak] == [(5, 5)]
    spk = [f for f in reports["metadata_eval.csv"].findings if f.id == "TP-SPEECH-EVAL-SPEAKERS"]
    assert [f.evidence["shared"] for f in spk] == [2] and spk[0].level is Level.INFO
    assert not ran(reports["metadata_train.csv"], "TP-SPEECH-EVAL-OVERLAP")


def test_xtts_config_max_wav_length_and_coqui_characters(tmp_path):
    train, _ = _xtts(tmp_path)
    lines = (train.read_text().splitlines())
    lines[3] = lines[3].split("|")[0] + "|the fox, naïve!|spk0"
    train.write_text("\n".join(lines) + "\n")
    (tmp_path / "config.json").write_text(json.dumps({
        "audio": {"sample_rate": 22050},
        "model_args": {"max_wav_length": 44100},
        "characters": {"characters": "abcdefghijklmnopqrstuvwxyz", "punctuations": ",.!?"}}, indent=2))
    report = judged(train)
    over = hits(report, "TP-SPEECH-OVER-MAX-LEN")
    # 1.0 + 0.05 i seconds: i = 0..19; over 2.0 s is none of them, at 44100 samples = 2.0 s
    assert over == []
    (tmp_path / "config.json").write_text(json.dumps({
        "audio": {"sample_rate": 22050}, "max_audio_len": 33075,
        "characters": {"characters": "abcdefghijklmnopqrstuvwxyz", "punctuations": ",.!?"}}, indent=2))
    report = judged(train)
    over = hits(report, "TP-SPEECH-OVER-MAX-LEN")
    assert [line for line, _ in over] == list(range(12, 21)) and over[0][1]["dropped"] == 9
    chars = hits(report, "TP-SPEECH-OUT-OF-CHARSET")
    assert chars == [(3, {"line": 4, "characters": "ï", "count": 1})]


def test_ljspeech_metadata_reads_the_normalised_column_and_wavs_folder(tmp_path):
    recs = corpus(tmp_path)
    rows = [f"{Path(r['audio_filepath']).stem}|Chapter {i}|{r['text']}" for i, r in enumerate(recs)]
    meta = tmp_path / "metadata.csv"
    meta.write_text("\n".join(rows) + "\n")
    listing = list_speech(meta)
    assert listing.layout == "ljspeech" and listing.utterances[0].audio == str(tmp_path / "wavs" / "u0.wav")
    report = judged(meta)
    assert report.verdict is Verdict.PASS  # "Chapter 3" in column 2 is not what is trained on


def test_fish_speech_lab_files_beside_audio(tmp_path):
    spk = tmp_path / "alice"
    spk.mkdir()
    for i in range(3):
        sf.write(spk / f"a{i}.wav", voice(1.0 + i * 0.1), RATE, subtype="PCM_16")
        (spk / f"a{i}.lab").write_text(text_for(1.0 + i * 0.1) if i != 1 else "in 2024")
    sf.write(spk / "a9.wav", voice(1.0, seed=9), RATE, subtype="PCM_16")  # no transcript
    report = judged(tmp_path)
    assert report.artefact.format == "fish-lab"
    assert [(Path(f.location.path).name, f.id) for f in report.findings if f.level is not Level.INFO] == \
        [("a1.lab", "TP-DATA-UNNORMALIZED"), ("a9.wav", "TP-DATA-EMPTY-TRANSCRIPT")]


def test_plain_folder_with_txt_transcripts_and_a_stray_transcript(tmp_path):
    for i in range(2):
        sf.write(tmp_path / f"c{i}.flac", voice(1.0), RATE)
        (tmp_path / f"c{i}.txt").write_text(text_for(1.0))
    (tmp_path / "c5.txt").write_text("no audio for me")
    report = judged(tmp_path)
    assert report.artefact.format == "audio-folder"
    assert [Path(f.location.path).name for f in report.findings if f.id == "TP-DATA-MISSING-AUDIO"] == ["c5.txt"]


def test_vctk_layout_finds_mic1_flac_per_speaker(tmp_path):
    for spk in ("p225", "p226"):
        (tmp_path / "txt" / spk).mkdir(parents=True)
        (tmp_path / "wav48_silence_trimmed" / spk).mkdir(parents=True)
        for u in ("001", "002"):
            (tmp_path / "txt" / spk / f"{spk}_{u}.txt").write_text(text_for(1.2))
            sf.write(tmp_path / "wav48_silence_trimmed" / spk / f"{spk}_{u}_mic1.flac",
                     voice(1.2, seed=int(u) + 10 * int(spk[1:])), 48000)
    listing = list_speech(tmp_path)
    assert listing.layout == "vctk" and [u.speaker for u in listing.utterances] == ["p225", "p225", "p226", "p226"]
    assert judged(tmp_path).verdict is Verdict.PASS


# --- paths, caps, missing packages ----------------------------------------------------------------

def test_audio_outside_the_manifest_folder_is_followed_and_said(tmp_path):
    inner = tmp_path / "data"
    recs = corpus(inner)
    recs[0]["audio_filepath"] = str(inner / "wavs" / "u0.wav")  # absolute: inside, fine
    outside = tmp_path / "elsewhere.wav"
    sf.write(outside, voice(1.0), RATE, subtype="PCM_16")
    recs[1]["audio_filepath"] = "../elsewhere.wav"
    report = judged(write_manifest(inner, recs))
    assert hits(report, "TP-SPEECH-AUDIO-OUTSIDE") == [(1, {"outside": 1, "utterances": 24, "line": 2})]


def test_a_fifo_named_as_audio_is_never_opened(tmp_path):
    import os

    recs = corpus(tmp_path)
    os.remove(tmp_path / "wavs" / "u2.wav")
    os.mkfifo(tmp_path / "wavs" / "u2.wav")
    report = judged(write_manifest(tmp_path, recs))
    assert [(line, ev["kind"]) for line, ev in hits(report, "TP-DATA-UNREADABLE-AUDIO")] == [(2, "not-regular")]


def test_without_soundfile_sample_checks_are_not_checked_and_wav_headers_still_read(tmp_path, monkeypatch):
    recs = corpus(tmp_path)
    monkeypatch.setattr(audio_reader, "soundfile_missing", lambda: "soundfile is not installed")
    from trainproof_lsp.readers import speech as speech_reader
    monkeypatch.setattr(speech_reader, "soundfile_missing", lambda: "soundfile is not installed")
    sf.write(tmp_path / "wavs" / "u7.wav", voice(1.35, rate=8000), 8000, subtype="PCM_16")
    report = judged(write_manifest(tmp_path, recs))
    assert report.verdict is Verdict.FAIL  # the header check still ran
    assert [line for line, _ in hits(report, "TP-DATA-INCONSISTENT-SR")] == [7]
    nc = [f.message for f in report.findings if f.id == "TP-NOT-CHECKED"]
    assert nc == ["TP-DATA-CLIPPING and TP-DATA-SILENCE not checked: soundfile is not installed"]
    assert not ran(report, "TP-DATA-CLIPPING")


def test_audio_facts_are_the_same_on_two_processes(tmp_path):
    corpus(tmp_path, 140)
    paths = sorted(str(p) for p in (tmp_path / "wavs").iterdir())
    seen: list[int] = []
    one = scan_audio(paths, jobs=1)
    two = scan_audio(paths, jobs=2, progress=lambda done, total: seen.append(done))
    assert one == two and seen[-1] == 140


def test_wav_header_of_a_file_cut_in_its_riff_header():
    facts = read_audio("/nonexistent/x.wav")
    assert facts.problem == "missing"


# --- SentencePiece against the transcripts -----------------------------------------------------------

def _spm(tmp_path: Path, sentences: list[str]) -> Path:
    spm = pytest.importorskip("sentencepiece")
    src = tmp_path / "spm.txt"
    src.write_text("\n".join(sentences * 20) + "\n")
    spm.SentencePieceTrainer.train(input=str(src), model_prefix=str(tmp_path / "tokenizer"), vocab_size=40,
                                   character_coverage=1.0, model_type="bpe", minloglevel=2)
    return tmp_path / "tokenizer.model"


def test_sentencepiece_oov_rate_and_tokens_per_second(tmp_path):
    recs = corpus(tmp_path)
    _spm(tmp_path, [r["text"] for r in recs])
    report = judged(write_manifest(tmp_path, recs))
    assert ran(report, "TP-TOK-HIGH-OOV") and hits(report, "TP-TOK-HIGH-OOV") == []
    recs[4]["text"] = "ÆØÅ þorn ðe"  # characters the model never saw
    report = judged(write_manifest(tmp_path, recs))
    oov = hits(report, "TP-TOK-HIGH-OOV")
    assert [(line, ev["line"]) for line, ev in oov] == [(4, 5)] and oov[0][1]["unknown"] == 3  # one <unk> per run of unknown characters


def test_asked_for_tokenizer_that_is_no_model_is_not_checked(tmp_path):
    recs = corpus(tmp_path)
    bogus = tmp_path / "bogus.model"
    bogus.write_bytes(b"not a model")
    report = judge_speech(write_manifest(tmp_path, recs), Config(), jobs=1, tokenizer=bogus)
    assert [f.message.split(":")[0] for f in report.findings if f.id == "TP-NOT-CHECKED"] == \
        ["tokenizer checks not run"]
    assert report.verdict is Verdict.NOT_CHECKED


def _char_spm(tmp_path: Path, sentences: list[str]):
    """A character-level SentencePiece model (one piece a character, `▁` for spaces)."""
    spm = pytest.importorskip("sentencepiece")
    src = tmp_path / "chars.txt"
    src.write_text("\n".join(sentences * 5) + "\n")
    spm.SentencePieceTrainer.train(input=str(src), model_prefix=str(tmp_path / "tokenizer"), model_type="char",
                                   vocab_size=len(set("".join(sentences))) + 4, character_coverage=1.0,
                                   minloglevel=2)
    return spm.SentencePieceProcessor(model_file=str(tmp_path / "tokenizer.model"))


def _fast_text(seconds: float) -> str:
    # ~60 characters a second: every utterance alike, so no speaking-rate outlier.
    base = "the quick brown fox jumps over the lazy dog and runs away again "
    return (base * 12)[: int(60 * seconds)].strip()


def test_tokens_per_second_fires_for_a_character_tokenizer_on_fast_text_and_is_quiet_at_speech_rate(tmp_path):
    recs = corpus(tmp_path)
    fast = [dict(r, text=_fast_text(r["duration"])) for r in recs]
    sp = _char_spm(tmp_path, [r["text"] for r in fast])
    # Quiet: ~14 characters (pieces) a second, the rate of read speech.
    report = judged(write_manifest(tmp_path, recs))
    assert ran(report, "TP-TOK-HIGH-TPS") and hits(report, "TP-TOK-HIGH-TPS") == []
    assert hits(report, "TP-TOK-HIGH-OOV") == []
    slow = sum(len(sp.encode(r["text"])) for r in recs) / sum(r["duration"] for r in recs)
    assert 10 < slow < 20
    # Firing: ~60 pieces a second against the limit of 50.
    report = judged(write_manifest(tmp_path, fast))
    assert hits(report, "TP-DATA-CHAR-RATE-OUTLIER") == []
    pieces = [len(sp.encode(r["text"])) for r in fast]
    durations = [sf.info(str(tmp_path / r["audio_filepath"])).duration for r in fast]  # the files' own
    seconds = sum(durations)
    fastest = max(range(len(fast)), key=lambda i: pieces[i] / durations[i])
    got = hits(report, "TP-TOK-HIGH-TPS")
    assert [(line, ev["line"]) for line, ev in got] == [(fastest, fastest + 1)]
    ev = got[0][1]
    assert ev["pieces"] == sum(pieces) and ev["seconds"] == round(seconds, 3)
    assert ev["tokens_per_second"] == round(sum(pieces) / seconds, 3) and ev["tokens_per_second"] > 50
    finding = next(f for f in report.findings if f.id == "TP-TOK-HIGH-TPS")
    assert finding.level is Level.WARN
