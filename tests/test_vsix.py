"""The .vsix files `make vsix` builds: one per VS Code target platform, each carrying the
language server with its own platform's compiled modules. Each .vsix is opened (a zip)
and every compiled file in it is checked against its target — by the platform tag of
the wheel it came from (the dist-info WHEEL tags and the bundle manifest's wheel names)
and by the machine code itself (the ELF, Mach-O or PE header's architecture) — and every
CPython version the manifest promises has each compiled module.

`make vsix` is slow (five bundles): without the files this test skips, saying so; CI
builds them first and sets TP_VSIX=required, so a missing .vsix fails there.
"""

from __future__ import annotations

import json
import os
import platform
import re
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
VSCODE = REPO / "editors" / "vscode"
VERSION = json.loads((VSCODE / "package.json").read_text(encoding="utf-8"))["version"]
LIBS = "extension/bundled/libs/"

# target -> (wheel platform tag pattern, binary format, architecture in that format)
TARGETS = {
    "linux-x64": (r"manylinux\w*_x86_64", "elf", 62),  # EM_X86_64
    "linux-arm64": (r"manylinux\w*_aarch64", "elf", 183),  # EM_AARCH64
    "darwin-x64": (r"macosx_\d+_\d+_(x86_64|universal2|intel)", "macho", 0x01000007),  # CPU_TYPE_X86_64
    "darwin-arm64": (r"macosx_\d+_\d+_(arm64|universal2)", "macho", 0x0100000C),  # CPU_TYPE_ARM64
    "win32-x64": (r"win_amd64", "pe", 0x8664),  # IMAGE_FILE_MACHINE_AMD64
}
# The compiled module each native dependency must have for every bundled CPython.
NATIVE_MODULES = ("msgspec/_core", "xxhash/_xxhash", "google_crc32c/_crc32c")
# tokenizers (the trained-tokens map) ships one stable-ABI module per platform, from a
# cp310-abi3 wheel: CPython 3.10 and later, every version the manifest promises.
ABI3_MODULE = "tokenizers/tokenizers"
ABI3_FILES = {"elf": ".abi3.so", "macho": ".abi3.so", "pe": ".pyd"}
BINARY_SUFFIXES = (".so", ".pyd", ".dylib", ".dll")


def vsix_or_skip(target: str) -> Path:
    path = VSCODE / f"trainproof-{target}-{VERSION}.vsix"
    if not path.is_file():
        message = f"{path.name} is not built (run `make vsix`)"
        if os.environ.get("TP_VSIX") == "required":
            pytest.fail(message)
        pytest.skip(message)
    return path


def architectures(blob: bytes) -> tuple[str, set[int]]:
    """(format, architectures) of a compiled file from its header."""
    if blob[:4] == b"\x7fELF":
        endian = "<" if blob[5] == 1 else ">"
        return "elf", {struct.unpack_from(endian + "H", blob, 18)[0]}
    magic = blob[:4]
    if magic in (b"\xcf\xfa\xed\xfe", b"\xce\xfa\xed\xfe"):  # thin Mach-O, little-endian
        return "macho", {struct.unpack_from("<i", blob, 4)[0]}
    if magic == b"\xca\xfe\xba\xbe":  # fat (universal) Mach-O: big-endian arch table
        count = struct.unpack_from(">I", blob, 4)[0]
        return "macho", {struct.unpack_from(">i", blob, 8 + 20 * i)[0] for i in range(count)}
    if blob[:2] == b"MZ":
        pe = struct.unpack_from("<I", blob, 0x3C)[0]
        assert blob[pe:pe + 4] == b"PE\0\0"
        return "pe", {struct.unpack_from("<H", blob, pe + 4)[0]}
    return "unknown", set()


