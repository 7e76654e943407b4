"""What sits beside a log and tells us about its run: checkpoint folders and the model's
config.json (for the number of output classes)."""

from __future__ import annotations

import json
from pathlib import Path

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
    if not isinstance(cfg, dict):
        return None
    archs = cfg.get("architectures") or []
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


def find_num_classes(log_path: Path) -> tuple[int | None, str | None]:
    """(classes, the config.json it came from) for the nearest config.json, if any."""
    for folder in (log_path.parent, run_root(log_path)):
        config = folder / "config.json"
        if config.is_file():
            n = classes_from_config(config)
            if n:
                return n, str(config)
    return None, None
