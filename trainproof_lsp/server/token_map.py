"""The trained-tokens map in the editor: a dataset line's hover shows its row token by
token, and a code lens on the file gives the length histogram and the shares.

Both need the run's tokenizer folder: the settings `trainproof.tokenizer` (a folder with
tokenizer.json), `trainproof.maxLen`, and optionally `trainproof.loss`
("all" | "assistant-only" | "completion-only") and `trainproof.trainConfig` (the training
script or YAML config the masking is read from, as `preflight --train-config`). Without a
tokenizer setting there is no map, and nothing here shows.

The hover renders the row (the conversation through the chat template, in the bounded
child) with the trained tokens between ⟦ and ⟧ and ✂ where truncation cuts; the lens maps a
sample of EDITOR_SAMPLE rows of the buffer (said in its title) off the event loop, once
per document version. Nothing here decides what is wrong: the findings come from preflight.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from ..readers.token_map import Masking, RowMap, RunTokenizer, SideMap

# Rows the lens maps: a few thousand give the percentiles to a few tokens in well under a
# second; the whole file is `preflight --tokenizer DIR --max-len N`'s job.
EDITOR_SAMPLE = 2000
# Characters of a row the hover shows: a hover is read, not scrolled through.
HOVER_CHARS = 3000
TRAINED_OPEN, TRAINED_CLOSE, CUT = "⟦", "⟧", "✂"


def _plain(text: str) -> str:
    """Prose as it is (a plain-text client); hover.escape_markdown for a Markdown one."""
    return text


@dataclass(frozen=True, kw_only=True)
class MapSettings:
    tokenizer: str
    max_len: int | None
    loss: str | None = None
    train_config: str | None = None


def settings_of(settings: Any) -> MapSettings | None:
    folder = getattr(settings, "tokenizer", None)
    if not isinstance(folder, str) or not folder:
        return None
    return MapSettings(tokenizer=folder, max_len=getattr(settings, "max_len", None),
                       loss=getattr(settings, "loss", None), train_config=getattr(settings, "train_config", None))


class EditorTokenMaps:
    """The tokenizer and masking of the current settings (loaded once per setting), and
    the lens's map per document version. Used from the judge threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loaded: tuple[MapSettings, "RunTokenizer | str", "Masking | str"] | None = None
        self._lens: dict[str, tuple[int, str]] = {}

    def _setup(self, s: MapSettings) -> tuple["RunTokenizer | str", "Masking | str"]:
        from ..judge.token_map import MapOptions, resolve_masking, with_pad
        from ..readers import token_map as tm

        with self._lock:
            if self._loaded is not None and self._loaded[0] == s:
                return self._loaded[1], self._loaded[2]
            try:
                tok: RunTokenizer | str = tm.load_run_tokenizer(s.tokenizer)
            except tm.MapUnavailable as e:
                tok = str(e)
            options = MapOptions(max_len=s.max_len, loss=s.loss if s.loss in ("all", "assistant-only",
                                                                                  "completion-only") else None,
                                 train_config=Path(s.train_config) if s.train_config else None)
            masking = resolve_masking(options)
            if not isinstance(tok, str) and not isinstance(masking, str):
                masking = with_pad(masking, tok)
            self._loaded = (s, tok, masking)
            return tok, masking

    def row_markdown(self, s: MapSettings, line_text: str, line: int,
                     escape: Callable[[str], str] = _plain) -> str | None:
        """The hover for one JSONL line; None when the line holds no mappable row.
        `escape`: how prose from the files is made literal (hover.escape_markdown)."""
        from ..readers import token_map as tm

        try:
            obj = json.loads(line_text)
        except (ValueError, RecursionError):
            return None
        tok, masking = self._setup(s)
        if isinstance(tok, str) or isinstance(masking, str):
            return f"**Token map** — not built: {escape(tok if isinstance(tok, str) else str(masking))}"
        try:
            row = tm.map_row(obj, tok, masking)
        except Exception as e:  # a template past its bounds, a tokenizer error: said, never raised
            return f"**Token map** — line {line + 1} not mapped: {escape(' '.join(str(e).split())[:200])}"
        if row is None:
            return None
        return render_row(row, line, masking, escape)

    def lens_title(self, s: MapSettings, path: Path, data: bytes, version: int, uri: str) -> str | None:
        """"token map: p50 … p95 … p99 … · x% over max length · y% cut · z% train nothing"."""
        from ..readers import token_map as tm
        from ..rules.token_map import length_stats

        cached = self._lens.get(uri)
        if cached is not None and cached[0] == version:
            return cached[1]
        tok, masking = self._setup(s)
        if isinstance(tok, str) or isinstance(masking, str):
            title = f"token map: not built ({tok if isinstance(tok, str) else masking})"
        else:
            lines = data.count(b"\n") + 1
            records = lines  # the stride's count: lines, not parsed rows (one pass over the buffer, not two)
            try:
                m = tm.map_tokens(path, tok, masking, lines=lines, records=records, layout="jsonl", data=data,
                                  sample=EDITOR_SAMPLE if records > EDITOR_SAMPLE else None)
            except Exception as e:  # the template past its bounds: the lens says so
                title = f"token map: not built ({' '.join(str(e).split())[:120]})"
            else:
                title = lens_text(m, length_stats(m) if m.rows else None)
        self._lens[uri] = (version, title)
        return title


