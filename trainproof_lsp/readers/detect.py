"""The one place that decides what a file is, from its name and its first bytes."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from ..core.formats import by_name, formats_of, sniff_checkpoint
from .coqui import looks_like_coqui
from .lfs import FORMAT as LFS_FORMAT, KIND as LFS_KIND, pointer_reason, pointer_size
from .metrics import ALIASES, STEP_ALIASES
from .script import CONFIG_CLASSES
from .speech import listing_layout as speech_layout
from .stdout_log import looks_like_stdout_log
from .stacks import LLAMAFACTORY_STEP_KEY, SWIFT_STEP_KEY
from .torchtune import looks_like_torchtune
from .wandb_offline import FORMAT as WANDB_FORMAT, looks_like_wandb

HEAD_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class Detected:
    kind: str  # "metrics" | "dataset" | "speech" | "tfevents" | "checkpoint" | "script" | "resident" | "lfs-pointer" | "other"
    format: str
    reason: str = ""  # for kinds this version does not judge: why


_LOSS_KEYS = frozenset(a for k in ("loss", "eval_loss") for a in ALIASES[k])
_DATASET_KEYS = frozenset({"text", "messages", "conversations", "prompt", "completion",
                           "instruction", "chosen", "rejected", "input", "output", "content"})
# By name, from the table of formats (core/formats.py); every pickle is walked, never loaded.
# (A sharded index and a tar are told by more than their last suffix: below.)
_CHECKPOINT_SUFFIXES = {s: f.name for f in formats_of("checkpoint") for s in f.suffixes
                        if f.name not in ("sharded-index", "tar")}
_TFEVENTS = by_name("tfevents")
_TRAINER_STATE = by_name("hf-trainer-state").names
_SHARDED_INDEX = by_name("sharded-index").suffixes
_CSV = by_name("metrics-csv").suffixes
_JSONL = by_name("metrics-jsonl").suffixes
_SCRIPT = by_name("python").suffixes
_COQUI = by_name("coqui-log").suffixes
_STDOUT_SUFFIXES = by_name("stdout-log").suffixes
_STDOUT_NAMES = re.compile(r"nohup\.out|slurm-[^/]*\.out")
_NO_TRAINING_LINES = ("captured output without training-log lines (HF Trainer dicts, Megatron `iteration N/M`, "
                      "nanoGPT `iter N:`, DeepSpeed OVERFLOW) in its first 64 KiB; not a run")

# Ordinary residents of an HF output_dir that are not logs and need no judgement here.
# (training_args.bin is a pickle: it is walked like a checkpoint, never unpickled.)
RESIDENTS = {
    "config.json": "model config; read for vocab_size/num_labels",
    "generation_config.json": "generation settings; not a log",
    "adapter_config.json": "PEFT adapter settings; not a log",
    "special_tokens_map.json": "tokenizer file; not a log",
    "tokenizer_config.json": "tokenizer file; not a log",
    "tokenizer.json": "tokenizer file; not a log",
    "vocab.json": "tokenizer file; not a log",
    "added_tokens.json": "tokenizer file; not a log",
    "preprocessor_config.json": "processor settings; not a log",
    "hparams.yaml": "Lightning hyper-parameters; not a log",
    "run_meta.json": "run notes; not a log",
    "all_results.json": "the Trainer's summary of the run (save_metrics); its log is judged",
    "train_results.json": "the Trainer's summary of the run (save_metrics); its log is judged",
    "eval_results.json": "the Trainer's summary of the run (save_metrics); its log is judged",
}
# (HfArgumentParser: a config whose values are its dataclass defaults and the launch flags)
_TRAINING_CONFIG = re.compile(rb"\b(?:" + b"|".join(c.encode() for c in (*CONFIG_CLASSES, "HfArgumentParser"))
                              + rb")\s*\(")


def _first_keys(head: bytes) -> set[str]:
    keys: set[str] = set()
    for m in re.finditer(rb'"((?:[^"\\]|\\.){1,80})"\s*:', head[:8192]):
        keys.add(m.group(1).decode("utf-8", "replace").lower())
    return keys


def _mostly_text(head: bytes) -> bool:
    """The first record of a JSONL head holds more text values than numbers: a row of
    data, not a metric record (metric logs write numbers; a timestamp or a phase name
    beside them is a minority)."""
    first = next((ln for ln in head.split(b"\n", 8)[:8] if ln.strip()), b"")
    try:
        row = json.loads(first)
    except (ValueError, RecursionError):
        return False
    if not isinstance(row, dict):
        return False
    text = sum(isinstance(v, (str, list, dict)) for v in row.values())
    numbers = sum(isinstance(v, (int, float)) and not isinstance(v, bool) for v in row.values())
    return text > numbers


# `import torch`, `from transformers import Trainer`, `import lightning.pytorch as pl`...
_FRAMEWORK_IMPORT = re.compile(
    rb"^[ \t]*(?:from|import)[ \t]+(?:transformers|trl|peft|accelerate|lightning|pytorch_lightning|"
    rb"torch|keras|tensorflow|axolotl|TTS|deepspeed|unsloth)\b", re.M)


def imports_training_framework(head: bytes) -> bool:
    """A Python file's head imports a training framework: a training script for the
    editor's lenses (environment check, doctor on its output folder), even when it has no
    TrainingArguments-family call for the static lint."""
    return _FRAMEWORK_IMPORT.search(head) is not None


def detect(path: Path, head: bytes) -> Detected:
    name = path.name
    lower = name.lower()
    suffix = path.suffix.lower()
    lfs = pointer_size(head)  # a Git LFS pointer, whatever its name: the file is not there
    if lfs is not None:
        return Detected(LFS_KIND, LFS_FORMAT, pointer_reason(lfs))
    if _TFEVENTS.matches(name):
        return Detected("metrics", "tfevents")
    if suffix == ".wandb" or looks_like_wandb(head):  # a W&B offline run's record log
        return Detected("metrics", WANDB_FORMAT)
    if name in RESIDENTS:
        return Detected("resident", name, RESIDENTS[name])
    layout = speech_layout(path, head)  # a NeMo manifest, LJSpeech/XTTS metadata: readers/speech.py
    if layout is not None:
        return Detected("speech", layout, "speech dataset (audio with transcripts)")
    if name in _TRAINER_STATE or (suffix == ".json" and b'"log_history"' in head):
        return Detected("metrics", "hf-trainer-state")
    if lower.endswith(_SHARDED_INDEX):
        return Detected("checkpoint", "sharded-index")
    if suffix in _CHECKPOINT_SUFFIXES:
        return Detected("checkpoint", _CHECKPOINT_SUFFIXES[suffix])
    if suffix == ".tar" and (lower.endswith(".pth.tar") or lower.endswith(".pt.tar")
                             or sniff_checkpoint(head) is not None):
        # `model_best.pth.tar` or `checkpoint.tar` (a torch.save under a tar name), or a tar
        # archive (torch's legacy tar format, whatever its first member)
        return Detected("checkpoint", "tar")
    sniffed = sniff_checkpoint(head)  # torch.load and pickle.load do not look at a name
    if sniffed is not None:
        return Detected("checkpoint", sniffed)
    if suffix in _SCRIPT:
        # A training script has a TrainingArguments-family config to lint; any other
        # Python file has nothing for the static lint to judge.
        if _TRAINING_CONFIG.search(head):
            return Detected("script", "python")
        return Detected("other", "python", "Python file without a TrainingArguments/SFTConfig-family "
                                           "call; nothing for the static lint to judge")
    if suffix in _CSV:
        return Detected("metrics", "metrics-csv")
    if suffix in _JSONL or (suffix == ".json" and head.lstrip()[:1] == b"["):
        keys = _first_keys(head)
        fmt = "metrics-jsonl" if suffix != ".json" else "metrics-json"
        if suffix != ".json" and LLAMAFACTORY_STEP_KEY in keys:  # LLaMA-Factory's trainer_log.jsonl
            return Detected("metrics", "llamafactory-log")
        if suffix != ".json" and SWIFT_STEP_KEY in keys:  # ms-swift's logging.jsonl
            return Detected("metrics", "swift-log")
        if keys & _LOSS_KEYS or (keys & set(STEP_ALIASES) and not keys & _DATASET_KEYS):
            return Detected("metrics", fmt)
        if keys & _DATASET_KEYS:
            return Detected("dataset", "dataset-jsonl" if suffix != ".json" else "dataset-json",
                            "training dataset (preflight checks)")
        if suffix != ".json" and _mostly_text(head):
            # Rows in the user's own shape (`question`/`answer`...): a dataset, judged as one
            # (a field mapping, `--field text=KEY`, names its training fields).
            return Detected("dataset", "dataset-jsonl", "training dataset (preflight checks)")
        # Unknown records: read as metrics so the report names the columns it saw.
        return Detected("metrics", fmt)
    if suffix == ".json":
        return Detected("other", "json", "JSON without log_history or records; not a log")
    if suffix in _COQUI and looks_like_coqui(head):
        return Detected("metrics", "coqui-log")
    if suffix in _COQUI and looks_like_torchtune(head):
        return Detected("metrics", "torchtune-log")
    # nohup.out / slurm-<job>.out are named for what they are: their first log line can come
    # after 64 KiB of start-up output, so the reader decides (none at all: NOT-CHECKED).
    if _STDOUT_NAMES.fullmatch(name) or ((suffix in _COQUI or suffix in _STDOUT_SUFFIXES)
                                         and looks_like_stdout_log(head)):
        return Detected("metrics", "stdout-log")
    if suffix == ".log" or suffix in _STDOUT_SUFFIXES:
        return Detected("other", suffix.lstrip("."), _NO_TRAINING_LINES)
    return Detected("other", suffix.lstrip(".") or "file", "")
