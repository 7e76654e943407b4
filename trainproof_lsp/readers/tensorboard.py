"""TensorBoard event files -> a Run: tag names normalised, shards of one run merged.

Tag shapes met in the wild, and what they become:
- HF Trainer:     train/loss, train/grad_norm, train/learning_rate, eval/loss, train/epoch
- Lightning:      train_loss_step / train_loss_epoch / train_loss, val_loss, lr-Adam, epoch
- Keras:          epoch_loss, epoch_learning_rate in `train/` and `validation/` sub-folders
                  (the folder says which split; the step is the epoch)
- PyTorch docs:   Loss/train, Loss/val
- Coqui Trainer:  TrainIterStats/loss, TrainIterStats/current_lr, TrainIterStats/step_time,
                  TrainIterStats/loader_time, EvalStats/avg_loss (TrainEpochStats/* are
                  epoch averages of the same numbers: not read as extra points)

Shards: a resumed run writes a new events file in the same folder. Files are ordered by
their first wall time; when a later file restarts at step s, the earlier files' points at
steps >= s are the discarded future of the crashed run and are dropped (what TensorBoard
itself shows after a restart). Points keep the byte offset of their record, so findings
point into the right file. The event reader's typed columns become the series as they are
(no copy) when one shard holds a series in step order, the usual case.
"""

from __future__ import annotations

import math
import re
from array import array
from dataclasses import dataclass
from itertools import compress, islice
from operator import le, lt
from pathlib import Path
from typing import Mapping

from ..core.caps import DEFAULT_CAPS, MIB, Caps, mib
from ..core.columns import Floats, Ints
from ..core.model import ReadError, RecordSpans, Run, RunMeta, Series
from .tfevents import EventFileScan, TooManyPoints, read_event_file
from . import adjacent
from .metrics import map_columns, no_loss_error, normalise_name

# Split folders Keras writes under its log dir.
_SPLIT_DIRS = {"train": "", "training": "", "validation": "val_", "val": "val_", "eval": "val_"}
# Prefixes some frameworks put before ordinary names.
_COQUI = {"trainiterstats/loss": "loss", "trainiterstats/current_lr": "lr",
          "trainiterstats/step_time": "step_time", "trainiterstats/loader_time": "data_time",
          "trainiterstats/grad_norm": "grad_norm", "evalstats/avg_loss": "eval_loss"}


# A tag that names its split itself ("val_loss", "eval/loss") whatever folder it is in.
_NAMES_SPLIT = re.compile(r"(?:^|_)(?:val|valid|validation|eval|evaluation|dev|test|train|training)(?:_|$)")


def normalise_tag(tag: str, split_dir: str | None) -> str:
    """A tag as a metric-column name the alias table knows."""
    low = tag.lower()
    if low in _COQUI:
        return _COQUI[low]
    if split_dir is not None and low.startswith("epoch_"):
        # Keras: epoch_loss under validation/ is the validation loss.
        return _SPLIT_DIRS[split_dir] + low[len("epoch_"):]
    if split_dir is not None and _SPLIT_DIRS[split_dir] and not _NAMES_SPLIT.search(normalise_name(tag)):
        # A plain `loss` written by its own writer under validation/ is the validation
        # loss, not more points of the train loss.
        return _SPLIT_DIRS[split_dir] + tag
    return tag


def split_of(path: Path) -> str | None:
    name = path.parent.name.lower()
    return name if name in _SPLIT_DIRS else None


def run_folder(event_file: Path) -> Path:
    """The folder a run's event files share (Keras' split sub-folders belong to their
    parent; HF writes under <output_dir>/runs/<name>/)."""
    folder = event_file.parent
    if folder.name.lower() in _SPLIT_DIRS:
        folder = folder.parent
    return folder


@dataclass(frozen=True, slots=True)
class _Part:
    """One shard's points of one series: the scan's typed columns, shared, not copied."""

    file: int
    steps: Ints
    walls: Floats
    values: Floats
    offsets: Ints

    def before(self, restart: int) -> "_Part":
        """The points logged before step `restart` (a later shard restarted there)."""
        keep = [st < restart for st in self.steps]
        if all(keep):
            return self
        return _Part(self.file, Ints(compress(self.steps, keep)), Floats(compress(self.walls, keep)),
                     Floats(compress(self.values, keep)), Ints(compress(self.offsets, keep)))


def _in_order(steps: Ints, walls: Floats) -> bool:
    """Points already sorted by (step, wall): nothing to sort (the usual case)."""
    if all(map(lt, steps, islice(steps, 1, None))):
        return True
    pairs = list(zip(steps, walls))
    return all(map(le, pairs, islice(pairs, 1, None)))


