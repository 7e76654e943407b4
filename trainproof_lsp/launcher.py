"""The `trainproof-lsp` command. `serve` starts the language server before the command
line, the rule registry and the engine are imported: an editor waits on that start
(the server loads the engine in a worker once `initialize` is answered)."""

from __future__ import annotations

import os
import sys
from typing import Sequence

# vscode-languageclient appends --stdio for TransportKind.stdio; stdio is the only transport.
_SERVE_FLAGS = frozenset({"--stdio"})


def forget_working_folder() -> None:
    """`python -m trainproof_lsp` put the working folder first on sys.path. The editors start
    the server elsewhere (docs/security.md), but a hand-started server or command in a
    cloned repository must not import that repository's `json.py` later, when a module is
    first needed: the entry goes. (Python 3.11's -P leaves it out in the first place.)"""
    if getattr(sys.flags, "safe_path", False) or not sys.path:
        return
    try:
        cwd = os.getcwd()
    except OSError:  # the folder was removed
        cwd = None
    if sys.path[0] in ("", cwd):
        del sys.path[0]


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:  # a process of its own (not a call from Python code)
        forget_working_folder()
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["serve"] and set(args[1:]) <= _SERVE_FLAGS:
        from .server import serve  # start-up time: the server answers before the engine is loaded

        return serve()
    try:
        from .cli import main as cli_main  # start-up time: `serve` above never loads the command line's imports
    except KeyboardInterrupt:  # Ctrl-C while the command line loads: cli.main's own answer, no traceback
        print("trainproof-lsp: interrupted", file=sys.stderr)
        return 2
    return cli_main(args)
