#!/usr/bin/env python3
"""Populate bundled/libs for one VS Code target platform: the language server and its
dependencies, so the extension runs `python -m trainproof_lsp serve` with
PYTHONPATH=bundled/libs and no pip install.

    python3 scripts/bundle_python.py --target darwin-arm64   # (`make vsix` runs every target)

One .vsix per target (`vsce package --target T`), as VS Code's platform-specific
extensions are published; each carries its own platform's compiled modules:

1. trainproof-lsp built from this repo, and the pure-Python pins of
   bundled-requirements.txt as universal wheels (py3-none-any; tomli also ships mypyc
   builds, which would tie it to one CPython): the same on every target.
2. msgspec, xxhash, google-crc32c and markupsafe have C extensions built per platform
   and CPython ABI. Their wheels for the target's platform tag (TARGETS) are downloaded
   for every CPython in PYTHONS (`pip download --platform P --python-version V
   --only-binary=:all:`); the first version's wheels are unpacked whole, and of the others
   only the files the first lacks (the compiled modules, named by ABI:
   `*.cpython-3XY-*.so`, `*.cp3XY-*.pyd`) are copied beside them, so one bundled/libs
   serves CPython 3.10-3.14 on that platform. tokenizers (Rust, for the trained-tokens
   map) ships one stable-ABI wheel per platform (`cp310-abi3`: `tokenizers.abi3.so`,
   `tokenizers.pyd`): pip picks that same wheel for every version, its module serves them
   all, and the manifest lists it once. Its dependency huggingface_hub is not bundled
   (`--no-deps`): tokenizers imports it only in `Tokenizer.from_pretrained`, and the
   map reads tokenizer.json with `Tokenizer.from_str` (tests/test_vsix.py imports the
   bundled copy with nothing else on the path).
3. bundled/libs/trainproof-bundle.json says what the bundle was built for (target,
   platform tags, CPython versions, the wheels used): the extension reads it to say
   clearly when the bundled server does not fit the machine, and tests/test_vsix.py checks
   every compiled file of each .vsix against it.

Everything comes from PyPI through pip; nothing else is downloaded.
"""

from __future__ import annotations

import argparse
import json
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
MANIFEST = "trainproof-bundle.json"
# VS Code target -> the pip platform tag its wheels are fetched for. pip also accepts
# older compatible tags (manylinux2014 takes manylinux_2_17 and older; macOS 12 takes
# wheels built for 10.9-12, universal2 included). macOS 12 because google-crc32c 1.9.0
# ships macOS wheels for 12.0 and later only.
TARGETS: dict[str, str] = {
    "linux-x64": "manylinux2014_x86_64",
    "linux-arm64": "manylinux2014_aarch64",
    "darwin-x64": "macosx_12_0_x86_64",
    "darwin-arm64": "macosx_12_0_arm64",
    "win32-x64": "win_amd64",
}
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


def download_native(pins: list[str], platform: str, dest: Path) -> dict[str, list[Path]]:
    """The native pins' wheels for each CPython version that has them all: version -> wheels."""
    found: dict[str, list[Path]] = {}
    for version in PYTHONS:
        abi = "cp" + version.replace(".", "")
        folder = dest / abi
        try:
            pip("download", "--quiet", "--no-deps", "--only-binary=:all:", "--platform", platform,
                "--python-version", version, "--implementation", "cp", "--abi", abi, "--dest", str(folder), *pins)
        except subprocess.CalledProcessError:
            print(f"warning: no {platform} wheels for CPython {version}; the bundle will not run on it",
                  file=sys.stderr)
            continue
        found[version] = sorted(folder.glob("*.whl"))
    return found


def unpack_missing(wheel: Path, libs: Path, *, metadata: bool = False) -> list[str]:
    """Copy the files of `wheel` that `libs` does not have yet; its dist-info only with
    `metadata` (a wheel is a zip laid out as installed: unpacking it is installing it,
    for a platform other than this one too)."""
    added = []
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            if name.endswith("/") or (".dist-info/" in name and not metadata):
                continue
            target = libs / name
            if target.exists():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(name) as src, target.open("wb") as out:
                shutil.copyfileobj(src, out)
            added.append(name)
    return added


def bundle(target: str) -> dict:
    platform = TARGETS[target]
    shutil.rmtree(LIBS, ignore_errors=True)
    LIBS.mkdir(parents=True)
    pure, native = requirements()
    pip("install", "--quiet", "--no-compile", "--no-deps", "--target", str(LIBS), "--only-binary=:all:",
        "--implementation", "py", "--abi", "none", "--platform", "any", "--python-version", PYTHONS[0], *pure)
    with tempfile.TemporaryDirectory() as tmp:
        pip("wheel", "--quiet", "--no-deps", "--wheel-dir", str(Path(tmp) / "self"), str(REPO))
        pip("install", "--quiet", "--no-compile", "--no-deps", "--target", str(LIBS),
            *map(str, Path(tmp, "self").glob("*.whl")))
        wheels = download_native(native, platform, Path(tmp) / "native")
        if not wheels:
            raise SystemExit(f"bundle_python.py: no {platform} wheels of {', '.join(native)} for any CPython")
        first, *others = wheels
        for w in wheels[first]:
            unpack_missing(w, LIBS, metadata=True)
        added = [name for version in others for w in wheels[version] for name in unpack_missing(w, LIBS)]
    for name in _DROP:
        shutil.rmtree(LIBS / name, ignore_errors=True)
    for cache in LIBS.rglob("__pycache__"):
        shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(REPO / "build", ignore_errors=True)  # pip's in-tree build leftovers
    manifest = {"target": target, "platform": platform, "pythons": list(wheels),
                # an abi3 wheel is the same file for every version: listed once
                "wheels": sorted({w.name for ws in wheels.values() for w in ws})}
    (LIBS / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    size = sum(p.stat().st_size for p in LIBS.rglob("*") if p.is_file())
    print(f"bundled/libs for {target} ({platform}): {size / 1e6:.1f} MB; CPython {', '.join(wheels)}; "
          f"files from the other versions' wheels: {len(added)}")
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", choices=sorted(TARGETS), default="linux-x64",
                        help="the VS Code target platform (default linux-x64)")
    bundle(parser.parse_args(argv).target)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