def read_event_files(paths: list[Path], *, verify_crc: bool = True, columns: Mapping[str, str] | None = None,
                     caps: Caps = DEFAULT_CAPS) -> tuple[Run, list[EventFileScan]]:
    """One run from the event files of one run folder (shards, Keras splits). Over
    `caps.max_events_mb` bytes in all (checked before a byte is read) or
    `caps.max_events` scalar points: ReadError, with the size and the cap."""
    where = paths[0].parent if len(paths) > 1 else paths[0]
    size = sum(p.stat().st_size for p in paths)
    if size > caps.max_events_mb * MIB:
        raise ReadError(f"{where}: event files of {size} bytes ({mib(size)}), over the cap of "
                        f"{caps.max_events_mb} MiB for one run's event files (max_events_mb): not read")
    scans: list[EventFileScan] = []
    held = 0
    for p in paths:
        try:
            scans.append(read_event_file(p, verify_crc=verify_crc, max_points=caps.max_events - held))
        except TooManyPoints as e:
            raise ReadError(f"{p}: more than {caps.max_events} scalar points in the run's event files "
                            f"({held + e.points} by byte {e.offset} of this file), over the cap for one run "
                            "(max_events): not read") from None
        held += sum(len(s.steps) for s in scans[-1].scalars.values())
    usable = [(p, s) for p, s in zip(paths, scans) if s.scalars]
    if not usable:
        first = scans[0].problems[0].message if scans and scans[0].problems else "no scalar summaries"
        raise ReadError(f"{paths[0]}: no scalars to judge ({first})")
    # Order shards by the first wall time they hold (file names sort by creation time too,
    # but hosts and clocks differ; the events' own times are what TensorBoard uses).
    def first_wall(item: tuple[Path, EventFileScan]) -> float:
        walls = [s.wall_times[0] for s in item[1].scalars.values() if len(s.wall_times)]
        return min(walls) if walls else math.inf

    usable.sort(key=lambda item: (first_wall(item), str(item[0])))
    sources = [str(p) for p, _ in usable]
    # canonical name -> each shard's points, and the tag it came from
    merged: dict[str, list[_Part]] = {}
    tag_of: dict[str, str] = {}
    for file_index, (path, scan) in enumerate(usable):
        names = {normalise_tag(tag, split_of(path)): tag for tag in scan.scalars}
        chosen, _ = map_columns(names, columns)
        for canonical, column in chosen.items():
            tag = names[column]
            ser = scan.scalars[tag]
            parts = merged.setdefault(canonical, [])
            tag_of.setdefault(canonical, tag)
            if len(ser.steps) and parts:
                # A later shard restarting at `restart` supersedes the earlier points
                # from that step on (the crashed run's unsaved future).
                restart = ser.steps[0]
                parts[:] = [part.before(restart) for part in parts]
            parts.append(_Part(file_index, ser.steps, ser.wall_times, ser.values, ser.offsets))
    if "loss" not in merged and "eval_loss" not in merged:
        raise no_loss_error(str(paths[0].parent), {t for _, s in usable for t in s.scalars}, "tag")
    files = Ints()
    offsets = Ints()
    series: dict[str, Series] = {}
    walls: dict[str, Floats] = {}
    for canonical, parts in merged.items():
        if len(parts) == 1:  # one shard: the scan's columns are the series' (no copy)
            steps, wall, values, offs = parts[0].steps, parts[0].walls, parts[0].values, parts[0].offsets
        else:
            steps, wall, values, offs = Ints(), Floats(), Floats(), Ints()
            for part in parts:
                steps.extend(part.steps)
                wall.extend(part.walls)
                values.extend(part.values)
                offs.extend(part.offsets)
        shard = Ints()
        for part in parts:
            shard.extend(array("q", [part.file]) * len(part.steps))
        if not _in_order(steps, wall):
            order = sorted(range(len(steps)), key=lambda i: (steps[i], wall[i]))
            steps, wall, values = Ints(steps[i] for i in order), Floats(wall[i] for i in order), \
                Floats(values[i] for i in order)
            offs, shard = Ints(offs[i] for i in order), Ints(shard[i] for i in order)
        base = len(files)
        files.extend(shard)
        offsets.extend(offs)
        series[canonical] = Series(canonical, tag_of[canonical], steps, values, Ints(range(base, len(files))))
        walls[canonical] = wall
    series.update(_wall_time_series(series, walls))
    classes, config = adjacent.find_num_classes(Path(sources[0]))
    spans = RecordSpans(files=files, byte_offsets=offsets)
    folder = run_folder(Path(sources[0]))
    run = Run(path=str(folder), format="tfevents", series=series, record_spans=spans,
              meta=RunMeta(vocab_size=classes, vocab_source=config,
                           checkpoint_steps=adjacent.checkpoint_steps(folder)),
              sources=tuple(sources))
    return run, scans


def _wall_time_series(series: dict[str, Series], walls: dict[str, Floats]) -> dict[str, Series]:
    """Step time from the loss points' wall times, when the log has no step-time tag:
    (wall[i] - wall[i-1]) / (step[i] - step[i-1])."""
    if "step_time" in series or "loss" not in series:
        return {}
    loss, wall = series["loss"], walls["loss"]
    steps = Ints()
    values = Floats()
    records = Ints()
    ls = loss.steps
    # Consecutive pairs by zip, not by index: a pass in C iterators over a long run.
    for s0, s1, w0, w1, rec in zip(ls, islice(ls, 1, None), wall, islice(wall, 1, None),
                                   islice(loss.records, 1, None)):
        dstep = s1 - s0
        dwall = w1 - w0
        if dstep > 0 and dwall > 0:
            steps.append(s1)
            values.append(dwall / dstep)
            records.append(rec)
    if len(values) < 2:
        return {}
    return {"step_time": Series("step_time", "wall time / step", steps, values, records)}
