"""What sits beside a log and tells us about its run: checkpoint folders and the model's
config.json or Lightning's hparams.yaml (for the number of output classes)."""

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


def find_num_classes(log_path: Path) -> tuple[int | None, str | None]:
    """(classes, the file it came from) for the nearest config.json or Lightning
    hparams.yaml, if any (config.json first in each folder)."""
    for folder in (log_path.parent, run_root(log_path)):
        config = folder / "config.json"
        if config.is_file():
            n = classes_from_config(config)
            if n:
                return n, str(config)
        hparams = folder / "hparams.yaml"
        if hparams.is_file():
            n = classes_from_hparams(hparams)
            if n:
                return n, str(hparams)
    return None, None
