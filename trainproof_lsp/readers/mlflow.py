"""MLflow file store: `mlruns/<experiment>/<run>/metrics/<key>`.

Each metric is a text file (nested keys like `train/loss` are sub-folders), one point a
line: `<timestamp ms> <value> <step>`. A run folder holds `meta.yaml` and `metrics/`.
Keys map onto canonical series through the same alias table as metric CSV/JSONL.
`MetricFileFeed` reads one metric file incrementally (common.Feed); the whole read feeds
each file through one.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Mapping

from ..core.caps import DEFAULT_CAPS, MIB, Caps, mib
from ..core.model import ReadError, RecordSpans, Run, RunMeta, Series
from .common import NotText, TextUpToNewline, feed_all, to_float, to_step
from .metrics import map_columns, no_loss_error


@dataclass(frozen=True, slots=True)
class MetricLine:
    """A non-blank line of a metric file; value and step are None when it is not
    `<timestamp> <value> <step>`."""

    line: int
    width: int
    value: float | None
    step: int | None


class MetricFileFeed:
    """One MLflow metric file, incrementally (common.Feed)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._text = TextUpToNewline("utf-8")
        self.lineno = 0  # lines taken so far

    def feed(self, data: bytes) -> list[MetricLine]:
        return self._points(self._decoded(data, final=False))

    def finish(self) -> list[MetricLine]:
        return self._points(self._decoded(b"", final=True))

    def _decoded(self, data: bytes, *, final: bool) -> str:
        try:
            return self._text.finish() if final else self._text.feed(data)
        except NotText as e:
            raise ReadError(f"{self.path}: cannot read ({e.detail})") from None

    def _points(self, text: str) -> list[MetricLine]:
        out: list[MetricLine] = []
        for line in text.splitlines():
            lineno = self.lineno
            self.lineno += 1
            parts = line.split()
            if not parts:
                continue
            out.append(MetricLine(lineno, len(line), to_float(parts[1]) if len(parts) >= 2 else None,
                                  to_step(parts[2]) if len(parts) >= 3 else None))
        return out


# Entries listed under a run's metrics/ folder (one file per metric key; keys with
# slashes make folders). Runs log tens to a few hundred metrics; a folder of millions of
# files is not a run, and listing it would take minutes.
MAX_METRIC_FILES = 10_000


def is_mlflow_run(folder: Path) -> bool:
    return (folder / "meta.yaml").is_file() and (folder / "metrics").is_dir()


def read_mlflow_run(folder: str | Path, *, columns: Mapping[str, str] | None = None,
                    caps: Caps = DEFAULT_CAPS) -> Run:
    """One MLflow run from its metric files (file store). The files mapped to series are
    read whole: over `caps.max_log_mb` bytes in all (checked before a byte is read) or
    `caps.max_log_entries` lines in all (counted before they are parsed), ReadError with
    the size and the cap."""
    root = Path(folder)
    metrics = root / "metrics"
    listed = list(islice(metrics.rglob("*"), MAX_METRIC_FILES + 1))
    if len(listed) > MAX_METRIC_FILES:
        raise ReadError(f"{root}: more than {MAX_METRIC_FILES} entries under metrics/, more than an MLflow run "
                        "holds: not read")
    files = sorted(p for p in listed if p.is_file())
    if not files:
        raise ReadError(f"{root}: MLflow run without metric files")
    keys = {p.relative_to(metrics).as_posix(): p for p in files}
    chosen, _ = map_columns(keys, columns)
    if "loss" not in chosen and "eval_loss" not in chosen:
        raise no_loss_error(str(root), keys, "metric")
    try:
        size = sum(keys[key].stat().st_size for key in chosen.values())
    except OSError as e:
        raise ReadError(f"{root}: cannot read ({e.strerror or e})") from None
    if size > caps.max_log_mb * MIB:
        raise ReadError(f"{root}: metric files of {size} bytes ({mib(size)}), over the cap of {caps.max_log_mb} MiB "
                        "for a log (max_log_mb): not read")
    lines = 0
    sources: list[str] = []
    starts: list[int] = []
    widths: list[int] = []
    file_of: list[int] = []
    series: dict[str, Series] = {}
    notes: list[tuple[int, str]] = []
    for name, key in chosen.items():
        path = keys[key]
        src = len(sources)
        sources.append(str(path))
        steps: list[int] = []
        values: list[float] = []
        records: list[int] = []
        try:
            data = path.read_bytes()
        except OSError as e:
            raise ReadError(f"{path}: cannot read ({e})") from None
        lines += data.count(b"\n")
        if lines > caps.max_log_entries:
            raise ReadError(f"{root}: more than {caps.max_log_entries} lines in its metric files, over the cap "
                            "(max_log_entries): not parsed")
        for point in (p for batch in feed_all(MetricFileFeed(str(path)), data) for p in batch):
            record = len(starts)
            starts.append(point.line)
            widths.append(point.width)
            file_of.append(src)
            if point.value is None or point.step is None:
                notes.append((record, f"{path.name} line {point.line + 1}: not '<timestamp> <value> <step>'"))
                continue
            steps.append(point.step)
            values.append(point.value)
            records.append(record)
        if steps:
            # MLflow appends; a resumed run may log steps out of order: keep file order.
            series[name] = Series(name, key, tuple(steps), tuple(values), tuple(records))
    if not series:
        raise ReadError(f"{root}: metric files hold no '<timestamp> <value> <step>' lines")
    n = len(starts)
    spans = RecordSpans(start_lines=tuple(starts), start_chars=(0,) * n, end_lines=tuple(starts),
                        end_chars=tuple(widths), files=tuple(file_of))
    return Run(path=str(root), format="mlflow", series=series, record_spans=spans, meta=RunMeta(),
               sources=tuple(sources), unmapped=tuple(k for k in keys if k not in chosen.values()),
               notes=tuple(notes))
