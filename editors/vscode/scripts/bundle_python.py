#!/usr/bin/env python3
"""Populate bundled/libs: the language server and its dependencies, so the extension runs
`python -m trainproof_lsp serve` with PYTHONPATH=bundled/libs and no pip install.

    python3 scripts/bundle_python.py            # (run by `make vsix`)

1. trainproof-lsp from this repo and bundled-requirements.txt, `pip install --target
   bundled/libs --no-deps`: the pure-Python packages as universal wheels (py3-none-any;
   tomli also ships mypyc builds, which would tie it to one CPython), the others for the
   Python running this script.
2. msgspec, xxhash and google-crc32c have C extensions built for one CPython ABI. Their
   wheels for the other CPython versions in PYTHONS (same package versions) are
   downloaded and only their compiled modules (`*.cpython-3XY-*.so`, named by ABI) are
   copied beside the first ones, so one bundled/libs serves CPython 3.10-3.14 on
   linux x86_64. Other platforms: importStrategy "fromEnvironment" (docs/editors.md).

Everything comes from PyPI through pip; nothing else is downloaded.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent  # editors/vscode
REPO = HERE.parent.parent
LIBS = HERE / "bundled" / "libs"
REQUIREMENTS = HERE / "bundled-requirements.txt"
PLATFORM = "manylinux2014_x86_64"
PYTHONS = ("3.10", "3.11", "3.12", "3.13", "3.14")
# Metadata pip leaves that the server never reads.
_DROP = ("bin",)


def pip(*args: str) -> None:
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", *args]
    print("+", " ".join(cmd[2:]), flush=True)
    subprocess.run(cmd, check=True)


def requirements() -> tuple[list[str], list[str]]:
    """(pure-Python pins, pins with C extensions), split at the file's "# With C extensions"."""
    groups: tuple[list[str], list[str]] = ([], [])
    group = groups[0]
    for line in REQUIREMENTS.read_text().splitlines():
        if line.startswith("# With C extensions"):
            group = groups[1]
        spec = line.split("#")[0].strip()
        if spec:
            group.append(spec)
    return groups


def add_other_abis(pins: list[str]) -> list[str]:
    """Copy the compiled modules of the other CPython versions' wheels into LIBS."""
    added = []
    current = f"{sys.version_info.major}.{sys.version_info.minor}"
    with tempfile.TemporaryDirectory() as tmp:
        for version in PYTHONS:
            if version == current:
                continue
            abi = "cp" + version.replace(".", "")
            dest = Path(tmp) / abi
            try:
                pip("download", "--quiet", "--no-deps", "--only-binary=:all:", "--platform", PLATFORM,
                    "--python-version", version, "--implementation", "cp", "--abi", abi, "--dest", str(dest), *pins)
            except subprocess.CalledProcessError:
                print(f"warning: no wheels for CPython {version}; the bundle will not run on it", file=sys.stderr)
                continue
            for wheel in sorted(dest.glob("*.whl")):
                with zipfile.ZipFile(wheel) as zf:
                    for name in zf.namelist():
                        if name.endswith(".so") and f".cpython-{abi[2:]}" in name or (
                                name.endswith(".so") and ".dist-info/" not in name and "/" in name
                                and name.split("/")[-2].endswith(".libs")):
                            target = LIBS / name
                            if target.exists():
                                continue
                            target.parent.mkdir(parents=True, exist_ok=True)
                            with zf.open(name) as src, target.open("wb") as out:
                                shutil.copyfileobj(src, out)
                            added.append(name)
    return added


def main() -> int:
    shutil.rmtree(LIBS, ignore_errors=True)
    LIBS.mkdir(parents=True)
    pure, native = requirements()
    pip("install", "--quiet", "--no-compile", "--no-deps", "--target", str(LIBS), "--only-binary=:all:",
        "--implementation", "py", "--abi", "none", "--platform", "any", "--python-version", PYTHONS[0], *pure)
    pip("install", "--quiet", "--no-compile", "--no-deps", "--target", str(LIBS), *native)
    pip("install", "--quiet", "--no-compile", "--no-deps", "--target", str(LIBS), str(REPO))
    for name in _DROP:
        shutil.rmtree(LIBS / name, ignore_errors=True)
    added = add_other_abis(native)
    for cache in LIBS.rglob("__pycache__"):
        shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(REPO / "build", ignore_errors=True)  # pip's in-tree build leftovers
    size = sum(p.stat().st_size for p in LIBS.rglob("*") if p.is_file())
    print(f"bundled/libs: {size / 1e6:.1f} MB; compiled modules for other CPython versions: {len(added)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
