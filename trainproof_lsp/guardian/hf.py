"""The guardian as an HF `TrainerCallback`.

    from trainproof_lsp.guardian.hf import TrainproofCallback

    trainer = Trainer(..., callbacks=[TrainproofCallback(policy="stop_on_fail")])

Every `on_log` entry (the dict HF also appends to `state.log_history`) is mapped onto the
canonical series exactly as the `trainer_state.json` reader maps a log_history entry
(the reader's own key table), appended to the growing run and judged on the incremental
schedule (incremental.py), and settled (evaluated over the whole run) at each checkpoint
save and at `on_train_end`. A verdict change is printed and written to
`<output_dir>/trainproof-verdict.jsonl`; with ``policy="stop_on_fail"`` a confirmed FAIL
sets ``control.should_training_stop = True`` (core.py says when a FAIL is confirmed).

Record i of the live run is the i-th `on_log` call, which is `log_history[i]` of the
`trainer_state.json` HF writes: findings' `location.record` means the same in both.

Importing this module needs no transformers: `TrainproofCallback` is built on first
access (module `__getattr__`) as a subclass of `transformers.TrainerCallback`, so the
Trainer sees a real callback with every event it may call.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ..core.config import Config
from ..readers.adjacent import CLASSIFIER_SUFFIXES
from ..readers.metrics import objective_values
from ..readers.trainer_state import SERIES_KEYS as TRAINER_STATE_KEYS
from .core import Guardian, Stop, lazy_callback_class
from .incremental import Schedule

SOURCE = "hf-trainer"


def model_classes(model: Any) -> tuple[int | None, str | None]:
    """(number of output classes, where from) of an HF model: num_labels for classifier
    heads, else vocab_size — as the reader takes them from a config.json."""
    config = getattr(model, "config", None)
    if config is None:
        return None, None
    name = type(model).__name__
    archs = getattr(config, "architectures", None) or []
    if name.endswith(CLASSIFIER_SUFFIXES) or any(str(a).endswith(CLASSIFIER_SUFFIXES) for a in archs):
        n, key = getattr(config, "num_labels", None), "num_labels"
    else:
        n, key = getattr(config, "vocab_size", None), "vocab_size"
        if n is None and getattr(config, "text_config", None) is not None:
            n, key = getattr(config.text_config, "vocab_size", None), "text_config.vocab_size"
    if isinstance(n, int) and not isinstance(n, bool) and n >= 2:
        return n, f"model.config.{key}"
    return None, None


def entry_metrics(logs: dict[str, Any]) -> dict[str, Any]:
    """An on_log dict as canonical series -> value, by the trainer_state reader's table, with
    the reward, margin, KL... series of a TRL DPO/GRPO trainer under theirs (so the live
    verdict applies the preference and RL rules, as `epoch` on its trainer_state.json does)."""
    out = {series: logs[key] for series, key in TRAINER_STATE_KEYS if key in logs}
    out.update(objective_values(logs))
    return out


class _HFMethods:
    """The callback's behaviour; mixed into a TrainerCallback subclass on first use."""

    def __init__(self, policy: str = "warn", *, config: Config | str | os.PathLike[str] | None = None,
                 confirm_points: int | None = None, schedule: Schedule | None = None,
                 stream: bool = True, wall_time: bool = False, echo: bool = True) -> None:
        self.guardian = Guardian(source=SOURCE, policy=policy, config=config,
                                 confirm_points=confirm_points, schedule=schedule, stream=stream,
                                 wall_time=wall_time, echo=echo)

    @property
    def stop(self) -> Stop | None:
        """Set when this callback stopped the run: the step, the rule ids and the reason."""
        return self.guardian.stop

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        vocab, source = model_classes(kwargs.get("model"))
        self.guardian.begin(getattr(args, "output_dir", None), vocab_size=vocab, vocab_source=source,
                            write=bool(getattr(state, "is_world_process_zero", True)))
        return control

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None,
               **kwargs: Any) -> Any:
        # Every rank gets the same (gathered) logs, so every rank takes the same decision.
        if self.guardian.log(getattr(state, "global_step", None), entry_metrics(logs or {})):
            control.should_training_stop = True
        return control

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        # A checkpoint: trainer_state.json now holds the log so far, and the verdict is
        # settled to `epoch`'s on it (one full evaluation per checkpoint).
        self.guardian.settle(getattr(state, "global_step", None))
        return control

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        self.guardian.end()
        return control


def _trainer_callback() -> type:
    try:  # optional dependency: transformers is the user's, imported only when the callback is built
        from transformers import TrainerCallback
    except ImportError as e:
        raise ImportError("trainproof_lsp.guardian.hf.TrainproofCallback needs transformers "
                          f"(pip install transformers): {e}") from None
    return TrainerCallback


if TYPE_CHECKING:
    TrainproofCallback = _HFMethods
else:
    __getattr__ = lazy_callback_class(__name__, _HFMethods, _trainer_callback,
                                      "trainproof-lsp's live guardian for the HF Trainer (see the module doc).")


__all__ = ["SOURCE", "TrainproofCallback", "entry_metrics", "model_classes"]
