"""The trained-tokens map: for every dataset row, which tokens the run learns from.

    load_run_tokenizer(folder)                          -> RunTokenizer   (tokenizer.json via `tokenizers`)
    map_tokens(path, tok, masking, lines=..., ...)      -> TokenMap       (per line, flat arrays)
    map_row(obj, tok, masking)                          -> RowMap         (one row, token by token: the hover)

What a trainer learns from is decided in four places: the row, the tokenizer with its chat
template, the masking (everything; assistant turns only; the completion of a
prompt/completion row; everything after a response template) and the max length with its
truncation side. This module puts them together the way TRL 1.16 does, with the run's own
tokenizer.json through the `tokenizers` library (Rust, no torch, no transformers; imported
here, lazily) and the chat template rendered in the bounded child (chat_template.Renderer,
the jinja2 sandbox) — never in this process:

    text                 encode(text + eos, special tokens added)           loss on every token
    prompt/completion    encode(prompt), encode(prompt + completion + eos)  the completion starts
                         (message lists: the template with the generation   where the two differ
                         prompt, then prompt + completion, no special       (TRL's common prefix)
                         tokens added)
    chat / ShareGPT      the template rendered, encoded without special     every token; or, under
                         tokens (apply_chat_template(tokenize=True))        assistant-only loss, the
                                                                            tokens overlapping a
                                                                            {% generation %} block
    preference           prompt + chosen, prompt + rejected, each as above  the answers after the
                                                                            shared prompt (DPO)
    alpaca               instruction and input joined as the prompt, the output as completion

then, per sequence, truncation to the max length from the start (keep_start) or the end
(keep_end); a response template (the completion-only collator of older TRL) is searched in
the truncated ids as the collator searches it — the template tokenised alone, found in
context — and everything up to its end is masked; a collator that masks labels equal to the
pad id (transformers' DataCollatorForLanguageModeling) masks every EOS too when pad == eos.
"EOS appended" follows TRL: text and completions get the tokenizer's eos_token unless they
end with it; conversations get what the template writes.

Facts only, never verdicts (rules/token_map.py judges). Per line the map keeps a few
`array`s (about 30 bytes a line) and no Python object per row, so memory stays flat in
the number of rows; rows are rendered and encoded in batches (encode_batch uses every
core, RAYON_NUM_THREADS sets how many).
"""

from __future__ import annotations

import math
import os
from array import array
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from ..core.caps import not_regular
from ..core.model import ReadError
from . import dataset as ds
from .tokens import TemplateError, _as_messages, _messages, _shared_prefix

# Rows rendered and encoded per batch: encode_batch spreads a batch over the cores, and a
# few thousand rows amortise its per-call cost while one batch's texts stay a few MB.
BATCH_ROWS = 2048
# tokenizer.json of real models is up to ~35 MB (large vocabularies with merges); a file
# far past that is not a tokenizer, and parsing it would cost more memory than the map.
MAX_TOKENIZER_MB = 256
# Render children per file: rendering is the map's slowest part and each child renders on
# one core; more children than cores only add start-up (~0.2 s each) and memory.
RENDER_CHILDREN = 8
# Conversations per child and batch below which one child renders them all (a child
# costs more to start than it saves on a few hundred rows).
MIN_RENDER_CHUNK = 256

NOT_MAPPED = -1  # in the per-line arrays: no row on the line, or the row was not mapped

# Per-line flags (TokenMap.flags).
TEMPLATE_MISSING = 1  # the response template is not in the row's (truncated) tokens
PAIR_IDENTICAL = 2  # chosen and rejected are the same tokens after truncation...
PAIR_IDENTICAL_BEFORE = 4  # ...and before it (the dataset rules' finding, not the map's)
DOUBLE_BOS = 8  # the encoding starts with BOS twice
EOS_TRAINED = 16  # some EOS token of the row carries loss
SPANS_UNKNOWN = 32  # assistant-only: the generation blocks could not be told from the row's text
EOS_PRESENT = 64  # the row's tokens hold an EOS (trained or not)

# Loss modes, as TRL names them.
ALL, ASSISTANT, COMPLETION = "all", "assistant-only", "completion-only"
KEEP_START, KEEP_END = "keep_start", "keep_end"
GENERATION, TURNS = "generation", "turns"

MISSING_TOKENIZERS = "the token map needs the `tokenizers` package (pip install 'trainproof-lsp[tokens]')"


class MapUnavailable(Exception):
    """The map cannot be built; the message is one line and says why."""


