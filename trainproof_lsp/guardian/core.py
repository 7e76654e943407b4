"""What the training callbacks share: metrics in, verdicts out, and the stop decision.

The HF and Lightning adapters (hf.py, lightning.py) only translate their framework's
events into `Guardian.begin / log / end` calls and carry out a stop; everything else —
the growing run, the evaluation schedule (incremental.py), the verdict stream
(stream.py), the policy — lives here, free of any framework import.

Policy
------
- ``"warn"`` (default): print each verdict change and write it to the stream; never
  touch the run.
- ``"stop_on_fail"``: the same, and stop the run once a FAIL verdict has *stood* for
  `confirm_points` more logged records. A FAIL is published at once; the stop waits
  because one registry rule decides on points that are not logged yet: a loss spike is
  "unrecovered" when the next `recover_within` points stay high, so on a live prefix a
  spike one point old would read as unrecovered. The default `confirm_points` is that
  rule's own `recover_within` (10, under the run's configuration): after that many
  points the rule has seen everything it will ever look at. Rules can be turned off or
  tuned for the guardian as for the CLI, with `[tool.trainproof]` (`select`, `ignore`,
  `limits`).

A guardian never breaks the training it watches: an error inside it (a bad config, an
unexpected value) is reported once as a NOT-CHECKED verdict and the guardian stands down
(TRAINPROOF_DEBUG=1 raises instead).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, TextIO

from ..core.config import Config, ConfigError
from ..judge.settings import discover, load_file
from ..judge.engine import not_checked
from ..core.model import Level, Report, RunMeta, Verdict
from ..readers.common import to_float
from ..rules.spikes import LOSS_SPIKE_UNRECOVERED_RULE
from .incremental import IncrementalJudge, LiveRun, Schedule, verdict_change
from .stream import STREAM_NAME, StreamWriter, stop_event, verdict_event

POLICIES = ("warn", "stop_on_fail")
PREFIX = "trainproof:"


@dataclass(frozen=True, kw_only=True)
class Stop:
    """Why and when a guardian stopped its run."""

    step: int | None
    rule_ids: tuple[str, ...]
    reason: str


def resolve_config(config: Config | str | os.PathLike[str] | None) -> Config:
    """A Config as given; a TOML file's; or the nearest pyproject.toml's from the cwd."""
    if isinstance(config, Config):
        return config
    if config is None:
        return discover(Path.cwd())
    return load_file(Path(config))


def default_confirm(config: Config) -> int:
    """The unrecovered-spike rule's look-ahead under this configuration (see module doc)."""
    return int(config.limits_for(LOSS_SPIKE_UNRECOVERED_RULE).recover_within)


def fail_ids(report: Report) -> tuple[str, ...]:
    return tuple(sorted({f.id for f in report.findings if f.level is Level.FAIL}))


def change_lines(report: Report, step: int | None, previous: str | None) -> list[str]:
    """The lines a verdict change prints: the verdict, then one per FAIL/WARN finding."""
    if previous == report.verdict.value:
        was = " (its FAIL/WARN rules changed)"
    else:
        was = f" (was {previous})" if previous else ""
    lines = [f"step {step}: {report.verdict.value}{was}"]
    if report.verdict is Verdict.NOT_CHECKED and report.reason:
        lines.append(f"  NOT-CHECKED {report.reason}")
    for f in report.findings:
        if f.level in (Level.FAIL, Level.WARN):
            lines.append(f"  {f.level.value} {f.id} {f.message}")
    return lines


