"""The guardian as a Lightning `Callback`.

    from trainproof_lsp.guardian.lightning import TrainproofCallback

    trainer = L.Trainer(..., callbacks=[TrainproofCallback(policy="stop_on_fail")])

What it records, at the trainer's logging cadence (`log_every_n_steps` optimizer steps,
plus the first step, as HF's `logging_first_step`):
- loss: the `training_step` output (a tensor, or the dict's "loss"); without one, a
  logged metric whose name the metric-log alias table maps onto the loss;
- learning rate: the first optimizer's first parameter group;
- gradient norm, step time, ...: any logged metric the alias table maps onto them;
- eval loss: after each validation run (not the sanity check), a logged metric the
  alias table maps onto the eval loss (`val_loss`, `val/loss`, ...).

The verdict is settled (evaluated over the whole run) at `on_train_end` and in
`on_exception` (a Ctrl-C or an error ending the fit). The stream goes to `trainer.log_dir` (the logger's version folder, beside metrics.csv),
else `trainer.default_root_dir`. With ``policy="stop_on_fail"`` a confirmed FAIL sets
``trainer.should_stop = True`` (Lightning ends the fit after the current step).

Importing this module needs no lightning: `TrainproofCallback` is built on first access
as a subclass of `lightning.pytorch.Callback` (or `pytorch_lightning.Callback` when only
that package is installed).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ..core.config import Config
from ..core.model import EVAL_LOSS, LOSS, LR
from ..readers.metrics import map_columns
from .core import Guardian, Stop, as_number, lazy_callback_class
from .incremental import Schedule

SOURCE = "lightning"


def logged_series(metrics: dict[str, Any], *, exclude: tuple[str, ...] = ()) -> dict[str, Any]:
    """Logged metrics as canonical series -> value, through the metric-log alias table."""
    chosen, _ = map_columns(metrics)
    return {series: metrics[col] for series, col in chosen.items() if series not in exclude}


def _output_loss(outputs: Any) -> Any:
    if isinstance(outputs, dict):
        outputs = outputs.get("loss")
    return outputs if outputs is not None and hasattr(outputs, "item") else None


class _LightningMethods:
    """The callback's behaviour; mixed into a Lightning Callback subclass on first use."""

    def __init__(self, policy: str = "warn", *, config: Config | str | os.PathLike[str] | None = None,
                 confirm_points: int | None = None, schedule: Schedule | None = None,
                 every_n_steps: int | None = None, vocab_size: int | None = None,
                 stream: bool = True, wall_time: bool = False, echo: bool = True) -> None:
        self.guardian = Guardian(source=SOURCE, policy=policy, config=config,
                                 confirm_points=confirm_points, schedule=schedule, stream=stream,
                                 wall_time=wall_time, echo=echo)
        self.every_n_steps = every_n_steps
        self.vocab_size = vocab_size
        self._last_step = -1

    @property
    def stop(self) -> Stop | None:
        """Set when this callback stopped the run: the step, the rule ids and the reason."""
        return self.guardian.stop

    def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
        folder = getattr(trainer, "log_dir", None) or getattr(trainer, "default_root_dir", None)
        self._last_step = -1
        self.guardian.begin(folder, vocab_size=self.vocab_size,
                            vocab_source="TrainproofCallback(vocab_size=...)" if self.vocab_size else None,
                            write=bool(getattr(trainer, "is_global_zero", True)))

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        step = int(getattr(trainer, "global_step", 0))
        every = self.every_n_steps or int(getattr(trainer, "log_every_n_steps", 50) or 50)
        # One point per optimizer step (gradient accumulation calls this more often).
        if step <= self._last_step or not (step % every == 0 or step == 1):
            return
        self._last_step = step
        metrics = {k: as_number(v) for k, v in dict(getattr(trainer, "callback_metrics", {}) or {}).items()}
        point = logged_series(metrics, exclude=(EVAL_LOSS,))
        loss = _output_loss(outputs)
        if loss is not None:
            point[LOSS] = as_number(loss)
        optimizers = getattr(trainer, "optimizers", None) or []
        if optimizers and getattr(optimizers[0], "param_groups", None):
            point[LR] = optimizers[0].param_groups[0].get("lr")
        self._record(trainer, step, point)

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        if getattr(trainer, "sanity_checking", False):
            return
        metrics = {k: as_number(v) for k, v in dict(getattr(trainer, "callback_metrics", {}) or {}).items()}
        point = {k: v for k, v in logged_series(metrics).items() if k == EVAL_LOSS}
        if point:
            self._record(trainer, int(getattr(trainer, "global_step", 0)), point)

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self.guardian.end()  # the whole run's verdict, as `epoch` judges its metrics

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        # Lightning calls this on Ctrl-C (KeyboardInterrupt) and on any error in the fit:
        # the run is over, and its last verdict is settled as at a normal end.
        self.guardian.end()

    def _record(self, trainer: Any, step: int, point: dict[str, Any]) -> None:
        if self.guardian.log(step, point):
            trainer.should_stop = True


def _lightning_callback() -> type:
    try:  # optional dependency: lightning is the user's, imported only when the callback is built
        from lightning.pytorch import Callback
    except ImportError:
        try:  # optional dependency, under its older package name
            from pytorch_lightning import Callback  # type: ignore[assignment]
        except ImportError as e:
            raise ImportError("trainproof_lsp.guardian.lightning.TrainproofCallback needs lightning "
                              f"(pip install lightning): {e}") from None
    return Callback


if TYPE_CHECKING:
    TrainproofCallback = _LightningMethods
else:
    __getattr__ = lazy_callback_class(__name__, _LightningMethods, _lightning_callback,
                                      "trainproof-lsp's live guardian for Lightning (see the module doc).")


__all__ = ["SOURCE", "TrainproofCallback", "logged_series"]