@dataclass(frozen=True, kw_only=True)
class Masking:
    """How the run masks and cuts its rows, and where each setting came from."""

    max_len: int | None = None
    truncation: str = KEEP_START  # keep_start: the end is cut (right); keep_end: the start is cut (left)
    # TRL's completion_only_loss: None = on for prompt/completion rows (its default), off otherwise
    completion_only: bool | None = None
    assistant_only: bool = False  # TRL's assistant_only_loss (the template's generation blocks)
    # How assistant turns are found: GENERATION ({% generation %} blocks, TRL) or TURNS (the
    # assistant's content and the EOS after it, as LLaMA-Factory/axolotl train_on_inputs=false)
    assistant_by: str = GENERATION
    response_template: str | None = None  # completion-only collator: masks up to this text's tokens
    pad_masked: bool = False  # the collator masks every label equal to the pad id
    pad_token: str | None = None  # the run's pad token (None: the tokenizer's, else its EOS, as TRL)
    add_eos: bool = True  # TRL appends EOS to text and completions that do not end with it
    packing: bool = False  # rows are packed into blocks: nothing is cut
    sources: tuple[tuple[str, str], ...] = ()  # (setting, where it came from)

    def loss_name(self, prompt_completion: bool = False) -> str:
        if self.response_template is not None:
            return f"{COMPLETION} (response template {self.response_template!r})"
        if self.assistant_only:
            return ASSISTANT + (" (by turns)" if self.assistant_by == TURNS else "")
        if self.completion_only or (self.completion_only is None and prompt_completion):
            return COMPLETION
        return ALL


@dataclass(frozen=True, kw_only=True)
class RunTokenizer:
    """The run's tokenizer: `tokenizers.Tokenizer` and the special tokens around it."""

    folder: str
    tokenizer: Any  # tokenizers.Tokenizer
    template: str | None
    special: dict[str, str | None]  # the template's variables: bos_token, eos_token, pad_token, unk_token
    bos_id: int | None
    eos_id: int | None
    pad_id: int | None  # the tokenizer's own pad token (Masking.pad_token overrides)

    def id_of(self, token: str | None) -> int | None:
        if token is None:
            return None
        got = self.tokenizer.token_to_id(token)
        return got if isinstance(got, int) else None

    @property
    def generation_blocks(self) -> bool:
        return bool(self.template) and "generation" in (self.template or "") and \
            "endgeneration" in (self.template or "")


def _tokenizers_module() -> Any:
    try:
        import tokenizers
    except ImportError:
        raise MapUnavailable(MISSING_TOKENIZERS) from None
    except Exception as e:  # a broken install is not the dataset's fault
        raise MapUnavailable(f"tokenizers cannot be imported ({type(e).__name__}: {_one_line(e)})") from None
    return tokenizers


def available() -> bool:
    try:
        _tokenizers_module()
    except MapUnavailable:
        return False
    return True


