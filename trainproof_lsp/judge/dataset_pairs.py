"""Which dataset files `doctor` judges as eval files against which training files.

    pair_datasets(files, roots) -> {eval file: (its training files, ...)}

`preflight --eval EVAL` is told which file is the eval file; `doctor` on a folder is not,
so it reads the names, as people name splits:

- in one folder, files whose names differ only in the split word: `train.jsonl` and
  `valid.jsonl`, `train_data.jsonl` and `eval_data.jsonl`, `train-00000-of-00002.jsonl`
  and `test-00000-of-00001.jsonl` (numbers stand for any number: shards of one split);
- folders whose names differ only in the split word, side by side: every file under
  `data/test/` against every file under `data/train/`.

A name is split into words at anything not a letter or digit; it names a split when
exactly one of its words is a split word (`train_eval.jsonl` names none). An eval file
with several training files is judged against all of them (shards of one training set).
A file without a partner is judged alone, as before. Only folders below the folder given
to `doctor` count (a project under `~/test/` is not an eval set), and for a file given by
name, its own folder.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal, Sequence

# The split words. "val" and "dev" are as common as "valid" in exported datasets;
# "test" is held out like an eval file, so training on its rows is the same leak.
TRAIN_WORDS = frozenset({"train", "training"})
EVAL_WORDS = frozenset({"valid", "validation", "val", "eval", "evaluation", "test", "dev"})

Role = Literal["train", "eval"]
_WORD = re.compile(r"[a-z0-9]+")


def split_of(name: str) -> tuple[Role, tuple[str, ...]] | None:
    """("train" | "eval", the name's words with the split word as "*" and each number as
    "#"), or None when the name does not name exactly one split."""
    words = _WORD.findall(name.lower())
    at = [i for i, w in enumerate(words) if w in TRAIN_WORDS or w in EVAL_WORDS]
    if len(at) != 1:
        return None
    role: Role = "train" if words[at[0]] in TRAIN_WORDS else "eval"
    return role, tuple("*" if i == at[0] else "#" if w.isdigit() else w for i, w in enumerate(words))


def _root_of(path: Path, roots: Sequence[Path]) -> Path:
    """The deepest folder given that holds `path`; for a file given by name, its folder's
    parent (so that its own folder's name counts). (The folders of one path are nested, so
    the deepest is the longest.)"""
    holding = [r for r in roots if r in path.parents]
    return max(holding, key=lambda r: len(r.parts)) if holding else path.parent.parent


def _split_folder(path: Path, root: Path) -> tuple[Path, Role, tuple[str, ...]] | None:
    """The nearest folder between `root` and `path` that names a split, with its split."""
    folder = path.parent
    while folder != root and root in folder.parents:
        split = split_of(folder.name)
        if split is not None:
            return folder, split[0], split[1]
        folder = folder.parent
    return None


def pair_datasets(files: Sequence[Path], roots: Sequence[Path] = ()) -> dict[Path, tuple[Path, ...]]:
    """Each eval file that has training files by name, with them (in the order of `files`)."""
    by_name: dict[tuple[Path, tuple[str, ...]], dict[Role, list[Path]]] = {}
    for f in files:
        split = split_of(f.stem)
        if split is not None:
            by_name.setdefault((f.parent, split[1]), {}).setdefault(split[0], []).append(f)
    pairs: dict[Path, tuple[Path, ...]] = {}
    for group in by_name.values():
        for e in group.get("eval", ()):
            if group.get("train"):
                pairs[e] = tuple(group["train"])
    by_folder: dict[tuple[Path, tuple[str, ...]], dict[Role, list[Path]]] = {}
    for f in files:
        if f in pairs:
            continue  # paired in its own folder already
        own = split_of(f.stem)
        found = _split_folder(f, _root_of(f, roots))
        if found is None or (own is not None and own[0] != found[1]):
            continue  # no split folder, or a file that names the other split than its folder
        folder, role, key = found
        by_folder.setdefault((folder.parent, key), {}).setdefault(role, []).append(f)
    for group in by_folder.values():
        for e in group.get("eval", ()):
            if group.get("train"):
                pairs[e] = tuple(group["train"])
    return pairs


__all__ = ["pair_datasets", "split_of", "TRAIN_WORDS", "EVAL_WORDS"]
