"""The bundle in the editor: a model, generation, adapter or tokenizer settings file is
judged with its folder, from disk (judge/bundle.py), and a cross-file finding shows on
both of its files.

    chat_template.jinja     TP-BUNDLE-STOP-TOKEN  (the finding's own location)
         ▲ relatedInformation
    generation_config.json  TP-BUNDLE-STOP-TOKEN  (the same finding, mirrored at the line
                                                   its related location names)

Hover on an `eos_token_id` (or `eos_token`, `bos_…`, `pad_…`) line lists what each file of
the folder says about that token, with the file and line of each.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from lsprotocol import types as lsp

from ..core.model import Finding, Related, Report
from ..readers.tokenizer import Sourced
from .kinds import TOKENIZER_FILES

if TYPE_CHECKING:
    from ..core.config import Config
    from ..readers.bundle import BundleFacts
    from .documents import LineDocument

# The files whose id lines the hover explains.
ID_FILES = frozenset({"config.json", "generation_config.json", "tokenizer_config.json", "special_tokens_map.json"})
_ID_KEY = re.compile(r'"(eos|bos|pad)_token(?:_id)?"\s*:')


def mirrored(findings: tuple[Finding, ...], path: str) -> list[Finding]:
    """Each finding located on another file whose related location is on `path`, moved
    there: its related information points back at the file the finding is on."""
    out = []
    for f in findings:
        if f.location.path == path:
            continue
        here = [r for r in f.related if r.location.path == path]
        if not here:
            continue
        back = Related(location=f.location, message=f"the other end: {Path(f.location.path).name}")
        others = tuple(r for r in f.related if r.location.path != path)
        out.append(replace(f, location=here[0].location, related=(back, *others)))
    return out


def judge_config_file(path: Path, config: "Config") -> Report | None:
    """A settings file judged with its folder: the tokenizer rules (for a tokenizer file),
    the bundle rules (for a folder holding a bundle), and the bundle's findings whose other
    end is this file. None when there is nothing in the folder to judge it with."""
    from ..judge.base import verdict_of
    from ..judge.bundle import judge_bundle
    from ..judge.preflight import judge_tokenizer
    from ..readers.bundle import is_bundle

    folder = path.parent
    reports: list[Report] = []
    if path.name in TOKENIZER_FILES:
        reports.append(judge_tokenizer(folder, config))
    bundle: Report | None = judge_bundle(folder, config) if is_bundle(folder) else None
    if bundle is None:
        return reports[0] if reports else None
    findings = [*(f for r in reports for f in r.findings), *bundle.findings,
                *mirrored(bundle.findings, str(path))]
    checks = [*(c for r in reports for c in r.checks), *bundle.checks]
    first = reports[0] if reports else bundle
    return Report(artefact=first.artefact, verdict=verdict_of(findings), findings=tuple(findings),
                  checks=tuple(checks), reason=first.reason)


# --- hover on the special token ids -------------------------------------------------------------

def _line(s: Sourced) -> str:
    return f"{Path(s.path).name} line {s.line + 1}"


def token_sayings(b: "BundleFacts", token: str) -> list[str]:
    """What each file of the bundle says about `token` (eos, bos or pad), one line each."""
    key = f"{token}_token_id"
    out = []
    for where in (b.config, b.generation):
        s = where.get(key)
        if s is not None:
            out.append(f"{_line(s)}: {key} {_json(s.value)}")
    tok = b.tokenizer
    if tok is not None:
        declared: Sourced | None = {"eos": tok.eos, "bos": tok.bos, "pad": tok.pad}[token]
        if declared is not None:
            tid = tok.id_of(declared.value)
            out.append(f"{_line(declared)}: {token}_token {declared.value!r}"
                       + (f" (id {tid})" if tid is not None else " (id not in the tokenizer files)"))
    end = b.template_end
    if token == "eos" and end is not None and end.marker is not None and tok is not None:
        tid = tok.id_of(end.marker)
        out.append(f"{_line(end.where)}: the chat template ends an assistant turn with {end.marker!r}"
                   + (f" (id {tid})" if tid is not None else ""))
    return out


def _json(v: Any) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(map(str, v)) + "]"
    return "null" if v is None else str(v)


def id_hover_text(path: Path, line_text: str, *, markdown: Callable[[str], str] | None) -> str | None:
    """The hover for an id line of a settings file, or None for any other line.
    `markdown`: how prose is made literal Markdown (hover.escape_markdown, passed in: this
    module sits below hover), None for a plain-text client.
    Blocking (reads the folder, renders the template): runs in a worker thread."""
    from ..readers.bundle import read_bundle

    if path.name not in ID_FILES:
        return None
    m = _ID_KEY.search(line_text)
    if m is None:
        return None
    token = m.group(1)
    try:
        b = read_bundle(path.parent, render_template=token == "eos")
    except Exception:  # a hover without the listing, never an error
        return None
    sayings = token_sayings(b, token)
    if not sayings:
        return None
    if markdown is not None:
        return "\n".join([f"**{token}** in this folder:", ""] + [f"- {markdown(s)}" for s in sayings])
    return "\n".join([f"{token} in this folder:"] + [f"- {s}" for s in sayings])


async def with_id_hover(tp: Any, doc: "LineDocument", line: int, base: lsp.Hover | None,
                        escape: Callable[[str], str]) -> lsp.Hover | None:
    """`base` (the findings' hover, or None) with the id listing of this line added;
    `escape` makes prose literal Markdown for a Markdown client."""
    import asyncio

    if doc.path.name not in ID_FILES:
        return base
    markdown = bool(tp.features.hover_markdown)
    text = await asyncio.get_running_loop().run_in_executor(
        tp.analyzer.executor, lambda: id_hover_text(doc.path, doc.line(line), markdown=escape if markdown else None))
    if text is None:
        return base
    kind = lsp.MarkupKind.Markdown if markdown else lsp.MarkupKind.PlainText
    if base is None:
        return lsp.Hover(contents=lsp.MarkupContent(kind=kind, value=text))
    contents = base.contents
    value = contents.value if isinstance(contents, lsp.MarkupContent) else str(contents)
    sep = "\n\n---\n\n" if markdown else "\n\n"
    return lsp.Hover(contents=lsp.MarkupContent(kind=kind, value=value + sep + text), range=base.range)


__all__ = ["judge_config_file", "mirrored", "id_hover_text", "with_id_hover", "token_sayings", "ID_FILES"]