def _one_line(e: BaseException, limit: int = 200) -> str:
    text = " ".join(str(e).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def load_run_tokenizer(folder: Path | str) -> RunTokenizer:
    """tokenizer.json read with `tokenizers` (bounded: a regular file under
    MAX_TOKENIZER_MB), the special tokens and chat template with readers/tokenizer.py.
    MapUnavailable when the folder has no usable tokenizer.json or `tokenizers` is missing."""
    from .tokenizer import read_tokenizer_dir

    path = Path(folder)
    target = path / "tokenizer.json"
    if not path.is_dir():
        raise MapUnavailable(f"{path}: not a tokenizer folder")
    if not target.exists():
        raise MapUnavailable(f"{path}: no tokenizer.json (the map reads the fast tokenizer's file)")
    irregular = not_regular(target)
    if irregular:
        raise MapUnavailable(f"{target}: {irregular}")
    size = target.stat().st_size
    if size > MAX_TOKENIZER_MB << 20:
        raise MapUnavailable(f"{target}: {size >> 20} MiB, over the {MAX_TOKENIZER_MB} MiB a tokenizer.json may be")
    tk = _tokenizers_module()
    try:
        with open(target, "rb") as f:
            raw = f.read(size + 1)
        tokenizer = tk.Tokenizer.from_str(raw.decode("utf-8-sig"))
    except (OSError, UnicodeDecodeError) as e:
        raise MapUnavailable(f"{target}: cannot read ({_one_line(e)})") from None
    except Exception as e:  # tokenizers' own parse errors: one line, no traceback
        raise MapUnavailable(f"{target}: `tokenizers` cannot load it ({_one_line(e)})") from None
    try:
        facts = read_tokenizer_dir(path)
    except (ReadError, OSError) as e:
        raise MapUnavailable(f"{path}: {_one_line(e)}") from None
    special = {"bos_token": facts.bos.value if facts.bos else None, "eos_token": facts.eos.value if facts.eos else None,
               "pad_token": facts.pad.value if facts.pad else None, "unk_token": facts.unk.value if facts.unk else None}
    template = facts.chat_template.value if facts.chat_template is not None else None

    def tid(token: str | None) -> int | None:
        got = tokenizer.token_to_id(token) if token is not None else None
        return got if isinstance(got, int) else None

    return RunTokenizer(folder=str(path), tokenizer=tokenizer, template=template, special=special,
                        bos_id=tid(special["bos_token"]), eos_id=tid(special["eos_token"]),
                        pad_id=tid(special["pad_token"]))


# --- one row: what to render and encode --------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Conv:
    messages: list[dict[str, Any]]
    generation_prompt: bool = False


Text = str | _Conv


@dataclass(frozen=True, slots=True)
class _Seq:
    """One sequence the trainer builds from a row: its full text and, when the loss is on
    the completion, the prompt it starts with."""

    full: Text
    prompt: Text | None
    special: bool  # encoded with the tokenizer's special tokens (plain text) or without (rendered)
    pair: bool = False  # a side of a preference pair: the loss is on the answer (DPO)


def _eos(text: str, tok: RunTokenizer, masking: Masking) -> str:
    eos = tok.special.get("eos_token")
    return text + eos if masking.add_eos and eos and not text.endswith(eos) else text


def _extract_prompt(chosen: Any, rejected: Any) -> tuple[Any, Any, Any]:
    """TRL's extract_prompt: the shared start of chosen and rejected is the prompt."""
    if isinstance(chosen, str) and isinstance(rejected, str):
        n = 0
        while n < min(len(chosen), len(rejected)) and chosen[n] == rejected[n]:
            n += 1
        if n and n < len(chosen) and chosen[n - 1] == " ":
            n -= 1
        return chosen[:n], chosen[n:], rejected[n:]
    if isinstance(chosen, list) and isinstance(rejected, list):
        head = _shared_prefix(chosen, rejected)
        return head, chosen[len(head):], rejected[len(head):]
    return None, chosen, rejected


def row_sequences(obj: dict[str, Any], tok: RunTokenizer, masking: Masking) -> tuple[str, list[_Seq]] | None:
    """(the row's format, the sequences a trainer builds from it), or None when the row
    cannot be mapped in its format (the dataset rules say why)."""
    fmt = ds.classify(obj)
    if fmt == ds.TEXT:
        text = obj.get("text")
        return (fmt, [_Seq(_eos(text, tok, masking), None, True)]) if isinstance(text, str) else None
    if fmt in ds.CONVERSATIONAL:
        msgs = _messages(obj.get("messages" if fmt == ds.CHAT else "conversations"), fmt == ds.SHAREGPT)
        if msgs is None or not tok.template:
            return None
        return fmt, [_Seq(_Conv(msgs), None, False)]
    if fmt == ds.ALPACA:
        parts = [obj.get("instruction"), obj.get("input") or "", obj.get("output")]
        if not all(isinstance(p, str) for p in parts):
            return None
        head = "\n".join(str(p) for p in parts[:2] if p) + "\n"
        return fmt, [_Seq(_eos(head + str(parts[2]), tok, masking), head, True)]
    if fmt == ds.PROMPT_COMPLETION:
        seq = _pair_seq(obj.get("prompt"), obj.get("completion"), tok, masking, pair=False)
        return (fmt, [seq]) if seq is not None else None
    if fmt == ds.PREFERENCE:
        prompt, chosen, rejected = obj.get("prompt"), obj.get("chosen"), obj.get("rejected")
        if prompt is None:
            prompt, chosen, rejected = _extract_prompt(chosen, rejected)
        sides = [_pair_seq(prompt, a, tok, masking, pair=True) for a in (chosen, rejected)]
        if sides[0] is None or sides[1] is None:
            return None
        return fmt, [sides[0], sides[1]]
    return None


def _pair_seq(prompt: Any, answer: Any, tok: RunTokenizer, masking: Masking, *, pair: bool) -> _Seq | None:
    if isinstance(answer, str) and isinstance(prompt, str):
        return _Seq(prompt + _eos(answer, tok, masking), prompt, True, pair)
    if not tok.template:
        return None
    turns = _as_messages(answer, "assistant")
    head = _as_messages(prompt, "user") if prompt else []
    if turns is None or head is None:
        return None
    return _Seq(_Conv(head + turns), _Conv(head, True) if head else None, False, pair)


# --- encoding and masking ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Encoded:
    ids: list[int]
    offsets: list[tuple[int, int]] | None
    text: str
    spans: tuple[tuple[int, int], ...] | None  # generation blocks (characters), rendered rows only


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    if a[:n] == b[:n]:  # the usual case, compared in C
        return n
    lo, hi = 0, n  # the first difference, by halves (each comparison in C)
    while lo < hi:
        mid = (lo + hi) // 2
        if a[:mid + 1] == b[:mid + 1]:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _span_tokens(offsets: Sequence[tuple[int, int]], spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Token intervals overlapping the character spans, as transformers builds
    assistant_masks (a token counts when it overlaps a span). With offsets in order (a
    rendered text encoded without added tokens) each span is two bisections; otherwise
    transformers' own single pass."""
    if not spans or not offsets:
        return []
    starts, ends = zip(*offsets)  # (tuples, built in C)
    ordered = [tuple(sp) for sp in spans]
    if list(starts) == sorted(starts) and list(ends) == sorted(ends) and ordered == sorted(ordered):
        out_fast = []
        for s0, e0 in ordered:
            lo, hi = bisect_right(ends, s0), bisect_left(starts, e0)
            if hi > lo:
                out_fast.append((lo, hi))
        return _merge(out_fast)
    return _span_tokens_pass(offsets, spans)


def _span_tokens_pass(offsets: Sequence[tuple[int, int]], spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """transformers' single pass over the tokens (both in order)."""
    out: list[tuple[int, int]] = []
    k = 0
    start = -1
    end = len(offsets)
    for i, (a, b) in enumerate(offsets):
        while k < len(spans) and a >= spans[k][1]:
            k += 1
        if k == len(spans):
            end = i
            break
        if b > spans[k][0]:
            if start < 0:
                start = i
        elif start >= 0:
            out.append((start, i))
            start = -1
    if start >= 0:
        out.append((start, end))
    return _merge(out)


def _merge(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        elif b > a:
            out.append((a, b))
    return out


def _turn_spans(text: str, messages: Sequence[dict[str, Any]], eos: str | None) -> list[tuple[int, int, str]]:
    """(start, end, role) of each turn's content found in order in the rendered text; an
    assistant turn's span takes the EOS right after its content (what LLaMA-Factory and
    axolotl train on). Turns whose content is not found verbatim are left out."""
    out: list[tuple[int, int, str]] = []
    at = 0
    for m in messages:
        content = m.get("content")
        if not isinstance(content, str) or not content:
            continue
        k = text.find(content, at)
        if k < 0:
            continue
        end = k + len(content)
        if m.get("role") == "assistant" and eos:
            j = end
            while j < len(text) and text[j] in " \t\r\n" and j - end < 4:
                j += 1
            if text.startswith(eos, j):
                end = j + len(eos)
        out.append((k, end, str(m.get("role"))))
        at = k + len(content)
    return out


def _find_last(ids: Sequence[int], sub: Sequence[int]) -> int:
    """Start of the last occurrence of `sub` in `ids` (the old completion-only collator
    keeps the last match), -1 when absent. Searched as bytes (C speed)."""
    if not sub or len(sub) > len(ids):
        return -1
    hay, needle = array("i", ids).tobytes(), array("i", sub).tobytes()
    end = len(hay)
    while True:
        k = hay.rfind(needle, 0, end)
        if k < 0:
            return -1
        if k % 4 == 0:
            return k // 4
        end = k + len(needle) - 1


@dataclass(frozen=True, slots=True)
class _SeqFacts:
    """One sequence after masking and truncation."""

    length: int  # tokens before truncation
    kept: tuple[int, int]  # the window truncation keeps [start, end)
    trained: list[tuple[int, int]]  # token intervals carrying loss (after truncation for a response template)
    before: int  # trained tokens before truncation
    after: int  # trained tokens after truncation
    prompt: int  # tokens before the first trained token (NOT_MAPPED when all are trained)
    flags: int
    ids: list[int]


def _window(n: int, masking: Masking) -> tuple[int, int]:
    m = masking.max_len
    if m is None or masking.packing or n <= m:
        return 0, n
    return (0, m) if masking.truncation == KEEP_START else (n - m, n)


def _count(ids: list[int], intervals: Iterable[tuple[int, int]], lo: int, hi: int, pad: int | None,
           eos: int | None) -> tuple[int, bool]:
    """Tokens of `intervals` inside [lo, hi), without pad-id tokens when `pad` is given,
    and whether an EOS is among them."""
    total, eos_in = 0, False
    for a, b in intervals:
        a, b = max(a, lo), min(b, hi)
        if b <= a:
            continue
        part = ids[a:b]
        dropped = part.count(pad) if pad is not None else 0
        total += (b - a) - dropped
        if eos is not None and eos != (pad if pad is not None else None) and eos in part:
            eos_in = True
    return total, eos_in


def sequence_facts(enc: _Encoded, prompt_ids: list[int] | None, seq: _Seq, tok: RunTokenizer, masking: Masking,
                   fmt_prompt_completion: bool, template_ids: list[int] | None) -> _SeqFacts:
    ids = enc.ids
    n = len(ids)
    flags = 0
    if tok.bos_id is not None and n >= 2 and ids[0] == tok.bos_id and ids[1] == tok.bos_id:
        flags |= DOUBLE_BOS
    if tok.eos_id is not None and tok.eos_id in ids:
        flags |= EOS_PRESENT
    lo, hi = _window(n, masking)
    intervals: list[tuple[int, int]] = [(0, n)]
    completion = seq.pair or (masking.completion_only is not False and
                              (masking.completion_only or fmt_prompt_completion))
    if prompt_ids is not None and completion:
        intervals = [(_common_prefix(prompt_ids, ids), n)]
    if masking.assistant_only and not seq.pair:
        if masking.assistant_by == TURNS and isinstance(seq.full, _Conv):
            spans: Sequence[tuple[int, int]] | None = [
                (a, b) for a, b, role in _turn_spans(enc.text, seq.full.messages, tok.special.get("eos_token"))
                if role == "assistant"]
        else:
            spans = enc.spans if isinstance(seq.full, _Conv) else None
        if isinstance(seq.full, _Conv):
            if spans is None:
                flags |= SPANS_UNKNOWN
                spans = ()
            marked = _span_tokens(enc.offsets or [], spans)
            intervals = _intersect(intervals, marked)
    pad = _pad_id(tok, masking)
    pad_masked = pad if (masking.pad_masked or masking.response_template is not None) else None
    if template_ids is not None:
        # The collator works on the truncated ids: the template searched there.
        found = _find_last(ids[lo:hi], template_ids)
        full_found = _find_last(ids, template_ids)
        before_iv = _intersect(intervals, [(full_found + len(template_ids), n)]) if full_found >= 0 else []
        if found < 0:
            flags |= TEMPLATE_MISSING
            after_iv: list[tuple[int, int]] = []
        else:
            after_iv = _intersect(intervals, [(lo + found + len(template_ids), hi)])
        before, _ = _count(ids, before_iv, 0, n, pad_masked, tok.eos_id)
        after, eos_in = _count(ids, after_iv, lo, hi, pad_masked, tok.eos_id)
        trained = after_iv
    else:
        before, _ = _count(ids, intervals, 0, n, pad_masked, tok.eos_id)
        after, eos_in = _count(ids, intervals, lo, hi, pad_masked, tok.eos_id)
        trained = [(max(a, lo), min(b, hi)) for a, b in intervals if min(b, hi) > max(a, lo)]
    if eos_in:
        flags |= EOS_TRAINED
    first = trained[0][0] if trained else n
    prompt = first if (trained and first > 0) or not trained else NOT_MAPPED
    return _SeqFacts(length=n, kept=(lo, hi), trained=trained, before=before, after=after, prompt=prompt,
                     flags=flags, ids=ids)


def _intersect(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out = []
    for x0, x1 in a:
        for y0, y1 in b:
            lo, hi = max(x0, y0), min(x1, y1)
            if hi > lo:
                out.append((lo, hi))
    return out


def _pad_id(tok: RunTokenizer, masking: Masking) -> int | None:
    if masking.pad_token is not None:
        return tok.id_of(masking.pad_token)
    return tok.pad_id if tok.pad_id is not None else tok.eos_id


# --- the whole file ----------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class TokenMap:
    """The map of one dataset file, by line (0-based); NOT_MAPPED where no row was
    mapped. For a preference pair `tokens`/`second` are the chosen/rejected sequences and
    `trained`/`before` the smaller side's (a pair trains on nothing when one side has nothing)."""

    path: str
    tokenizer: str
    masking: Masking
    rows: int  # rows mapped
    records: int  # rows of the file (the sample was taken from them)
    sample: int | None  # --sample N when given (rows mapped = every `stride`-th row)
    stride: int
    generation_blocks: bool  # the chat template has {% generation %} blocks
    eos_token: str | None
    pad_token: str | None
    pad_is_eos: bool
    loss: str  # the loss mode as the report names it
    tokens: array[int]
    second: array[int]
    kept: array[int]  # tokens after truncation (the longer side)
    prompt: array[int]  # tokens before the first trained one (NOT_MAPPED: trained from the first)
    trained: array[int]  # trained tokens after truncation
    before: array[int]  # trained tokens before truncation
    flags: array[int]
    template_errors: tuple[TemplateError, ...] = ()
    pairs: int = 0  # preference rows mapped
    conversations: int = 0  # rows rendered with the template


class _Batch:
    """The rows of a file in batches, in two stages that overlap: a helper thread renders
    batch k+1 (the children) and encodes it (encode_batch, outside the GIL) while this
    thread masks and counts batch k and reads the rows of batch k+2. At most two batches
    are in hand at once, so memory stays bounded as before."""

    def __init__(self, tok: RunTokenizer, masking: Masking, out: TokenMap) -> None:
        self.tok, self.masking, self.out = tok, masking, out
        self.rows: list[tuple[int, str, list[_Seq]]] = []
        self.renderers: list[Any] = []  # chat_template.Renderer children, started on first use
        self.errors: list[TemplateError] = []
        self.template_ids = _template_ids(tok, masking)
        self.pairs = self.conversations = 0
        self.pending: tuple[list[tuple[int, str, list[_Seq]]], Any] | None = None  # (rows, Future)
        self.pool: Any = None  # the helper thread (concurrent.futures), started with the second batch

    def add(self, line: int, fmt: str, seqs: list[_Seq]) -> None:
        self.rows.append((line, fmt, seqs))

    def flush(self, *, last: bool = False) -> None:
        """Hand the rows read so far to the helper thread and finish the batch before them
        (with `last`: finish everything, in this thread when there is no batch before)."""
        rows, self.rows = self.rows, []
        if rows:
            texts: list[Text] = []
            for _, _, seqs in rows:
                for s in seqs:
                    texts.append(s.full)
                    if s.prompt is not None:
                        texts.append(s.prompt)
            if last and self.pending is None:  # a file of one batch: no thread for it
                self._finish(rows, encode_texts(texts, self.tok, self._render,
                                                need_offsets=self.masking.assistant_only))
                return
            if self.pool is None:
                from concurrent.futures import ThreadPoolExecutor

                self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="trainproof-map-encode")
            job = self.pool.submit(encode_texts, texts, self.tok, self._render,
                                   need_offsets=self.masking.assistant_only)
            before, self.pending = self.pending, (rows, job)
            if before is not None:
                self._finish(before[0], before[1].result())
        if last and self.pending is not None:
            before, self.pending = self.pending, None
            self._finish(before[0], before[1].result())

    def _finish(self, rows: list[tuple[int, str, list[_Seq]]],
                done: tuple[list[_Encoded | None], dict[int, str]]) -> None:
        encoded, failed = done
        at = 0
        for line, fmt, seqs in rows:
            facts: list[_SeqFacts] = []
            error: str | None = None
            for s in seqs:
                full, full_at = encoded[at], at
                at += 1
                prompt, prompt_at = None, -1
                if s.prompt is not None:
                    prompt, prompt_at = encoded[at], at
                    at += 1
                error = error or failed.get(full_at) or failed.get(prompt_at)
                if full is None or (s.prompt is not None and prompt is None):
                    continue
                facts.append(sequence_facts(full, prompt.ids if prompt is not None else None, s, self.tok,
                                            self.masking, fmt == ds.PROMPT_COMPLETION or fmt == ds.ALPACA,
                                            self.template_ids))
            if error is not None or len(facts) != len(seqs):
                self.errors.append(TemplateError(line=line, message=error or "the row could not be rendered"))
                continue
            self._store(line, facts)
            self.pairs += len(facts) == 2
            self.conversations += isinstance(seqs[0].full, _Conv)

    def _store(self, line: int, facts: list[_SeqFacts]) -> None:
        o = self.out
        o.tokens[line] = facts[0].length
        o.kept[line] = max(f.kept[1] - f.kept[0] for f in facts)
        o.prompt[line] = facts[0].prompt
        o.trained[line] = min(f.after for f in facts)
        o.before[line] = min(f.before for f in facts)
        flags = 0
        for f in facts:
            flags |= f.flags
        if len(facts) == 2:
            o.second[line] = facts[1].length
            a, b = facts
            if a.ids[a.kept[0]:a.kept[1]] == b.ids[b.kept[0]:b.kept[1]]:
                flags |= PAIR_IDENTICAL
                if a.ids == b.ids:
                    flags |= PAIR_IDENTICAL_BEFORE
        o.flags[line] = flags

    def _render(self, items: list[tuple[list[dict[str, Any]], bool]]) -> list[Any]:
        """The conversations rendered by up to RENDER_CHILDREN children at once, each in
        its own thread (the thread waits on its child's pipe, so the children render in
        parallel); in order."""
        from . import chat_template as ct

        k = max(1, min(RENDER_CHILDREN, threads(), len(items) // MIN_RENDER_CHUNK))
        while len(self.renderers) < k:
            self.renderers.append(ct.Renderer(self.tok.template or "", variables=self.tok.special, spans=True))
        if k == 1:
            return list(self.renderers[0].render_spans_many(items))
        from concurrent.futures import ThreadPoolExecutor

        size = -(-len(items) // k)
        chunks = [items[i * size:(i + 1) * size] for i in range(k)]
        with ThreadPoolExecutor(max_workers=k, thread_name_prefix="trainproof-map-render") as pool:
            parts = list(pool.map(lambda rc: rc[0].render_spans_many(rc[1]), zip(self.renderers, chunks)))
        return [r for part in parts for r in part]

    def close(self) -> None:
        # The children first: a helper thread waiting on one sees its end and stops; then
        # again, for a child it started meanwhile. None is left behind.
        for r in self.renderers:
            r.close()
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            for r in self.renderers:
                r.close()


def _template_ids(tok: RunTokenizer, masking: Masking) -> list[int] | None:
    """The response template tokenised alone, as the collator tokenises it."""
    if masking.response_template is None:
        return None
    return list(tok.tokenizer.encode(masking.response_template, add_special_tokens=False).ids)


def encode_texts(texts: Sequence[Text | None], tok: RunTokenizer,
                 render: Callable[[list[tuple[list[dict[str, Any]], bool]]], list[Any]], *, need_offsets: bool
                 ) -> tuple[list[_Encoded | None], dict[int, str]]:
    """Render the conversations (one child, in order) and encode everything in two
    encode_batch calls: plain texts with special tokens, rendered ones without. A
    conversation the template refuses is None in the list, with the template's words
    in the dict under its position."""
    from . import chat_template as ct

    rendered: dict[int, tuple[str, tuple[tuple[int, int], ...] | None]] = {}
    errors: dict[int, str] = {}
    convs = [(i, t) for i, t in enumerate(texts) if isinstance(t, _Conv)]
    if convs:
        results = render([(c.messages, c.generation_prompt) for _, c in convs])
        for (i, _), r in zip(convs, results):
            if isinstance(r, ct.TemplateRejected):
                errors[i] = str(r)
            else:
                rendered[i] = r
    plain = [(i, t) for i, t in enumerate(texts) if isinstance(t, str)]
    out: list[_Encoded | None] = [None] * len(texts)
    # Without offsets to keep, encode_batch_fast (the same ids, ~10% less time) where this
    # `tokenizers` has it.
    enc = tok.tokenizer.encode_batch
    if not need_offsets:
        enc = getattr(tok.tokenizer, "encode_batch_fast", enc)
    if plain:
        for (i, t), e in zip(plain, enc([t for _, t in plain], add_special_tokens=True)):
            out[i] = _Encoded(ids=e.ids, offsets=e.offsets if need_offsets else None, text=t, spans=None)
    if rendered:
        keys = sorted(rendered)
        for i, e in zip(keys, enc([rendered[i][0] for i in keys], add_special_tokens=False)):
            out[i] = _Encoded(ids=e.ids, offsets=e.offsets if need_offsets else None, text=rendered[i][0],
                              spans=rendered[i][1])
    return out, errors


def map_tokens(path: Path | str, tok: RunTokenizer, masking: Masking, *, lines: int, records: int,
               layout: str = "jsonl", data: bytes | None = None, sample: int | None = None) -> TokenMap:
    """Stream the file's rows and map them, BATCH_ROWS at a time; with `sample`, every
    k-th row so that about `sample` rows are mapped. Raises chat_template.TemplateUnusable
    when the template cannot be rendered within the child's limits (the map would be a
    guess: none at all)."""
    stride = max(1, math.ceil(records / sample)) if sample else 1
    blank = array("i", [NOT_MAPPED]) * lines
    pad = _pad_id(tok, masking)
    out = TokenMap(path=str(path), tokenizer=tok.folder, masking=masking, rows=0, records=records, sample=sample,
                   stride=stride, generation_blocks=tok.generation_blocks, eos_token=tok.special.get("eos_token"),
                   pad_token=masking.pad_token or tok.special.get("pad_token") or tok.special.get("eos_token"),
                   pad_is_eos=pad is not None and pad == tok.eos_id, loss="",
                   tokens=blank, second=array("i", blank), kept=array("i", blank), prompt=array("i", blank),
                   trained=array("i", blank), before=array("i", blank), flags=array("B", bytes(lines)))
    batch = _Batch(tok, masking, out)
    kinds: set[str] = set()
    index = 0
    try:
        for line, obj in ds.iter_records(path, layout=layout, data=data):
            if line >= lines:
                continue
            index += 1
            if (index - 1) % stride:
                continue
            got = row_sequences(obj, tok, masking)
            if got is None:
                continue
            kinds.add(got[0])
            batch.add(line, *got)
            if len(batch.rows) >= BATCH_ROWS:
                batch.flush()
        batch.flush(last=True)
    finally:
        batch.close()
    rows = sum(1 for v in out.trained if v != NOT_MAPPED)
    pc = bool(kinds & {ds.PROMPT_COMPLETION, ds.ALPACA, ds.PREFERENCE})
    return TokenMap(**{**out.__dict__, "rows": rows, "loss": masking.loss_name(pc),
                       "template_errors": tuple(batch.errors), "pairs": batch.pairs,
                       "conversations": batch.conversations})


# --- one row, token by token (the editor's hover) ------------------------------------------


@dataclass(frozen=True, kw_only=True)
class SideMap:
    """One sequence of a row: its tokens, which carry loss, where truncation cuts."""

    text: str  # what was encoded (the rendered conversation, or the text with EOS)
    ids: tuple[int, ...]
    tokens: tuple[str, ...]
    offsets: tuple[tuple[int, int], ...]
    trained: tuple[tuple[int, int], ...]  # token intervals carrying loss
    kept: tuple[int, int]  # the window truncation keeps
    turns: tuple[tuple[int, int, str], ...] = ()  # (start, end, role) characters of each turn's content
    before: int = 0
    after: int = 0
    flags: int = 0
    # 1 where the token carries loss, over the kept window (labels != -100 in the trainer)
    mask: tuple[int, ...] = ()


@dataclass(frozen=True, kw_only=True)
class RowMap:
    fmt: str
    loss: str
    sides: tuple[SideMap, ...]
    error: str | None = None  # the template refused the row


def map_row(obj: Any, tok: RunTokenizer, masking: Masking) -> RowMap | None:
    """One row mapped token by token (one render child for the row). None when the row
    cannot be mapped in its format."""
    if not isinstance(obj, dict):
        return None
    got = row_sequences(obj, tok, masking)
    if got is None:
        return None
    fmt, seqs = got
    texts: list[Text] = []
    for s in seqs:
        texts.append(s.full)
        if s.prompt is not None:
            texts.append(s.prompt)
    holder: list[Any] = []

    def render(items: list[tuple[list[dict[str, Any]], bool]]) -> list[Any]:
        from . import chat_template as ct

        holder.append(ct.Renderer(tok.template or "", variables=tok.special, spans=True))
        return list(holder[-1].render_spans_many(items))

    try:
        encoded, errors = encode_texts(texts, tok, render, need_offsets=True)
    finally:
        for r in holder:
            r.close()
    pc = fmt in (ds.PROMPT_COMPLETION, ds.ALPACA, ds.PREFERENCE)
    if errors:
        return RowMap(fmt=fmt, loss=masking.loss_name(pc), sides=(), error=next(iter(errors.values())))
    sides = []
    at = 0
    template_ids = _template_ids(tok, masking)
    pad_masked = _pad_id(tok, masking) if (masking.pad_masked or masking.response_template is not None) else None
    for s in seqs:
        full = encoded[at]
        at += 1
        prompt = None
        if s.prompt is not None:
            prompt = encoded[at]
            at += 1
        assert full is not None
        f = sequence_facts(full, prompt.ids if prompt is not None else None, s, tok, masking,
                           fmt in (ds.PROMPT_COMPLETION, ds.ALPACA), template_ids)
        enc = tok.tokenizer.encode(full.text, add_special_tokens=s.special)
        turns = _turn_spans(full.text, s.full.messages, None) if isinstance(s.full, _Conv) else ()
        lo, hi = f.kept
        mask = [0] * (hi - lo)
        for a, b in f.trained:
            for i in range(max(a, lo), min(b, hi)):
                if pad_masked is None or full.ids[i] != pad_masked:
                    mask[i - lo] = 1
        sides.append(SideMap(text=full.text, ids=tuple(full.ids), tokens=tuple(enc.tokens),
                             offsets=tuple((a, b) for a, b in enc.offsets), trained=tuple(f.trained), kept=f.kept,
                             turns=tuple(turns), before=f.before, after=f.after, flags=f.flags, mask=tuple(mask)))
    return RowMap(fmt=fmt, loss=masking.loss_name(pc), sides=tuple(sides))


def threads() -> int:
    """Threads encode_batch may use: RAYON_NUM_THREADS when it names a number of threads,
    else every core this process may run on (rayon's own default)."""
    try:
        given = int(os.environ.get("RAYON_NUM_THREADS", "") or 0)
    except ValueError:
        given = 0
    if given >= 1:
        return given
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity call (macOS, Windows)
        return os.cpu_count() or 1


__all__ = ["Masking", "RunTokenizer", "TokenMap", "RowMap", "SideMap", "MapUnavailable", "load_run_tokenizer",
           "map_tokens", "map_row", "row_sequences", "NOT_MAPPED", "TEMPLATE_MISSING", "PAIR_IDENTICAL",
           "PAIR_IDENTICAL_BEFORE", "DOUBLE_BOS", "EOS_TRAINED", "EOS_PRESENT", "SPANS_UNKNOWN", "KEEP_START", "KEEP_END",
           "GENERATION", "TURNS", "available"]
