"""`python -m trainproof_lsp.server`: the language server without the command line's
imports (the same server as `trainproof-lsp serve`, ~0.1 s sooner to answer)."""

from . import serve

raise SystemExit(serve())
