"""The language server (`trainproof-lsp serve`): pygls 2 over stdio.

Imported only by `serve`: the engine, the CLI and training processes never load pygls.
Split by LSP method — documents (text sync), analysis (scheduling), diagnostics (push and
pull), hover, lenses, commands, settings, watching — and built by `app.build_server()`.
"""

from __future__ import annotations


def serve(argv: list[str] | None = None) -> int:
    """Run the server on stdin/stdout until the client exits it."""
    try:
        from .app import build_server
    except ImportError as e:  # pygls/lsprotocol are base dependencies: a broken install
        import sys

        print(f"trainproof-lsp serve cannot import its language-server dependencies ({e}); "
              "reinstall trainproof-lsp with pip (it brings pygls and lsprotocol)", file=sys.stderr)
        return 2
    build_server().start_io()
    return 0


__all__ = ["serve"]
