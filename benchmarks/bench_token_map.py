"""Token-map throughput and memory, with a peer measured in the same run.

    python benchmarks/bench_token_map.py [--rows 1000000] [--peer-rows 20000] [--format chat|text] [--keep]

(`--rows 20000` for a run of a minute or two.)

Generates a chat JSONL file (default 1M rows, two to four turns each) and a byte-level BPE
tokenizer folder with a chat template that marks the assistant turn with
{% generation %} (both made here, in a temporary folder deleted afterwards), then runs
each contender in its own subprocess and reports rows/s and peak RSS (ru_maxrss):

- trainproof-lsp `map_tokens` under assistant-only loss and max length 256, with one
  core (RAYON_NUM_THREADS=1, the process pinned to one CPU) and with all cores;
- the peer: transformers' `apply_chat_template(tokenize=True, return_dict=True,
  return_assistant_tokens_mask=True)` row by row — what TRL's SFTTrainer runs per row to
  build the same masks — on the first `--peer-rows` rows (its rate is per row, so a
  sample measures it; it is not run on the whole file).

Rendering the chat template happens in the map's bounded child processes (one per core),
while the map's own thread masks and counts the batch before (see readers/token_map.py).
Each contender's peak RSS is its process's; "+ child" is the largest render child's (the
map runs one per core). "CPU us/row" is the timed part's CPU, the process's and its children's:
on a loaded machine it is the steadier measure; the rates and their ratios come from the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LEN = 256

WORDS = ("the of and to in is was for on that with as by at from it this be are an or have had not but what all "
         "were when we there can been one do did will more no if out so said who up about into than them could "
         "time only new some these two may then first any like model loss step learning rate batch token data "
         "gradient epoch checkpoint training eval").split()

TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
            "{% if m['role'] == 'assistant' %}{% generation %}{{ m['content'] }}<|im_end|>{% endgeneration %}"
            "{% else %}{{ m['content'] }}<|im_end|>{% endif %}\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def _sentence(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi))).capitalize() + "."


def generate(path: Path, rows: int, seed: int = 1, fmt: str = "chat") -> None:
    """Chat rows (2 or 4 turns), or with fmt "text" the same words as one text per row."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(rows):
            turns = []
            for k in range(rng.choice((2, 2, 4))):
                role = "user" if k % 2 == 0 else "assistant"
                turns.append({"role": role, "content": " ".join(_sentence(rng, 4, 30) for _ in range(rng.randint(1, 4)))})
            row = {"messages": turns} if fmt == "chat" else {"text": "\n".join(t["content"] for t in turns)}
            f.write(json.dumps(row) + "\n")


def make_tokenizer(folder: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    rng = random.Random(2)
    corpus = [_sentence(rng, 5, 40) for _ in range(5000)]
    trainer = trainers.BpeTrainer(vocab_size=2000, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer=trainer)
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
        "chat_template": TEMPLATE}), encoding="utf-8")


# --- the contenders, each run as `python bench_token_map.py --child NAME FILE TOKDIR ROWS` ---------


def child_map(path: str, tokdir: str, rows: int) -> dict[str, float]:
    sys.path.insert(0, str(ROOT))
    from trainproof_lsp.readers import token_map as tm

    tok = tm.load_run_tokenizer(tokdir)
    cpu, start = _cpu(), time.perf_counter()
    text = "text" in Path(path).name
    m = tm.map_tokens(path, tok, tm.Masking(max_len=MAX_LEN, assistant_only=not text), lines=rows, records=rows)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "rows": m.rows, "trained": float(sum(m.trained)), "cpu_seconds": _cpu() - cpu}


