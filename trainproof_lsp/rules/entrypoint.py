"""Where `env` found the training script, when that was not where the path was typed.

Emitted by the engine (no check function): `env --entrypoint FILE` reads FILE as typed,
from the shell's working folder; only when it is not there but is relative to `--cwd`
is it taken from there, and this note says so.
"""

from __future__ import annotations

from ..core.model import Level
from .base import Rule
from .env import ENV

FROM_CWD_DOC = """The entrypoint was found relative to `--cwd`, not where it was typed.

What it flags: `env --entrypoint FILE --cwd DIR` where FILE does not exist relative to
the shell's working folder but DIR/FILE does; the check went on with DIR/FILE.
Why it matters: paths are read as typed everywhere else (`doctor`, `preflight`); `--cwd`
is only the folder the run launches from. The note says which file was judged, so a
second script of the same name elsewhere is not mistaken for it.
What it does not mean: a problem with the run — it is INFO and never changes a verdict.
"""

FROM_CWD_RULE = Rule(id="TP-ENV-ENTRYPOINT-FROM-CWD", name="entrypoint-from-cwd", level=Level.INFO,
                     doc=FROM_CWD_DOC, family=ENV)
