"""MLflow file store: `mlruns/<experiment>/<run>/metrics/<key>`.

Each metric is a text file (nested keys like `train/loss` are sub-folders), one point a
line: `<timestamp ms> <value> <step>`. A run folder holds `meta.yaml` and `metrics/`.
Keys map onto canonical series through the same alias table as metric CSV/JSONL.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from ..core.model import ReadError, RecordSpans, Run, RunMeta, Series
from .common import to_float, to_step
from .metrics import map_columns, no_loss_error


def is_mlflow_run(folder: Path) -> bool:
    return (folder / "meta.yaml").is_file() and (folder / "metrics").is_dir()


def read_mlflow_run(folder: str | Path, *, columns: Mapping[str, str] | None = None) -> Run:
    root = Path(folder)
    metrics = root / "metrics"
    files = sorted(p for p in metrics.rglob("*") if p.is_file())
    if not files:
        raise ReadError(f"{root}: MLflow run without metric files")
    keys = {p.relative_to(metrics).as_posix(): p for p in files}
    chosen, _ = map_columns(keys, columns)
    if "loss" not in chosen and "eval_loss" not in chosen:
        raise no_loss_error(str(root), keys, "metric")
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
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ReadError(f"{path}: cannot read ({e})") from None
        for lineno, line in enumerate(text.splitlines()):
            parts = line.split()
            if not parts:
                continue
            record = len(starts)
            starts.append(lineno)
            widths.append(len(line))
            file_of.append(src)
            value = to_float(parts[1]) if len(parts) >= 2 else None
            step = to_step(parts[2]) if len(parts) >= 3 else None
            if value is None or step is None:
                notes.append((record, f"{path.name} line {lineno + 1}: not '<timestamp> <value> <step>'"))
                continue
            steps.append(step)
            values.append(value)
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
