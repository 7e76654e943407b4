"""A part of a composite loss that carries the task does not fall while the total does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from ..core.model import LOSS, LOSS_PART, Hit, Level, Run, Series, loss_parts
from ._stats import mann_kendall_z
from ._views import judged_on
from .base import Context, METRICS, Rule, Skip, fmt, need
from .dead import _level_noise, _levels

DOC = """A named part of the loss that carries the task does not fall while the total loss falls.

What it flags: a log with the total train loss and named parts of it (`recon_loss`,
`loss_ce`, `mel_loss`, `kl_loss`, `aux_loss`...), where the total falls by at least
`min_total_fall` (and by more than `fall_noise` level noises) from its start level to its
end level — or another part collapses, losing `collapse_fall` of its level or more — and
a part that carries the task falls by less than `max_part_fall` or by no more than
`fall_noise` of its own level noises. Levels are window medians, as TP-DEAD-RUN takes them;
a slow steady drift under `max_part_fall` is no fall here, since the total or another part
shows what a fall looks like in this run. A part carries
the task unless its name says it is a regulariser (KL, auxiliary, z-loss, load balancing,
commitment, entropy, penalty...) or an adversarial part (discriminator, generator), and,
when its name says neither task nor regulariser, it is at least `min_share` of the total
at the start. The message names the part whose fall carried the total's.
Why it matters: the total falls, so every total-loss check passes, while the part that is
the task stands still: a VAE whose KL collapses to zero while its reconstruction never
improves (posterior collapse), a model whose auxiliary or balancing loss is minimised
instead of the language-model loss, a TTS model whose duration loss falls and whose mel
loss does not.
What it does not mean: a part already at its floor in a fine-tune can stand still while a
regulariser falls; read the numbers.
"""

# Words in a part's name that say it is the task: cross-entropy and likelihood, language
# modelling, reconstruction and regression, speech (mel, CTC), classification.
_TASK = frozenset({"ce", "xent", "crossentropy", "cross", "nll", "lm", "mlm", "clm", "recon", "reconstruction",
                   "rec", "mel", "ctc", "task", "mse", "mae", "l1", "cls", "class", "classification", "token",
                   "seq", "caption", "text", "ar", "main", "sft", "pred", "prediction", "bce", "focal", "dice",
                   "box", "bbox", "seg", "mask"})
# Words that say it is a regulariser: it may fall to zero or stand still without the task
# suffering (KL to a prior or reference, MoE auxiliary and z losses, VQ commitment and
# codebook losses, entropy bonuses, penalties, weight terms).
_REGULARISER = frozenset({"kl", "kld", "kl_div", "aux", "auxiliary", "z", "zloss", "balance", "balancing",
                          "load", "router", "moe", "commitment", "commit", "vq", "codebook", "entropy", "reg",
                          "regularization", "regularisation", "penalty", "l2", "decay", "orth", "orthogonal",
                          "diversity", "sparsity", "prior", "beta", "gp", "consistency"})
# Words that say it is one side of an adversarial game: neither side is meant to fall.
_ADVERSARIAL = frozenset({"disc", "discriminator", "gen", "generator", "adv", "adversarial", "gan", "d", "g",
                          "fm", "feature_matching", "critic"})


def role(column: str) -> str:
    """"task", "regulariser", "adversarial" or "unknown", from the words of a part's name."""
    from ..readers.metrics import normalise_name

    words = set(normalise_name(column).split("_"))
    if words & _ADVERSARIAL:
        return "adversarial"
    if words & _REGULARISER:
        return "regulariser"
    if words & _TASK:
        return "task"
    return "unknown"


@dataclass(frozen=True, kw_only=True)
class Limits:
    # Twice the trend test's minimum of 10 (TP-DEAD-RUN): the levels at each end are then
    # medians of at least 4 points, and a part logged that often has shown its direction.
    min_points: int = 20
    # The total must fall clearly: 5% is more than two level noises of a healthy fine-tune's
    # total and more than TP-DEAD-RUN's 2% "within batch noise"; under it there is no
    # "the total falls" for a part to contradict.
    min_total_fall: float = 0.05
    # Or, whatever the total does, another part collapses: it lost half its level or more
    # (a KL term going to zero under posterior collapse loses 90-99%). A part that halves
    # is no batch noise, and the total may then hide it by moving no more than its noise.
    collapse_fall: float = 0.5
    # A part that fell under 2% did not fall (TP-DEAD-RUN's min_drop: within batch noise).
    max_part_fall: float = 0.02
    # A fall within two of the series' own level noises is not a fall (TP-DEAD-RUN's
    # fall_noise: two window medians of a flat series differ by this ~5% of the time).
    fall_noise: float = 2.0
    # A part whose name does not say what it is carries the task only if it is a real share
    # of the total at the start: a part of under 10% cannot be what the run is trained for.
    min_share: float = 0.1


