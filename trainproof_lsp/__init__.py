"""trainproof-lsp: a deterministic linter for ML training runs."""

__version__ = "0.1.0"
TOOL_NAME = "trainproof-lsp"
