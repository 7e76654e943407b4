"""How the server starts its own command line (doctor, compare, show run, datasets, env)
in a child process without importing anything from the workspace.

`python -m trainproof_lsp` puts its working folder first on sys.path, and an editor
starts the server in the folder it opened: a repository holding `json.py`, `pygls/` or
`trainproof_lsp/` would run its code in every child. So a child
- runs in the folder this server's own `trainproof_lsp` was imported from (the bundled
  libraries, site-packages, or a source checkout): `-m` then finds exactly the server's
  copy first, and nothing of the workspace;
- gets `-P` (Python 3.11+: no working folder on sys.path at all);
- inherits PYTHONPATH without empty or relative entries (an empty entry means "the
  working folder", a classic of `export PYTHONPATH=$PYTHONPATH:/x`).
The bundled VS Code server needs PYTHONPATH (its libraries), so `-I`/`-E` are not used.

Every value a child gets from a setting or a command argument is checked here first:
paths must exist and are made absolute, option values are passed as `--opt=value` (never
parsed as another option) and positional paths after `--`.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

# Python 3.11's -P: "don't prepend a potentially unsafe path to sys.path".
SAFE_PATH_FLAGS: tuple[str, ...] = ("-P",) if sys.version_info >= (3, 11) else ()


def package_home() -> Path:
    """The folder holding the running `trainproof_lsp` package."""
    import trainproof_lsp

    return Path(trainproof_lsp.__file__).resolve().parent.parent


def clean_pythonpath(value: str | None) -> str | None:
    """PYTHONPATH without empty or relative entries (both resolve against the working folder)."""
    if not value:
        return None
    kept = [p for p in value.split(os.pathsep) if p and os.path.isabs(p)]
    return os.pathsep.join(kept) or None


def child_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    path = clean_pythonpath(env.pop("PYTHONPATH", None))
    if path:
        env["PYTHONPATH"] = path
    return env


@dataclass(frozen=True, kw_only=True)
class ChildLaunch:
    argv: tuple[str, ...]
    cwd: str
    env: dict[str, str]


def cli_child(args: list[str]) -> ChildLaunch:
    """`python [-P] -m trainproof_lsp ARGS` as the server runs it."""
    return ChildLaunch(argv=(sys.executable, *SAFE_PATH_FLAGS, "-m", "trainproof_lsp", *args),
                       cwd=str(package_home()), env=child_env())


# --- values from settings and commands -------------------------------------------------------

class BadValue(ValueError):
    """A setting or argument that cannot be passed to a child; the message names it."""


def existing_path(raw: str, *, what: str, base: Path | None = None, file: bool = False) -> Path:
    """An existing file or folder, absolute. A relative value is taken from `base` (the
    workspace folder), never from the server's working folder. A value that looks like an
    option stays a path: `--html=x` is the file `<base>/--html=x`, which must exist."""
    if not isinstance(raw, str) or not raw.strip() or "\x00" in raw:
        raise BadValue(f"{what}: not a path ({raw!r})")
    path = Path(os.path.expanduser(raw))
    if not path.is_absolute():
        if base is None:
            raise BadValue(f"{what}: {raw!r} is relative and there is no workspace folder to resolve it in")
        path = base / path
    path = path.absolute()
    if file and not path.is_file():
        raise BadValue(f"{what}: {raw!r} is not an existing file")
    if not path.exists():
        raise BadValue(f"{what}: {raw!r} does not exist")
    return path


def interpreter(raw: str, *, what: str, base: Path | None = None) -> str:
    """An interpreter to run: an existing executable file, given by path or found on PATH
    by a bare name (`python3`); never an option, never a command line with arguments."""
    if not isinstance(raw, str) or not raw.strip() or "\x00" in raw or raw.startswith("-"):
        raise BadValue(f"{what}: not an interpreter ({raw!r})")
    if os.sep not in raw and (os.altsep is None or os.altsep not in raw):
        found = shutil.which(raw)
        if found is None:
            raise BadValue(f"{what}: {raw!r} is not on PATH")
        return str(Path(found).absolute())
    path = existing_path(raw, what=what, base=base, file=True)
    if not os.access(path, os.X_OK):
        raise BadValue(f"{what}: {raw!r} is not executable")
    return str(path)


__all__ = ["SAFE_PATH_FLAGS", "ChildLaunch", "BadValue", "cli_child", "child_env", "clean_pythonpath",
           "existing_path", "interpreter", "package_home"]
