"""Speech dataset check, side by side with the published trainproof's speech pack.

    python benchmarks/bench_speech.py [--utterances 20000] [--keep DIR] [--only ours|peer]

Writes a NeMo manifest of short WAVs (0.2-1 s at 16 kHz, written with soundfile) into a
temporary folder, with a few broken utterances among them (a missing file, an 8 kHz file,
a stereo file, a clipped one, a long silence, a truncated file, digits, a transcript of
another clip, a byte-identical copy), then checks it on ONE core with each tool, each in a
fresh process: `trainproof data MANIFEST` (trainproof 0.22's speech pack; it needs
`ttsproof`) and trainproof-lsp's speech judge (`jobs=1`). Prints wall time, the time
ratio, findings (and distinct rule IDs) on both sides, and peak memory (max RSS).
Timing is printed, never asserted here or in unit tests.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RATE = 16000


def make_corpus(folder: Path, n: int) -> Path:
    import numpy as np
    import soundfile as sf

    rng = np.random.default_rng(0)
    wavs = folder / "wavs"
    wavs.mkdir(parents=True, exist_ok=True)
    words = "the quick brown fox jumps over the lazy dog while seven swans swim south".split()
    lines = []
    for i in range(n):
        seconds = 0.2 + 0.8 * ((i * 7919) % 1000) / 1000
        t = np.arange(int(seconds * RATE)) / RATE
        x = 0.3 * np.sin(2 * np.pi * (120 + i % 200) * t) + 0.03 * rng.standard_normal(len(t))
        channels = 1
        rate = RATE
        if i == 11:
            x = np.clip(x * 6, -1, 1)  # clipped
        if i == 12:
            x = np.concatenate([x, np.zeros(int(2.5 * RATE))])  # a long silence
        if i == 13:
            rate = 8000  # another sample rate
        if i == 14:
            x, channels = np.stack([x, x], 1), 2  # stereo
        sf.write(wavs / f"u{i}.wav", x, rate, subtype="PCM_16")
        text = " ".join(words[(i + k) % len(words)] for k in range(max(1, int(seconds * 2.6))))
        lines.append({"audio_filepath": f"wavs/u{i}.wav", "text": text, "duration": round(len(x) / rate, 3)})
    lines[15]["text"] = "in 1887 the fox ran"  # digits
    lines[16]["text"] = " ".join(words) * 3  # a transcript of another, longer clip
    lines[17]["audio_filepath"] = "wavs/gone.wav"  # missing
    data = (wavs / "u18.wav").read_bytes()
    (wavs / "u18.wav").write_bytes(data[: len(data) // 2])  # truncated
    (wavs / "u19.wav").write_bytes((wavs / "u20.wav").read_bytes())  # byte-identical
    manifest = folder / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    return manifest


def side(which: str, manifest: str) -> None:
    """In a child process: one tool on the manifest, one core; prints JSON."""
    start = time.perf_counter()
    if which == "peer":
        from trainproof.speech.data import check_data

        out = check_data(manifest)
        findings = [f for f in out["findings"] if f.get("level") not in ("PASS", "INFO")]
        ids = sorted({f["id"] for f in findings})
    else:
        from trainproof_lsp.core.config import Config
        from trainproof_lsp.judge.speech import judge_speech

        report = judge_speech(Path(manifest), Config(), jobs=1)
        findings = [f for f in report.findings if f.level.value != "INFO"]
        ids = sorted({f.id for f in findings})
    seconds = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(json.dumps({"seconds": seconds, "findings": len(findings), "rules": ids, "rss_mib": rss}))


def run_side(which: str, manifest: Path) -> dict:
    out = subprocess.run([sys.executable, __file__, "--side", which, str(manifest)], capture_output=True,
                         text=True, check=True, env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--utterances", type=int, default=20000)
    ap.add_argument("--keep", type=Path, help="write the corpus here and keep it (a corpus of the same size "
                                              "already there is reused)")
    ap.add_argument("--only", choices=("ours", "peer"), help="run one side only (profiling)")
    ap.add_argument("--side", nargs=2, metavar=("TOOL", "MANIFEST"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.side:
        side(*args.side)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        t0 = time.perf_counter()
        manifest = folder / "manifest.jsonl"
        if not (args.keep and manifest.is_file()
                and manifest.read_bytes().count(b"\n") == args.utterances):
            manifest = make_corpus(folder, args.utterances)
            print(f"corpus: {args.utterances:,} utterances written in {time.perf_counter() - t0:.1f} s ({folder})")
        if args.only:
            print(json.dumps(run_side(args.only, manifest)))
            return 0
        peer = run_side("peer", manifest)
        ours = run_side("ours", manifest)
    print(f"{'':24}{'trainproof 0.22':>18}{'trainproof-lsp':>18}")
    print(f"{'seconds (1 core)':24}{peer['seconds']:>18.2f}{ours['seconds']:>18.2f}")
    print(f"{'findings (not INFO)':24}{peer['findings']:>18}{ours['findings']:>18}")
    print(f"{'rule IDs fired':24}{len(peer['rules']):>18}{len(ours['rules']):>18}")
    print(f"{'peak RSS (MiB)':24}{peer['rss_mib']:>18.1f}{ours['rss_mib']:>18.1f}")
    print(f"time ratio (trainproof / trainproof-lsp): {peer['seconds'] / ours['seconds']:.2f}x")
    print(f"peer's IDs: {', '.join(peer['rules'])}")
    print(f"ours: {', '.join(ours['rules'])}")
    missing = sorted(set(peer["rules"]) - set(ours["rules"]))
    print(f"peer IDs we did not fire: {', '.join(missing) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