def _cpu() -> float:
    """CPU seconds of this process and its reaped children (the map's render children
    are reaped before map_tokens returns): the timed part is the difference."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def child_peer(path: str, tokdir: str, rows: int) -> dict[str, float]:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokdir)
    with open(path, encoding="utf-8") as f:
        rows_read = [json.loads(next(f)) for _ in range(rows)]
    cpu, start = _cpu(), time.perf_counter()
    trained = 0
    for row in rows_read:
        if "text" in row:  # what TRL runs per text row: the tokenizer's call on text + EOS
            trained += min(len(tok(text=row["text"] + tok.eos_token)["input_ids"]), MAX_LEN)
            continue
        out = tok.apply_chat_template(row["messages"], tokenize=True, return_dict=True,
                                      return_assistant_tokens_mask=True)
        trained += sum(out["assistant_masks"][:MAX_LEN])
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "rows": rows, "trained": float(trained), "cpu_seconds": _cpu() - cpu}


def run_child(name: str, path: Path, tokdir: Path, rows: int, *, one_core: bool) -> dict[str, float]:
    env = dict(os.environ)
    env["TOKENIZERS_PARALLELISM"] = "false" if one_core else "true"
    if one_core:
        env["RAYON_NUM_THREADS"] = "1"
    else:
        env.pop("RAYON_NUM_THREADS", None)
    cmd = [sys.executable, __file__, "--child", name, str(path), str(tokdir), str(rows)]
    if one_core:
        cmd.append("--pin")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{name} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--peer-rows", type=int, default=20_000)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--format", choices=("chat", "text"), default="chat",
                    help="chat rows (rendered with the template, assistant-only loss) or text rows")
    ap.add_argument("--child", nargs=4, metavar=("NAME", "FILE", "TOKDIR", "ROWS"))
    ap.add_argument("--pin", action="store_true")
    args = ap.parse_args()
    if args.child:
        name, path, tokdir, rows = args.child
        if args.pin and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        result = (child_map if name == "map" else child_peer)(path, tokdir, int(rows))
        own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        result["peak_rss_mib"] = own.ru_maxrss / 1024  # KiB on Linux
        result["child_rss_mib"] = kids.ru_maxrss / 1024  # the largest render child (0: none)
        print(json.dumps(result))
        return
    work = Path(tempfile.mkdtemp(prefix="bench-token-map-"))
    try:
        data, tokdir = work / f"{args.format}.jsonl", work / "tok"
        t = time.perf_counter()
        generate(data, args.rows, fmt=args.format)
        make_tokenizer(tokdir)
        size = data.stat().st_size
        loss = "assistant-only loss" if args.format == "chat" else "every token"
        print(f"{args.rows:,} {args.format} rows, {size / 1e6:.0f} MB, generated in {time.perf_counter() - t:.1f} s; "
              f"max length {MAX_LEN}, {loss}; {os.cpu_count()} core(s)")
        one = run_child("map", data, tokdir, args.rows, one_core=True)
        every = run_child("map", data, tokdir, args.rows, one_core=False)
        peer_rows = min(args.peer_rows, args.rows)
        peer = run_child("peer", data, tokdir, peer_rows, one_core=True)
        rate = {k: v["rows"] / v["seconds"] for k, v in (("one", one), ("all", every), ("peer", peer))}
        cpu = {k: v["cpu_seconds"] / v["rows"] * 1e6 for k, v in (("one", one), ("all", every), ("peer", peer))}
        if peer_rows < args.rows:
            print(f"the peer is measured on the first {peer_rows:,} rows of the same file (its cost is per row; "
                  f"--peer-rows sets how many)")
        print(f"{'contender':<52} {'rows/s':>9} {'seconds':>9} {'CPU us/row':>11} {'peak RSS MiB':>13} {'+ child':>8}")
        for label, r, k in (("trainproof-lsp map_tokens, one core", one, "one"),
                            ("trainproof-lsp map_tokens, all cores", every, "all"),
                            (f"transformers {'apply_chat_template' if args.format == 'chat' else 'tokenizer'} per row "
                             f"({peer_rows:,} rows)", peer, "peer")):
            print(f"{label:<52} {rate[k]:>9,.0f} {r['seconds']:>9.1f} {cpu[k]:>11.0f} {r['peak_rss_mib']:>13.0f} "
                  f"{r['child_rss_mib']:>8.0f}")
        print(f"ratios (rows/s): map one core / peer = {rate['one'] / rate['peer']:.2f}x; "
              f"map all cores / peer = {rate['all'] / rate['peer']:.2f}x; all / one core = {rate['all'] / rate['one']:.2f}x")
        print(f"CPU per row (process and its render children): peer / map one core = {cpu['peer'] / cpu['one']:.2f}x")
        if one["trained"] != every["trained"]:
            raise SystemExit("one core and all cores disagree on the trained tokens")
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
