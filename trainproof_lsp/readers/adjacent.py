"""What sits beside a log and tells us about its run: checkpoint folders and the model's
config.json, Lightning's hparams.yaml, or a fine-tuning stack's saved arguments (ms-swift's
args.json, torchtune's torchtune_config.yaml) for the number of output classes."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Mapping

from ..core.formats import checkpoint_step
from ..core.formats import run_root as run_root  # where readers and the server have long found it

# Architectures whose output is a class label rather than a token: their loss bound is
# ln(num_labels), not ln(vocab_size).
CLASSIFIER_SUFFIXES = ("ForSequenceClassification", "ForTokenClassification",
                        "ForImageClassification", "ForAudioClassification",
                        "ForMultipleChoice")


def checkpoint_steps(root: Path) -> tuple[int, ...]:
    steps = []
    try:
        for child in root.iterdir():
            step = checkpoint_step(child.name)
            if step is not None and child.is_dir():
                steps.append(step)
    except OSError:
        return ()
    return tuple(sorted(steps))


def classes_from_config(config: Path) -> int | None:
    """vocab_size, or num_labels for classifier architectures, from an HF config.json."""
    try:
        cfg = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return classes_of(cfg) if isinstance(cfg, dict) else None


def classes_of(cfg: Mapping[str, Any]) -> int | None:
    """vocab_size, or num_labels for classifier architectures, from an HF model config's
    values (a config.json's, or those a tracker logged with the run)."""
    archs = cfg.get("architectures")
    archs = archs if isinstance(archs, list) else []
    single_label = cfg.get("problem_type") == "single_label_classification"
    if single_label or any(isinstance(a, str) and a.endswith(CLASSIFIER_SUFFIXES) for a in archs):
        labels = cfg.get("num_labels")
        if labels is None and isinstance(cfg.get("id2label"), dict):
            labels = len(cfg["id2label"])
        if labels is None and single_label:
            labels = 2  # transformers' default num_labels when a config names no labels
        return labels if isinstance(labels, int) and labels >= 2 else None
    vocab = cfg.get("vocab_size")
    if vocab is None and isinstance(cfg.get("text_config"), dict):
        vocab = cfg["text_config"].get("vocab_size")
    return vocab if isinstance(vocab, int) and vocab >= 2 else None


# Lightning writes the module's save_hyperparameters() to hparams.yaml beside metrics.csv:
#   vocab_size: 32000        (or num_classes: 5, nested under a key when hparams are grouped)
# Only integer scalars under these names are read, by line: no YAML library is needed and
# nothing in the file is evaluated.
HPARAMS_KEYS = ("num_classes", "n_classes", "num_labels", "vocab_size", "n_vocab")
_HPARAM_LINE = re.compile(r"^(?P<indent>[ ]*)(?P<key>" + "|".join(HPARAMS_KEYS) + r")[ ]*:[ ]*(?P<value>\d{1,9})[ ]*$")
HPARAMS_MAX_BYTES = 1 << 20  # a hyperparameter file is a few kB; read no more than 1 MiB of it


def classes_from_hparams(hparams: Path) -> int | None:
    """num_classes (or num_labels) else vocab_size from a Lightning hparams.yaml, the
    least indented such line winning (a top-level value over one nested in a sub-config)."""
    try:
        with hparams.open("rb") as fh:
            text = fh.read(HPARAMS_MAX_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return None
    best: tuple[int, int, int] | None = None  # (indent, key rank, value)
    for line in text.splitlines():
        m = _HPARAM_LINE.match(line)
        if m is None:
            continue
        value = int(m["value"])
        if value < 2:
            continue
        # Class counts before vocabulary sizes: a classifier on a text encoder names both.
        rank = 0 if m["key"] in ("num_classes", "n_classes", "num_labels") else 1
        cand = (len(m["indent"]), rank, value)
        if best is None or cand[:2] < best[:2]:
            best = cand
    return best[2] if best else None


def classes_from_swift_args(args: Path) -> int | None:
    """num_labels from ms-swift's args.json (BaseArguments.save_args: its arguments as JSON
    in the output folder) when the run is a classifier (`task_type: seq_cls`); a language
    model's args.json names no vocabulary size, so nothing else is taken from it."""
    try:
        with args.open("rb") as fh:
            cfg = json.loads(fh.read(HPARAMS_MAX_BYTES))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(cfg, dict) or cfg.get("task_type") != "seq_cls":
        return None
    labels = cfg.get("num_labels")
    return labels if isinstance(labels, int) and not isinstance(labels, bool) and labels >= 2 else None


# Per folder, in order: the model's own config first, then what a trainer saved of its
# arguments. torchtune's save_config writes the run's config as torchtune_config.yaml in its
# output_dir (a classifier's `num_classes:`, a model's `vocab_size:` where the config sets
# them): read by line like hparams.yaml. LLaMA-Factory's training_args.yaml names neither.
_CLASS_FILES = (("config.json", classes_from_config), ("hparams.yaml", classes_from_hparams),
                ("args.json", classes_from_swift_args), ("torchtune_config.yaml", classes_from_hparams))


def find_num_classes(log_path: Path) -> tuple[int | None, str | None]:
    """(classes, the file it came from) for the nearest config.json, Lightning hparams.yaml,
    ms-swift args.json or torchtune torchtune_config.yaml, if any (in that order in each
    folder; the log's own folder, then its run root, then the output_dir above a `logs/`)."""
    folders = [log_path.parent, run_root(log_path)]
    if log_path.parent.name == "logs":
        # torchtune's recipes log to ${output_dir}/logs and save their config in output_dir
        folders.append(log_path.parent.parent)
    for folder in folders:
        for name, read in _CLASS_FILES:
            path = folder / name
            if path.is_file():
                n = read(path)
                if n:
                    return n, str(path)
    return None, None