@dataclass(frozen=True)
class _Fall:
    start: float
    end: float
    fall: float  # (start - end) / |start|; negative when it rose
    noise: float  # the level noise, in the series' units
    z: float


def pct(change: float) -> str:
    """A relative change in messages: "-19.6%", "+2.0%", never "-0.0%"."""
    return f"{round(change, 3) + 0.0:+.1%}"


def _fall(values: list[float]) -> _Fall:
    start, end, _, w = _levels(values)
    fall = (start - end) / abs(start) if start else 0.0
    return _Fall(start=start, end=end, fall=fall, noise=_level_noise(values, w), z=mann_kendall_z(values))


def _fell(f: _Fall, minimum: float, limits: Limits) -> bool:
    return f.fall >= minimum and (f.start - f.end) > limits.fall_noise * f.noise


def check(run: Run, limits: Limits, ctx: Context) -> Iterator[Hit]:
    names = loss_parts(run.series)
    if not names:
        raise Skip("no named parts of the loss in the log")
    total = need(run, LOSS, limits.min_points, "loss")
    t = _fall(list(total.values))
    parts: list[tuple[str, Series, _Fall]] = []
    for name in names:
        s = run.series[name].finite()
        if len(s) >= limits.min_points:
            parts.append((name, s, _fall(list(s.values))))
    if not parts:
        raise Skip(f"no part of the loss has {limits.min_points} finite points")
    total_fell = _fell(t, limits.min_total_fall, limits)
    if not total_fell and not any(_fell(f, limits.collapse_fall, limits) for _, _, f in parts):
        raise Skip(f"the total loss does not fall clearly ({fmt(t.start)} -> {fmt(t.end)}, {pct(-t.fall)}) and "
                   "no part of it collapses: the total's own checks judge it")
    for name, s, f in parts:
        column = name[len(LOSS_PART):]
        kind = role(column)
        if kind in ("regulariser", "adversarial"):
            continue
        if kind == "unknown" and f.start < limits.min_share * t.start:
            continue
        if _fell(f, limits.max_part_fall, limits):
            continue
        # (when the total did not fall, a part that collapsed is among the others: this
        # one did not fall, and the check above found one that did)
        others = [(o, of) for o, _, of in parts if o != name]
        carrier = max(others, key=lambda p: p[1].start - p[1].end, default=None)
        by = ""
        if carrier is not None and carrier[1].start > carrier[1].end:
            c = carrier[1]
            by = f"{carrier[0][len(LOSS_PART):]} ({fmt(c.start)} -> {fmt(c.end)}, {pct(-c.fall)})"
        total_words = f"the total loss {'falls' if total_fell else 'moves'} {fmt(t.start)} -> {fmt(t.end)} ({pct(-t.fall)})"
        if total_fell:
            context = total_words + (f"; the fall is carried by {by}" if by else "")
        else:
            context = f"{by} collapses and {total_words}"
        yield Hit(
            message=(
                f"{column} does not fall: {fmt(f.start)} -> {fmt(f.end)} ({pct(-f.fall)}; its level noise "
                f"{fmt(f.noise)}, trend z {f.z:.1f}) over steps {s.steps[0]}-{s.steps[-1]}, while {context}; "
                + judged_on(run, s, window="levels are window medians at each end")
            ),
            evidence={"part": column, "part_start": f.start, "part_end": f.end, "part_fall": f.fall,
                      "part_noise": f.noise, "part_trend_z": f.z, "total_start": t.start, "total_end": t.end,
                      "total_fall": t.fall, "carried_by": carrier[0][len(LOSS_PART):] if carrier and by else None,
                      "points": len(s)},
            location=run.location(s.records[-1]),
        )


RULE = Rule(id="TP-LOSS-PART-STALLED", name="loss-part-stalled", level=Level.WARN, doc=DOC, limits=Limits,
            check=check, needs=(LOSS,), family=METRICS)