def lens_text(m: Any, stats: dict[str, Any] | None) -> str:
    from ..readers.token_map import NOT_MAPPED

    if not stats:
        return "token map: no row could be mapped"
    rows = m.rows
    dead = sum(1 for t in m.trained if t == 0)
    cut = sum(1 for a, b in zip(m.trained, m.before) if a != NOT_MAPPED and 0 < a < b)
    sample = f" (sample of {rows} rows)" if m.stride > 1 else ""
    bars = _bars(stats["histogram"])
    over = f" · {100 * stats['share_over_max_len']:.3g}% over {m.masking.max_len}" if m.masking.max_len else ""
    return (f"token map{sample}: p50 {stats['p50']} · p95 {stats['p95']} · p99 {stats['p99']} · max {stats['max']}"
            f"{over} · {100 * cut / rows:.3g}% cut · {100 * dead / rows:.3g}% train nothing · {bars}")


def _bars(histogram: str) -> str:
    from ..rules.token_map import parse_histogram

    parsed = parse_histogram(histogram)
    if parsed is None:
        return ""
    counts = parsed[1]
    top = max(counts) or 1
    blocks = "▁▂▃▄▅▆▇█"
    # An empty bin is a no-break space: VS Code draws a lens title as HTML, where runs of
    # plain spaces collapse into one and the bars would lose their places.
    return "".join(blocks[min(7, round(7 * c / top))] if c else "\u00a0" for c in counts)


def marked_text(side: "SideMap") -> str:
    """The encoded text with the trained tokens between ⟦ ⟧ and ✂ where truncation cuts;
    special tokens the tokenizer adds (a BOS at offset 0 with no text) shown by name."""
    trained = [False] * len(side.ids)
    for a, b in side.trained:
        for i in range(a, b):
            trained[i] = True
    out: list[str] = []
    at = 0
    inside = False
    lo, hi = side.kept
    for i, (a, b) in enumerate(side.offsets):
        if i == lo and lo > 0 or i == hi and hi < len(side.ids):
            if inside:
                out.append(TRAINED_CLOSE)
                inside = False
            out.append(CUT)
        if a > at:
            out.append(side.text[at:a])
        piece = side.text[a:b] if b > a else side.tokens[i]
        if trained[i] and not inside:
            out.append(TRAINED_OPEN)
            inside = True
        elif not trained[i] and inside:
            out.append(TRAINED_CLOSE)
            inside = False
        out.append(piece)
        at = max(at, b)
    if inside:
        out.append(TRAINED_CLOSE)
    out.append(side.text[at:])
    return "".join(out)


