"""Launch scripts read as text: the `--flag value` list a shell script passes to a training
script, and how many processes the launcher starts -> `Launch`.

A script whose config comes from `HfArgumentParser` gets its values on the command line;
the command line usually lives in a `.sh` beside it:

    export CUDA_VISIBLE_DEVICES=0,1
    LR=2e-4
    torchrun --nproc_per_node 2 train.py \\
        --num_train_epochs 3 --learning_rate $LR \\
        --save_steps=500 --bf16

Read: the first command of a `.sh` in the script's folder (or the one above) that names
the script's file; backslash continuations joined; each `--name value` / `--name=value`
/ bare `--flag` (true) after the script's name with the span of its value; `$NAME` /
`${NAME}` resolved through a `NAME=value` assigned once in the file; the process count
of `torchrun --nproc_per_node`, `accelerate launch --num_processes`, `deepspeed
--num_gpus`. Nothing is run; only regular files of at most MAX_BYTES are read.
"""

from __future__ import annotations

import re
import stat
from dataclasses import dataclass
from pathlib import Path

from ..core.model import Span

# A launch script is a few dozen lines; anything far larger is not one.
MAX_BYTES = 256 * 1024
# Folders to look in hold few scripts; more than this many .sh files are not read.
MAX_FILES = 40
_LAUNCH_COUNTS = ("--nproc_per_node", "--nproc-per-node", "--num_processes", "--num-processes", "--num_gpus",
                  "--num-gpus")
_TOKEN = re.compile(r"""(?:[^\s'"\\]|\\.)+|'[^']*'|"(?:[^"\\]|\\.)*\"""")
_ASSIGN = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(\S*)\s*$")
_VAR = re.compile(r"^\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Flag:
    name: str  # without the dashes
    known: bool
    value: bool | int | float | str | None
    text: str  # the value as written (or the flag, for a bare one)
    span: Span  # the value (the flag for a bare one)


@dataclass(frozen=True, slots=True, kw_only=True)
class Launch:
    path: str  # the launch script
    flags: tuple[Flag, ...]
    processes: Flag | None = None  # the launcher's process count


def _literal(text: str) -> bool | int | float | str:
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _tokens(lines: list[str], first: int) -> tuple[list[tuple[str, Span]], int]:
    """The tokens of the command starting at line `first` (continuations joined), with
    their spans; and the line after it."""
    out: list[tuple[str, Span]] = []
    line = first
    while line < len(lines):
        text = lines[line].split(" #", 1)[0] if not lines[line].lstrip().startswith("#") else ""
        cont = text.rstrip().endswith("\\")
        body = text.rstrip()[:-1] if cont else text
        for m in _TOKEN.finditer(body):
            out.append((m.group(0), Span(line, m.start(), line, m.end())))
        line += 1
        if not cont:
            break
    return out, line


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def _flag(name: str, raw: str, span: Span, env: dict[str, str | None]) -> Flag:
    text = _unquote(raw)
    var = _VAR.match(text)
    if var:
        resolved = env.get(var.group(1) or var.group(2))
        if resolved is None:
            return Flag(name=name, known=False, value=None, text=raw, span=span)
        text = _unquote(resolved)
    if "$" in text or "`" in text:
        return Flag(name=name, known=False, value=None, text=raw, span=span)
    return Flag(name=name, known=True, value=_literal(text), text=raw, span=span)


def parse_launch(path: str, text: str, script_name: str) -> Launch | None:
    """The flags the first command naming `script_name` passes it; None if none does."""
    lines = text.split("\n")
    env: dict[str, str | None] = {}
    for text_line in lines:
        m = _ASSIGN.match(text_line)
        if m:
            env[m.group(1)] = None if m.group(1) in env else m.group(2)  # assigned twice: unknown
    line = 0
    while line < len(lines):
        tokens, after = _tokens(lines, line)
        names = [Path(_unquote(t)).name for t, _ in tokens]
        if script_name not in names:
            line = after
            continue
        at = names.index(script_name)
        processes: Flag | None = None
        for i, (tok, span) in enumerate(tokens[:at]):
            key, eq, val = tok.partition("=")
            if key in _LAUNCH_COUNTS:
                if eq:
                    processes = _flag(key.lstrip("-"), val, Span(span.start_line, span.start_char + len(key) + 1,
                                                                  span.end_line, span.end_char), env)
                elif i + 1 < at:
                    processes = _flag(key.lstrip("-"), tokens[i + 1][0], tokens[i + 1][1], env)
        flags: list[Flag] = []
        rest = tokens[at + 1:]
        i = 0
        while i < len(rest):
            tok, span = rest[i]
            if not tok.startswith("--") or len(tok) == 2:
                i += 1
                continue
            key, eq, val = tok[2:].partition("=")
            if eq:
                flags.append(_flag(key, val, Span(span.start_line, span.start_char + len(key) + 3, span.end_line,
                                                  span.end_char), env))
                i += 1
            elif i + 1 < len(rest) and not rest[i + 1][0].startswith("--"):
                flags.append(_flag(key, rest[i + 1][0], rest[i + 1][1], env))
                i += 2
            else:  # a bare --flag: a boolean set to true
                flags.append(Flag(name=key, known=True, value=True, text=tok, span=span))
                i += 1
        return Launch(path=path, flags=tuple(flags), processes=processes)
    return None


def find_launch(script: Path) -> Launch | None:
    """The launch script beside `script` (or in the folder above) that runs it."""
    for folder in (script.parent, script.parent.parent):
        try:
            candidates = sorted(p for p in folder.iterdir() if p.suffix == ".sh")[:MAX_FILES]
        except OSError:
            continue
        for candidate in candidates:
            try:
                st = candidate.stat()
                if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_BYTES:
                    continue
                text = candidate.read_bytes()[:MAX_BYTES].decode("utf-8", "replace")
            except OSError:
                continue
            if script.name not in text:
                continue
            found = parse_launch(str(candidate), text, script.name)
            if found is not None:
                return found
    return None
