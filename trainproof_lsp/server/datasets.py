"""Datasets in the editor, through the engine's dataset preflight (trainproof_lsp/preflight.py).

This version of the server runs whatever preflight this installation has; without it,
dataset documents get no diagnostics (and `show server info` says so) — the server never
judges a dataset line itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from ..config import Config
from ..model import Report
from .documents import LineEdit
from .kinds import optional_module

UNAVAILABLE = "dataset checks are not available in this version (no trainproof_lsp.preflight)"


class IncrementalSession(Protocol):
    """A dataset buffer's preflight state that an edit updates in place."""

    def apply(self, edit: LineEdit, lines: list[str]) -> None: ...

    def report(self) -> Report: ...


def preflight():
    module = optional_module("preflight")
    return module if module is not None and hasattr(module, "judge_dataset") else None


def available() -> bool:
    return preflight() is not None


def incremental_available() -> bool:
    return False


def judge_buffer(path: Path, config: Config, data: bytes) -> tuple[Report | None, str]:
    module = preflight()
    if module is None:
        return None, UNAVAILABLE
    return module.judge_dataset(path, config, data=data), ""


def judge_disk(path: Path, config: Config) -> tuple[Report | None, str]:
    module = preflight()
    if module is None:
        return None, UNAVAILABLE
    return module.judge_dataset(path, config), ""


def open_session(path: Path, config: Config, lines: list[str]) -> IncrementalSession | None:
    return None
