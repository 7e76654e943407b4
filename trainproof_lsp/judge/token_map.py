"""The token map for preflight: the run's masking resolved, the map built, its facts handed
to the token rules.

    MapOptions                                   what the command line (or the editor's
                                                 settings) says: --max-len, --truncation,
                                                 --loss, --response-template, --train-config,
                                                 --sample, --collator-masks-pad
    resolve_masking(options) -> Masking | str    the run's masking; each value from the command
                                                 line, else the script/config, else TRL's default,
                                                 and the report says which
    build_map(scan, tok, masking, ...)           -> TokenMap | str (why not)
    lengths_from_map(token_map)                  -> TokenLengths (what rules/tokens.py reads)

The map is the door `preflight --tokenizer DIR --max-len N` opens when the folder has a
tokenizer.json and the `tokenizers` package is there; without them the counts come from
transformers (readers/tokens.py) as before, and the map's own rules are listed as skipped.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..core.model import ReadError
from ..readers import token_map as tm
from ..readers.dataset import DatasetScan
from ..readers.tokens import NOT_COUNTED, TokenLengths
from ..readers.token_settings import EOS, read_run_settings

LOSSES = ("all", "assistant-only", "completion-only")
TRUNCATIONS = {"keep_start": tm.KEEP_START, "right": tm.KEEP_START, "keep_end": tm.KEEP_END, "left": tm.KEEP_END}


@dataclass(frozen=True, kw_only=True)
class MapOptions:
    """The command line's (or the editor's) word on the run; None: not said there."""

    max_len: int | None = None
    truncation: str | None = None  # keep_start/right or keep_end/left
    loss: str | None = None  # one of LOSSES
    response_template: str | None = None
    train_config: Path | None = None  # a training script or YAML config to read the rest from
    sample: int | None = None  # map about this many rows, evenly spread
    pad_masked: bool | None = None  # the collator masks labels equal to the pad id

    @property
    def given(self) -> bool:
        return any(v is not None for v in (self.truncation, self.loss, self.response_template, self.train_config,
                                            self.sample, self.pad_masked))


def resolve_masking(options: MapOptions) -> tm.Masking | str:
    """The run's masking, or why it cannot be known (an unreadable --train-config)."""
    read: dict[str, tuple[Any, str]] = {}
    if options.train_config is not None:
        try:
            settings = read_run_settings(options.train_config)
        except ReadError as e:
            return f"--train-config {e}"
        read = {k: (v.value, v.where) for k, v in settings.values.items()}
    sources: list[tuple[str, str]] = []

    def pick(name: str, cli: Any, cli_name: str, default: Any, default_where: str) -> Any:
        if cli is not None:
            sources.append((name, cli_name))
            return cli
        if name in read:
            sources.append((name, read[name][1]))
            return read[name][0]
        if default_where:
            sources.append((name, default_where))
        return default

    max_len = pick("max_len", options.max_len, "--max-len", None, "")
    if max_len is not None and (not isinstance(max_len, int) or isinstance(max_len, bool) or max_len < 1):
        return f"max length {max_len!r} from {dict(sources).get('max_len')} is not a positive whole number"
    trunc_cli = TRUNCATIONS.get(options.truncation or "") if options.truncation else None
    truncation = pick("truncation", trunc_cli, "--truncation", tm.KEEP_START, "TRL's default")
    if truncation not in (tm.KEEP_START, tm.KEEP_END):
        return f"truncation {truncation!r} is neither keep_start nor keep_end"
    loss = options.loss
    assistant = pick("assistant_only", None if loss is None else loss == "assistant-only", "--loss", False, "")
    completion = pick("completion_only", None if loss is None else (loss == "completion-only" or None), "--loss",
                      None, "")
    if loss == "all":
        completion = False
    if not any(k in ("assistant_only", "completion_only") for k, _ in sources):
        sources.append(("loss", "TRL's default (completion-only on prompt/completion rows, else every token)"))
    by = read.get("assistant_by", (tm.GENERATION, ""))[0]
    template = pick("response_template", options.response_template, "--response-template", None, "")
    pad_masked = pick("pad_masked", options.pad_masked, "--collator-masks-pad", False, "")
    pad = read.get("pad_token", (None, ""))
    if pad[0] is not None:
        sources.append(("pad_token", pad[1]))
    packing = bool(read.get("packing", (False, ""))[0])
    if packing:
        sources.append(("packing", read["packing"][1]))
    return tm.Masking(max_len=max_len, truncation=truncation, completion_only=completion,
                      assistant_only=bool(assistant), assistant_by=by if by in (tm.GENERATION, tm.TURNS) else tm.GENERATION,
                      response_template=template, pad_masked=bool(pad_masked),
                      pad_token=pad[0] if isinstance(pad[0], str) else None, packing=packing,
                      sources=tuple(sources))


def with_pad(masking: tm.Masking, tok: tm.RunTokenizer) -> tm.Masking:
    """`pad_token = eos_token` in the script names the tokenizer's EOS."""
    if masking.pad_token == EOS:
        return replace(masking, pad_token=tok.special.get("eos_token"))
    return masking


class MapBuilder:
    """The token map for one invocation: the tokenizer is loaded once, on first use."""

    def __init__(self, tokenizer_dir: Path | str, masking: tm.Masking, sample: int | None = None) -> None:
        self.tokenizer_dir, self.masking, self.sample = tokenizer_dir, masking, sample
        self._tok: tm.RunTokenizer | str | None = None

    def tokenizer(self) -> tm.RunTokenizer | str:
        if self._tok is None:
            try:
                self._tok = tm.load_run_tokenizer(self.tokenizer_dir)
            except tm.MapUnavailable as e:
                self._tok = str(e)
        return self._tok

    def usable(self) -> bool:
        """A tokenizer.json `tokenizers` can load: the map is the door, else transformers counts."""
        return isinstance(self.tokenizer(), tm.RunTokenizer)

    def build(self, scan: DatasetScan, data: bytes | None = None) -> tm.TokenMap | str:
        tok = self.tokenizer()
        if isinstance(tok, str):
            return tok
        return tm.map_tokens(scan.path, tok, with_pad(self.masking, tok), lines=scan.lines, records=scan.records,
                             layout=scan.layout, data=data, sample=self.sample)


def lengths_from_map(m: tm.TokenMap) -> TokenLengths:
    """The counts rules/tokens.py reads, from the map. A row whose response template is
    missing is TP-MAP-RESPONSE-TEMPLATE-MISSING's, not TP-PRE-NO-TRAINABLE-TOKENS' (one
    fault, one finding): its trained count is left out."""
    trained = array("i", m.trained)
    for i, f in enumerate(m.flags):
        if f & tm.TEMPLATE_MISSING:
            trained[i] = NOT_COUNTED
    cause = ""
    if m.masking.assistant_only and m.masking.assistant_by == tm.GENERATION and not m.generation_blocks:
        cause = "assistant-only loss, and the chat template has no {% generation %} blocks to mark assistant tokens"
    elif m.masking.assistant_only:
        cause = "assistant-only loss, and no assistant turn is left"
    elif m.loss.startswith(tm.COMPLETION):
        cause = "completion-only loss, and the completion is empty"
    return TokenLengths(path=m.path, tokenizer=m.tokenizer, rows=m.rows, templated=m.conversations > 0,
                        tokens=m.tokens, second=m.second, prompt=m.prompt, template_errors=m.template_errors,
                        trained=trained, before=m.before, cause=cause, token_map=m)


__all__ = ["MapOptions", "MapBuilder", "resolve_masking", "lengths_from_map", "LOSSES", "TRUNCATIONS"]
