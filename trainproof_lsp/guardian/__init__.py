"""The live guardian: judge a run while it trains, with the same registry as the CLI.

- `guardian.hf.TrainproofCallback` — an HF `TrainerCallback`;
- `guardian.lightning.TrainproofCallback` — a Lightning `Callback`;
- `trainproof-lsp watch LOG_OR_DIR` (`guardian.watch`) — tails a growing log;
- `guardian.incremental` — growing columns and the evaluation schedule they share;
- `guardian.stream` — the `trainproof-verdict.jsonl` verdict stream (docs/guardian.md).

Nothing here imports torch, transformers or lightning at import time: the framework
classes are built on first use (see hf.py and lightning.py).
"""

from .stream import STREAM_NAME, STREAM_SCHEMA_VERSION

__all__ = ["STREAM_NAME", "STREAM_SCHEMA_VERSION"]
