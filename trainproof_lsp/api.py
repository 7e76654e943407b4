"""Calls for other Python programs: judge paths the way the command line does, and draw
the result. A front end like cli.py (it puts the judge and the output together); the
output modules below it only render what they are given.

    render_run_report_html(paths or outcome, config=None, *, baseline=None, runs=None) -> str

docs/html-report.md describes the page and these calls.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Sequence

from .core.config import Config, ConfigError
from .core.model import Outcome, Run
from .judge.compare import doctor_with_runs
from .judge.settings import discover
from .output.html import to_html


def render_run_report_html(target: Sequence[str | os.PathLike[str]] | Outcome, config: Config | None = None, *,
                           baseline: str | os.PathLike[str] | None = None,
                           runs: Mapping[str, Run] | None = None) -> str:
    """The run report page (`doctor --html`), for the language server and other callers.

    `target` is either paths (logs or run folders, judged the way `doctor` judges them;
    with `baseline`, or the config's `baseline`, each run is also compared with it) or an
    Outcome already judged, with `runs` (run path -> Run) for its curves: a report whose
    run is not given is shown without curves. `config` defaults to the settings `doctor`
    finds from the first path. Bad input never raises: it shows as NOT-CHECKED.
    """
    if isinstance(target, Outcome):
        return to_html(target, runs or {})
    paths = [Path(p) for p in target] or [Path(".")]
    try:
        if config is None:
            config = discover(paths[0].resolve())
    except ConfigError as e:
        return to_html(Outcome(reports=(), error=f"configuration: {e}"))
    base = Path(baseline) if baseline is not None else (Path(config.baseline) if config.baseline else None)
    return to_html(*doctor_with_runs(paths, config, base))


__all__ = ["render_run_report_html"]