class Guardian:
    """One run's live judge. Call `begin` once, `log` per logged entry, `end` at the end;
    `log` returns True when the run should stop."""

    def __init__(self, *, source: str, policy: str = "warn",
                 config: Config | str | os.PathLike[str] | None = None,
                 confirm_points: int | None = None, schedule: Schedule | None = None,
                 stream: bool = True, wall_time: bool = False, echo: bool = True,
                 out: TextIO | None = None) -> None:
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {', '.join(POLICIES)}, not {policy!r}")
        self.source = source
        self.policy = policy
        self._config_arg = config
        self._confirm_arg = confirm_points
        self.schedule = schedule or Schedule()
        self.write_stream = stream
        self.wall_time = wall_time
        self.echo = echo
        self.out = out
        self.stop: Stop | None = None
        self.report: Report | None = None
        self.stream: StreamWriter | None = None
        self.live: LiveRun | None = None
        self.judge: IncrementalJudge | None = None
        self.path = ""
        self._key: tuple[Any, ...] | None = None
        self._fail_since: tuple[int, int | None] | None = None  # (records, step) at the FAIL
        self._broken = False
        self._writer = True
        self.confirm = 0

    # --- lifecycle -------------------------------------------------------------------
    def begin(self, run_dir: str | os.PathLike[str] | None, *, vocab_size: int | None = None,
              vocab_source: str | None = None, write: bool = True) -> None:
        """A new run in `run_dir` (the stream goes there). `write=False` on processes
        other than the main one of a distributed run: they judge (so every rank takes
        the same stop decision) but do not print or write."""
        self._writer = write
        self.path = str(run_dir) if run_dir is not None else "."
        self.stop = None
        self.report = None
        self._key = None
        self._fail_since = None
        self._broken = False
        if self.write_stream and write and run_dir is not None:
            self.stream = StreamWriter(Path(run_dir) / STREAM_NAME, wall_time=self.wall_time)
            try:
                self.stream.start()
            except OSError as e:
                self.stream = None
                self._say(f"cannot write {Path(run_dir) / STREAM_NAME} ({e.strerror or e}); "
                          "verdicts are printed only")
        try:
            config = resolve_config(self._config_arg)
        except ConfigError as e:
            self._stand_down(f"configuration: {e}", step=None)
            return
        self.confirm = self._confirm_arg if self._confirm_arg is not None else default_confirm(config)
        meta = RunMeta(vocab_size=vocab_size, vocab_source=vocab_source) if vocab_size else RunMeta()
        self.live = LiveRun(path=self.path, format=f"live-{self.source}", meta=meta)
        self.judge = IncrementalJudge(config, self.schedule)

    def log(self, step: int | None, metrics: Mapping[str, Any]) -> bool:
        """One logged entry: canonical series name -> value (see model.SERIES_NAMES).
        Returns True when the run should stop (policy stop_on_fail, FAIL confirmed)."""
        if self._broken or self.live is None or self.judge is None:
            return self.stop is not None
        try:
            return self._log(step, metrics)
        except Exception as e:  # never break the training run
            if os.environ.get("TRAINPROOF_DEBUG"):
                raise
            self._stand_down(f"internal error: {type(e).__name__}: {e}", step=step)
            return False

    def end(self) -> None:
        """The run finished (or was interrupted): the last verdict becomes the whole run's."""
        self.settle()

    def settle(self, step: int | None = None) -> Report | None:
        """The run is quiet (its end, a checkpoint, an interruption): evaluate the whole
        run if the published verdict is stale, and announce a change — so the verdict
        stands exactly as `epoch` judges the same log. Returns the current report."""
        if self._broken or self.live is None or self.judge is None:
            return self.report
        try:
            report = self.judge.settle(self.live)
        except Exception as e:  # never break the training run
            if os.environ.get("TRAINPROOF_DEBUG"):
                raise
            self._stand_down(f"internal error: {type(e).__name__}: {e}", step=step)
            return self.report
        if report is not None:
            self._take(report, step if step is not None else self.live.last_step())
        return self.report

    # --- inside ----------------------------------------------------------------------
    def _log(self, step: int | None, metrics: Mapping[str, Any]) -> bool:
        live, judge = self.live, self.judge
        assert live is not None and judge is not None
        record = live.new_record()
        for name, raw in metrics.items():
            value = to_float(as_number(raw))
            if value is None:
                live.notes.append((record, f"{name} is {raw!r}, not a number; not used"))
                continue
            live.add(name, name, step if step is not None else record, value, record)
        report = judge.update(live)
        if report is not None:
            self._take(report, step)
        return self._decide(step)

    def _take(self, report: Report, step: int | None) -> None:
        self.report = report
        change = verdict_change(report, self._key)
        if change is not None:
            self._key, previous = change
            self._announce(report, step, previous)

    def _announce(self, report: Report, step: int | None, previous: str | None) -> None:
        assert self.live is not None
        if self.stream is not None:
            self.stream.write(verdict_event(report, source=self.source, path=self.path, step=step,
                                            records=self.live.records, previous=previous))
        for line in change_lines(report, step, previous):
            self._say(line)

    def _decide(self, step: int | None) -> bool:
        if self.stop is not None:
            return True
        report, live = self.report, self.live
        assert live is not None
        if report is None or report.verdict is not Verdict.FAIL:
            self._fail_since = None
            return False
        if self._fail_since is None:
            self._fail_since = (live.records, step)
        if self.policy != "stop_on_fail":
            return False
        since_records, since_step = self._fail_since
        if live.records - since_records < self.confirm:
            return False
        # The FAIL may be from an evaluation some records old: confirmed only if the
        # whole run as it is now still FAILs.
        assert self.judge is not None
        settled = self.judge.settle(live)
        if settled is not None:
            self._take(settled, step)
            report = settled
            if report.verdict is not Verdict.FAIL:
                self._fail_since = None
                return False
        ids = fail_ids(report)
        first = next(f for f in report.findings if f.level is Level.FAIL)
        reason = (f"FAIL {', '.join(ids)} since step {since_step}, still standing {self.confirm} "
                  f"logged point(s) later: {first.message}")
        self.stop = Stop(step=step, rule_ids=ids, reason=reason)
        if self.stream is not None:
            self.stream.write(stop_event(source=self.source, path=self.path, step=step, rule_ids=ids,
                                         reason=reason))
        self._say(f"stopping the run at step {step} (policy stop_on_fail): {reason}")
        return True

    def _stand_down(self, reason: str, *, step: int | None) -> None:
        self._broken = True
        report = not_checked(self.path, "metrics", f"live-{self.source}", reason)
        self.report = report
        if self.stream is not None:
            try:
                self.stream.write(verdict_event(report, source=self.source, path=self.path, step=step,
                                                records=self.live.records if self.live else 0,
                                                previous=self._key[0] if self._key else None))
            except OSError:
                pass
        self._say(f"NOT-CHECKED: {reason}; the guardian stands down, training goes on")

    def _say(self, line: str) -> None:
        if self.echo and self._writer:
            print(f"{PREFIX} {line}", file=self.out or sys.stderr, flush=True)


def as_number(value: Any) -> Any:
    """A framework value as something `to_float` reads: 0-d tensors and numpy scalars
    become Python numbers (NaN stays NaN: it is data); anything else is left as it is."""
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "ndim", 0) == 0:
        try:
            return item()
        except (RuntimeError, ValueError, TypeError):
            return value
    return value


def lazy_callback_class(module: str, methods: type, framework_base: Callable[[], type], doc: str
                        ) -> Callable[[str], Any]:
    """A module `__getattr__` that builds `TrainproofCallback` — the adapter's methods on
    top of the framework's callback class, which `framework_base` imports — on first use,
    so that importing the adapter never imports the framework."""
    built: dict[str, type] = {}

    def __getattr__(name: str) -> Any:
        if name != "TrainproofCallback":
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        if "cls" not in built:
            built["cls"] = type("TrainproofCallback", (methods, framework_base()),
                                {"__doc__": doc, "__module__": module})
        return built["cls"]
    return __getattr__