@pytest.mark.parametrize("target", list(TARGETS))
def test_every_compiled_file_in_the_vsix_is_for_its_target(target):
    tag_pattern, fmt, arch = TARGETS[target]
    with zipfile.ZipFile(vsix_or_skip(target)) as zf:
        names = zf.namelist()
        vsix_manifest = zf.read("extension.vsixmanifest").decode()
        assert f'TargetPlatform="{target}"' in vsix_manifest
        manifest = json.loads(zf.read(LIBS + "trainproof-bundle.json"))
        assert manifest["target"] == target and re.fullmatch(tag_pattern, manifest["platform"])
        assert manifest["pythons"] == ["3.10", "3.11", "3.12", "3.13", "3.14"]

        # The wheels it was made from: each compiled wheel's platform tag is the target's.
        for wheel in manifest["wheels"]:
            platforms = wheel[:-len(".whl")].split("-")[-1].split(".")
            assert all(re.fullmatch(tag_pattern, p) for p in platforms), (target, wheel)
            assert f"-cp{wheel.split('-cp')[1][:3]}" in wheel
        assert {w.split("-")[0] for w in manifest["wheels"]} == {"msgspec", "xxhash", "google_crc32c", "markupsafe",
                                                                "tokenizers"}
        # tokenizers: one abi3 wheel (listed once), for the oldest bundled CPython and later
        (tok_wheel,) = [w for w in manifest["wheels"] if w.startswith("tokenizers-")]
        assert tok_wheel.startswith("tokenizers-0.23.3-cp310-abi3-"), tok_wheel

        # The installed dist-infos: a universal wheel, or one tagged for the target.
        tags = [line.split(": ", 1)[1] for n in names if n.endswith(".dist-info/WHEEL")
                for line in zf.read(n).decode().splitlines() if line.startswith("Tag: ")]
        assert tags
        for tag in tags:
            platform = tag.split("-")[-1]
            assert platform == "any" or re.fullmatch(tag_pattern, platform), (target, tag)

        # The machine code itself.
        binaries = [n for n in names if n.startswith(LIBS) and n.endswith(BINARY_SUFFIXES)]
        assert binaries
        for name in binaries:
            got_fmt, got_arch = architectures(zf.read(name)[:4096])
            assert got_fmt == fmt and arch in got_arch, (target, name, got_fmt, sorted(got_arch))

        # Each promised CPython has each compiled module, named by its ABI.
        for version in manifest["pythons"]:
            abi = version.replace(".", "")
            for module in NATIVE_MODULES:
                assert [n for n in binaries if n.startswith(LIBS + module + ".")
                        and (f".cpython-{abi}-" in n or f".cp{abi}-" in n)], (target, version, module)
        assert [n for n in binaries if n == LIBS + ABI3_MODULE + ABI3_FILES[fmt]], (target, ABI3_MODULE)
        assert LIBS + "tokenizers/__init__.py" in names
        # its dependency huggingface_hub is left out: the map calls Tokenizer.from_str only
        assert not [n for n in names if n.startswith(LIBS + "huggingface_hub")]
        assert LIBS + "trainproof_lsp/__init__.py" in names


def test_make_vsix_builds_every_target_with_its_own_libraries():
    for target in TARGETS:
        vsix_or_skip(target)
    sizes = {t: (VSCODE / f"trainproof-{t}-{VERSION}.vsix").stat().st_size for t in TARGETS}
    assert all(size < 20_000_000 for size in sizes.values()), sizes
    with zipfile.ZipFile(VSCODE / f"trainproof-linux-x64-{VERSION}.vsix") as a, \
            zipfile.ZipFile(VSCODE / f"trainproof-win32-x64-{VERSION}.vsix") as b:
        assert not {n for n in a.namelist() if n.endswith(".pyd")}
        assert not {n for n in b.namelist() if n.endswith(".so")}


@pytest.mark.skipif(not (sys.platform == "linux" and platform.machine() == "x86_64"),
                    reason="runs the linux-x64 bundle's compiled modules")
def test_the_bundled_tokenizers_reads_a_tokenizer_with_nothing_but_the_bundle(tmp_path: Path):
    """The linux-x64 .vsix's bundled/libs alone on the path (`python -S -E`: no site-packages,
    no PYTHONPATH): tokenizers imports, Tokenizer.from_str reads a tokenizer.json and
    encodes with it, and huggingface_hub (not bundled) is never imported."""
    vsix = vsix_or_skip("linux-x64")
    with zipfile.ZipFile(vsix) as zf:
        zf.extractall(tmp_path, [n for n in zf.namelist() if n.startswith(LIBS)])
    libs = tmp_path / LIBS
    tokenizer_json = json.dumps({
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
        "pre_tokenizer": {"type": "Whitespace"}, "post_processor": None, "decoder": None,
        "model": {"type": "WordLevel", "vocab": {"<unk>": 0, "the": 1, "cat": 2, "sat": 3}, "unk_token": "<unk>"}})
    code = (f"import sys; sys.path.insert(0, {str(libs)!r})\n"
            "import tokenizers\n"
            f"tok = tokenizers.Tokenizer.from_str({tokenizer_json!r})\n"
            "print(tokenizers.__version__, tokenizers.__file__)\n"
            "print(tok.encode('the cat sat on').ids)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('huggingface_hub', 'requests')))\n")
    out = subprocess.run([sys.executable, "-S", "-E", "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    version, ids, hub = out.stdout.splitlines()
    assert version == "0.23.3 " + str(libs / "tokenizers" / "__init__.py")
    assert ids == "[1, 2, 3, 0]" and hub == "[]"
