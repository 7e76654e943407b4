"""What an open document is. The engine's detection (detect.py) decides; the server adds
only what an editor needs beyond it: a Python file that imports a training framework (or
is a configured entrypoint) gets the script lenses even when the static lint has nothing
to judge in it, and model/tokenizer configs get their folder's lenses and checks.

    kind      judged from the buffer by        lenses
    metrics   engine.judge_file                verdict, doctor, compare, baseline
    dataset   preflight (incremental session)  preflight summary, check on disk
    script    engine.judge_file (static lint)  check environment, doctor <output dir>
    config    server/bundle.py (disk: tokenizer  doctor <folder>
              and bundle rules of its folder)
    speech    engine.judge_file (judge/speech.py:  hover: the line's audio facts (server/speech.py)
              the listing, its audio on one core)
    binary    from disk only (doctor, watched files)
    lfs-pointer engine.judge_file: a Git LFS pointer in the file's place, one NOT-CHECKED
    other     nothing
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..core.formats import by_name

MODEL_CONFIGS = frozenset(by_name("model-config").names)
# Judged with their folder (preflight.judge_tokenizer, from disk); the chat template's
# findings land on whichever file holds it (tokenizer_config.json or chat_template.jinja).
TOKENIZER_FILES = frozenset(by_name("tokenizer").names)
_SCRIPT = by_name("python").suffixes


@dataclass(frozen=True, slots=True)
class DocKind:
    kind: str  # metrics | dataset | speech | script | config | binary | lfs-pointer | other
    format: str
    reason: str = ""
    lint: bool = True  # the engine has something to judge in the buffer


def kind_of(path: Path, head: bytes, entrypoints: tuple[str, ...] = ()) -> DocKind:
    from ..readers.detect import HEAD_BYTES, detect, imports_training_framework  # loaded on first use

    head = head[:HEAD_BYTES]
    if path.name in MODEL_CONFIGS or path.name in TOKENIZER_FILES:
        # Judged with their folder: tokenizer files by the tokenizer rules, every settings
        # file by the bundle rules when its folder holds a bundle (server/bundle.py).
        return DocKind("config", path.name)
    detected = detect(path, head)
    if detected.kind in ("metrics", "dataset", "script", "speech"):
        return DocKind(detected.kind, detected.format, detected.reason)
    if detected.kind == "lfs-pointer":  # not downloaded: said as the command line says it, whatever the name
        return DocKind(detected.kind, detected.format, detected.reason)
    if detected.kind in ("tfevents", "checkpoint"):
        return DocKind("binary", detected.format, detected.reason)
    if path.suffix in _SCRIPT:
        configured = any(path.match(e) or str(path).endswith(e.lstrip("./")) for e in entrypoints)
        if configured or imports_training_framework(head):
            return DocKind("script", "python", detected.reason, lint=False)
    return DocKind("other", detected.format, detected.reason, lint=False)