def render_row(row: "RowMap", line: int, masking: "Masking", escape: Callable[[str], str] = _plain) -> str:
    if row.error is not None:
        return f"**Token map** · line {line + 1} — the chat template raises: {escape(row.error)}"
    parts = [f"**Token map** · line {line + 1} · {escape(row.fmt)} · loss {escape(row.loss)} · max length "
             f"{masking.max_len if masking.max_len is not None else 'none'} ({masking.truncation})"]
    names = ("chosen", "rejected") if len(row.sides) == 2 else ("",)
    for name, side in zip(names, row.sides):
        n = len(side.ids)
        lo, hi = side.kept
        cut = n - (hi - lo)
        head = f"{name}: " if name else ""
        parts.append("")
        parts.append(f"{head}{n} tokens, {sum(side.mask)} trained"
                     + (f" ({side.before} before truncation); truncation cuts {cut} token(s) "
                        f"{'after token ' + str(hi) if lo == 0 else 'before token ' + str(lo + 1)}" if cut else "")
                     + (f"; turns: {escape(', '.join(r for _, _, r in side.turns))}" if side.turns else ""))
        text = marked_text(side)
        if len(text) > HOVER_CHARS:
            text = text[:HOVER_CHARS] + f"… ({len(text) - HOVER_CHARS} more characters)"
        fence = "````" if "```" in text else "```"
        parts += [f"{fence}text", text, fence]
    parts += ["", f"{TRAINED_OPEN} {TRAINED_CLOSE} trained tokens · {CUT} truncation"]
    return "\n".join(parts)





# --- the hooks (server/hover.py, server/lenses.py) -------------------------------------------------


async def with_row_map(tp: Any, doc: Any, line: int, hover: Any, escape: Callable[[str], str] = _plain) -> Any:
    """The dataset line's hover: its findings' hover (if any) after the row's map.
    `escape`: hover.escape_markdown for a Markdown client."""
    import asyncio

    from lsprotocol import types as lsp

    s = settings_of(tp.settings)
    if s is None or line >= doc.line_count():
        return hover
    text = doc.line(line)
    if not text.lstrip().startswith("{"):
        return hover
    loop = asyncio.get_running_loop()
    esc = escape if tp.features.hover_markdown else _plain
    extra = await loop.run_in_executor(tp.analyzer.executor, tp.token_maps.row_markdown, s, text, line, esc)
    if extra is None:
        return hover
    if not tp.features.hover_markdown:  # plain text: the Markdown marks of the title left out
        extra = extra.replace("**", "")
    if hover is not None:
        extra = f"{extra}\n\n---\n\n{hover.contents.value}"
    kind = lsp.MarkupKind.Markdown if tp.features.hover_markdown else lsp.MarkupKind.PlainText
    return lsp.Hover(contents=lsp.MarkupContent(kind=kind, value=extra))


async def map_lens(tp: Any, doc: Any, uri: str) -> list[Any]:
    """One lens with the map's histogram and shares (a sample of the buffer), when the
    settings name a tokenizer; it runs `Check the file on disk` when clicked."""
    import asyncio

    from lsprotocol import types as lsp

    s = settings_of(tp.settings)
    if s is None:
        return []
    data = doc.text.encode("utf-8", "surrogatepass")
    version = getattr(doc, "version", 0)
    loop = asyncio.get_running_loop()
    title = await loop.run_in_executor(tp.analyzer.executor, tp.token_maps.lens_title, s, doc.path, data, version,
                                       uri)
    if title is None:
        return []
    top = lsp.Range(start=lsp.Position(line=0, character=0), end=lsp.Position(line=0, character=0))
    return [lsp.CodeLens(range=top, command=lsp.Command(title=title, command="trainproof.checkDataset",
                                                        arguments=[str(doc.path)]))]

__all__ = ["EditorTokenMaps", "MapSettings", "settings_of", "render_row", "marked_text", "lens_text", "EDITOR_SAMPLE",
           "with_row_map", "map_lens"]
