"""The `trainproof-lsp` command. `serve` starts the language server before the command
line, the rule registry and the engine are imported: an editor waits on that start
(the server loads the engine in a worker once `initialize` is answered)."""

from __future__ import annotations

import sys
from typing import Sequence

# vscode-languageclient appends --stdio for TransportKind.stdio; stdio is the only transport.
_SERVE_FLAGS = frozenset({"--stdio"})


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["serve"] and set(args[1:]) <= _SERVE_FLAGS:
        from .server import serve

        return serve()
    from .cli import main as cli_main

    return cli_main(args)
