"""Training scripts read with `ast` — never imported, never run -> `ScriptFacts`.

What is read:
- every HF `TrainingArguments`-family call (`TrainingArguments(...)`, TRL's
  `SFTConfig(...)`, `DPOConfig(...)`, ...) with each keyword's value where it can be
  known statically: a literal, arithmetic on literals, a constant assigned once in the
  same function or module (`LR = 0.0` ... `learning_rate=LR`), `**{...}` / `**dict(...)`
  of those, and `args.fp16 = True` assignments after the call;
- every `*Trainer(...)` call: which config it gets (`args=`) and whether it gets an
  `eval_dataset`;
- every import statement with its context (module level, inside a function, optional
  under `try/except ImportError`, under `if TYPE_CHECKING`), for `env`;
- every call of a class imported from a training library (`API_ROOTS`: `TrainingArguments`,
  `LoraConfig`, `BitsAndBytesConfig`, `SFTTrainer`, Lightning's `Trainer`, ...), resolved
  through the script's own imports to the module and attribute it names, with each
  keyword's name and span: `env` binds them to the installed class's signature;
- `HfArgumentParser((..., TrainingArguments))`: a config whose values are the literal
  defaults of its dataclass (`save_steps: int = field(default=100)` in a subclass) and the
  `--flag value` list of the launch script that runs the file (readers/launch.py), the
  values located in that `.sh`;
- the datasets it names on disk (`load_dataset("json", data_files=...)`,
  `Dataset.from_json(...)`, a dataclass field or flag such as `train_file`) with their rows
  counted by the preflight reader, and the launcher's process count: the run's length.

Every value carries the span of its source text, so findings land on the exact line.
"""

from __future__ import annotations

import ast
import functools
import stat
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Protocol

from ..core.model import ReadError, Span

# HF TrainingArguments and the TRL configs that subclass it. detect.py uses this list to
# tell a training script from any other Python file.
CONFIG_CLASSES = (
    "TrainingArguments", "Seq2SeqTrainingArguments", "SFTConfig", "DPOConfig", "ORPOConfig",
    "KTOConfig", "CPOConfig", "GRPOConfig", "RewardConfig", "PPOConfig", "PRMConfig", "GKDConfig",
    "OnlineDPOConfig", "BCOConfig", "XPOConfig", "NashMDConfig", "RLOOConfig",
)
_OPTIONAL_EXCEPTIONS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}
# The training libraries whose classes' keywords `env` binds to the installed signatures:
# the ones whose configs renamed or removed keywords between releases (transformers 4 -> 5,
# TRL's configs, PEFT, Lightning 1 -> 2, accelerate, bitsandbytes).
API_ROOTS = frozenset({"transformers", "trl", "peft", "lightning", "pytorch_lightning", "accelerate",
                       "bitsandbytes"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Value:
    """A keyword's value as far as the source tells it."""

    known: bool
    value: Any  # bool | int | float | str | None when known
    span: Span  # the expression at the call (or the assignment that set it)
    text: str  # the source text of that expression
    via: str | None = None  # the constant it came through ("LR")
    via_span: Span | None = None  # where that constant is assigned
    path: str | None = None  # the file it is written in, when not the script (a launch script)
    # set by an attribute assignment after the call (`args.fp16 = True`): span and text
    # are the whole statement
    assigned: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigCall:
    cls: str
    span: Span  # the call
    kwargs: Mapping[str, Value]
    var: str | None  # the name it is assigned to
    scope: str  # "<module>" or the enclosing function's name
    opaque: bool = False  # has **kwargs (or positional args) whose contents are unknown
    # "call": a call in the script; "parser": HfArgumentParser's dataclass (values: its
    # literal defaults and the launch script's flags)
    origin: str = "call"


@dataclass(frozen=True, slots=True, kw_only=True)
class DatasetRef:
    """A dataset file the script (or its launch script) names."""

    text: str  # the path as written
    span: Span
    path: str | None = None  # the file it is written in, when not the script
    split: str = "train"  # "train" | "eval"
    rows: int | None = None  # counted by the preflight reader, when the file is on disk
    found: str = ""  # the file counted
    note: str = ""  # why rows is None


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRef:
    """A `*.from_pretrained("name or folder", torch_dtype=...)` call of a model class."""

    text: str  # the name or folder as written
    span: Span
    load_dtype: str | None = None  # "float16" | "bfloat16" | "float32" | "auto" as the call asks
    load_dtype_span: Span | None = None
    config: str = ""  # the config.json found on disk (the folder, or the local HF cache)
    # the dotted module names of the weights beside it (tensor names without their last
    # part), from model.safetensors.index.json or the safetensors headers; () if none
    modules: tuple[str, ...] = ()
    modules_from: str = ""
    torch_dtype: str | None = None  # config.json's torch_dtype / dtype: what it was saved in
    model_type: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainerCall:
    cls: str
    span: Span
    config: int | None  # index into ScriptFacts.configs of the config it gets
    config_unknown: bool  # gets args= that could not be followed
    eval_dataset: Value | None  # the eval_dataset argument when given and not None


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportLine:
    module: str  # absolute dotted name as written ("" for `from . import x`)
    level: int  # leading dots of a relative import
    names: tuple[str, ...]  # `from module import names` ("*" kept); () for `import module`
    span: Span
    context: str  # "module" | "function" | "optional" | "type-checking"


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiKeyword:
    name: str
    name_span: Span  # the keyword's name alone: what a rename replaces
    value: Value
    quoted: bool = False  # a key of a `**{...}` dict: the name is inside quotes


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiCall:
    """A call of a class imported from one of API_ROOTS, as the script's imports name it."""

    written: str  # the callee as written ("TrainingArguments", "L.Trainer")
    module: str  # the module the name was imported from ("transformers", "lightning")
    attr: str  # the attribute path inside it ("TrainingArguments", "pytorch.Trainer")
    span: Span  # the call
    keywords: tuple[ApiKeyword, ...]
    opaque: bool = False  # has **kwargs whose keys are unknown


@dataclass(frozen=True, kw_only=True)
class ScriptFacts:
    path: str
    configs: tuple[ConfigCall, ...] = ()
    trainers: tuple[TrainerCall, ...] = ()
    imports: tuple[ImportLine, ...] = ()
    calls_evaluate: bool = False  # `.evaluate(` appears: evaluation may be run by hand
    has_main_guard: bool = False
    api_calls: tuple[ApiCall, ...] = ()
    datasets: tuple[DatasetRef, ...] = ()
    models: tuple[ModelRef, ...] = ()
    # the script sets up adapters (LoraConfig, get_peft_model, peft_config=): only they train
    adapters: bool = False
    processes: Value | None = None  # the launcher's process count (torchrun --nproc_per_node)
    launch: str = ""  # the launch script whose flags were read
    source_lines: tuple[str, ...] = field(default=(), repr=False)


class _Located(Protocol):
    """An ast node with a position (statements, expressions, keywords, arguments)."""

    lineno: int
    col_offset: int
    end_lineno: int | None
    end_col_offset: int | None


def _span(node: _Located) -> Span:
    # ast columns are UTF-8 byte offsets; spans count code points (positions.py's rule).
    line = node.lineno - 1
    end_line = (node.end_lineno or node.lineno) - 1
    end_col = node.end_col_offset if node.end_col_offset is not None else node.col_offset
    return Span(line, node.col_offset, end_line, end_col)


def _fix_columns(span: Span, lines: list[bytes]) -> Span:
    def col(line: int, byte_col: int) -> int:
        if 0 <= line < len(lines):
            return len(lines[line][:byte_col].decode("utf-8", "replace"))
        return byte_col
    return Span(span.start_line, col(span.start_line, span.start_char), span.end_line,
                col(span.end_line, span.end_char))


def _call_name(func: ast.AST) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


class _Reader:
    def __init__(self, path: str, data: bytes, tree: ast.Module) -> None:
        self.path = path
        self.lines = data.split(b"\n")
        self.text_lines = data.decode("utf-8", "replace").split("\n")
        self.tree = tree
        # Single assignments per scope: name -> value node (None when assigned twice).
        self.assigns: dict[str, dict[str, ast.Assign | ast.AnnAssign | None]] = {}
        self.configs: list[ConfigCall] = []
        self.trainers: list[tuple[str, ast.Call, str]] = []
        self.imports: list[ImportLine] = []
        self.calls_evaluate = False
        self.attr_assigns: list[tuple[str, ast.Assign]] = []
        # Names the imports bind: local name -> (module, attribute path inside it; "" for
        # the module itself). A name bound twice keeps the last binding.
        self.bindings: dict[str, tuple[str, str]] = {}
        self.class_calls: list[tuple[list[str], ast.Call, str]] = []
        # Dataclasses: name -> (base names, field name -> default value); and the
        # HfArgumentParser calls with the class names they are given.
        self.dataclasses: dict[str, tuple[list[str], dict[str, Value]]] = {}
        self.parsers: list[tuple[list[str], ast.Call, str]] = []
        self.datasets: list[DatasetRef] = []
        self.models: list[ModelRef] = []
        self.adapters = False

    def span(self, node: _Located) -> Span:
        return _fix_columns(_span(node), self.lines)

    def text(self, node: ast.AST) -> str:
        seg = ast.get_source_segment("\n".join(self.text_lines), node)
        return (seg or "").strip()[:120]

    # -- scopes --------------------------------------------------------------------------
    def collect_assigns(self) -> None:
        def visit(statements: list[ast.stmt], scope: str) -> None:
            table = self.assigns.setdefault(scope, {})
            for node in statements:
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    name = node.targets[0].id
                elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                    name = node.target.id
                elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                    table[node.target.id] = None  # changed after assignment: not a constant
                    continue
                else:
                    continue
                # A name assigned twice in one scope has no single static value.
                table[name] = None if name in table else node

        visit(_scope_statements(self.tree.body), "<module>")
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(_scope_statements(node.body), node.name)

    def lookup(self, name: str, scope: str) -> ast.Assign | ast.AnnAssign | None:
        for s in (scope, "<module>"):
            table = self.assigns.get(s, {})
            if name in table:
                return table[name]
        return None

    # -- values ----------------------------------------------------------------------------
    def resolve(self, node: ast.AST, scope: str, depth: int = 0) -> tuple[bool, Any, str | None, Span | None]:
        if depth > 12:
            return False, None, None, None
        if isinstance(node, ast.Constant):
            return True, node.value, None, None
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)) and len(node.elts) <= 256:
            # a list of names, as LoRA's target_modules: a tuple of str, when every item is one
            items = [self.resolve(e, scope, depth + 1) for e in node.elts]
            if all(ok and isinstance(v, str) for ok, v, _, _ in items):
                return True, tuple(v for _, v, _, _ in items), None, None
            return False, None, None, None
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Not)):
            ok, v, via, vs = self.resolve(node.operand, scope, depth + 1)
            if ok and isinstance(node.op, ast.Not):
                return True, not v, via, vs
            if ok and isinstance(v, (int, float)) and not isinstance(v, bool):
                return True, -v if isinstance(node.op, ast.USub) else v, via, vs
            return False, None, None, None
        if isinstance(node, ast.BinOp):
            ok1, a, via1, vs1 = self.resolve(node.left, scope, depth + 1)
            ok2, b, via2, vs2 = self.resolve(node.right, scope, depth + 1)
            if ok1 and ok2 and isinstance(a, (int, float)) and isinstance(b, (int, float)):
                try:
                    v = _binop(node.op, a, b)
                except (ZeroDivisionError, OverflowError, ValueError):
                    return False, None, None, None
                if v is not None:
                    return True, v, via1 or via2, vs1 or vs2
            return False, None, None, None
        if isinstance(node, ast.Name):
            if node.id in ("True", "False", "None"):
                return True, {"True": True, "False": False, "None": None}[node.id], None, None
            target = self.lookup(node.id, scope)
            if target is None or target.value is None:
                return False, None, None, None
            ok, v, _, _ = self.resolve(target.value, scope, depth + 1)
            return ok, v, node.id, self.span(target) if ok else None
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                node.value.id in ("IntervalStrategy", "SaveStrategy", "EvaluationStrategy"):
            return True, node.attr.lower(), None, None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("int", "float") \
                and len(node.args) == 1 and not node.keywords:
            ok, v, via, vs = self.resolve(node.args[0], scope, depth + 1)
            if ok:
                try:
                    return True, (int if node.func.id == "int" else float)(v), via, vs
                except (TypeError, ValueError, OverflowError):
                    pass
        return False, None, None, None

    def value(self, node: ast.expr, scope: str, where: ast.stmt | None = None) -> Value:
        ok, v, via, via_span = self.resolve(node, scope)
        at = where if where is not None else node
        return Value(known=ok, value=v if ok else None, span=self.span(at), text=self.text(at),
                     via=via, via_span=via_span, assigned=where is not None)

    def star_kwargs(self, node: ast.AST, scope: str) -> dict[str, Value] | None:
        """`**{...}` / `**dict(...)` / `**NAME` of those, as keyword values; None if unknown."""
        if isinstance(node, ast.Name):
            target = self.lookup(node.id, scope)
            if target is None or target.value is None:
                return None
            node = target.value
        if isinstance(node, ast.Dict):
            out: dict[str, Value] = {}
            for k, v in zip(node.keys, node.values):
                if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
                    return None
                out[k.value] = self.value(v, scope)
            return out
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" and not node.args:
            out = {}
            for kw in node.keywords:
                if kw.arg is None:
                    return None
                out[kw.arg] = self.value(kw.value, scope)
            return out
        return None

    # -- walk ------------------------------------------------------------------------------
    def run(self) -> ScriptFacts:
        self.collect_assigns()
        self.walk(self.tree, "<module>", "module")
        self.parser_configs()
        # Attribute assignments after the call: `args.fp16 = True`.
        by_var = {(c.scope, c.var): i for i, c in enumerate(self.configs) if c.var}
        for scope, node in self.attr_assigns:
            target = node.targets[0]
            assert isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
            for key in ((scope, target.value.id), ("<module>", target.value.id)):
                if key in by_var:
                    i = by_var[key]
                    c = self.configs[i]
                    kwargs = dict(c.kwargs)
                    kwargs[target.attr] = self.value(node.value, scope, where=node)
                    self.configs[i] = ConfigCall(cls=c.cls, span=c.span, kwargs=kwargs, var=c.var, scope=c.scope,
                                                 opaque=c.opaque)
                    break
        trainers = [self.trainer(cls, call, scope) for cls, call, scope in self.trainers]
        has_main = any(_is_main_guard(n) for n in self.tree.body)
        api = [a for a in (self.api_call(chain, call, scope) for chain, call, scope in self.class_calls)
               if a is not None]
        api.sort(key=lambda a: (a.span.start_line, a.span.start_char))
        return ScriptFacts(path=self.path, configs=tuple(self.configs), trainers=tuple(trainers),
                           imports=tuple(self.imports), calls_evaluate=self.calls_evaluate,
                           has_main_guard=has_main, api_calls=tuple(api), datasets=tuple(self.datasets),
                           models=tuple(self.models), adapters=self.adapters,
                           source_lines=tuple(self.text_lines))

    def walk(self, root: ast.AST, scope: str, context: str) -> None:
        todo: list[tuple[ast.AST, str, str, str | None]] = [(root, scope, context, None)]
        while todo:
            node, scope, context, assigned = todo.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for child in reversed(node.body):
                    todo.append((child, node.name, "function" if context != "type-checking" else context, None))
                for d in node.decorator_list:
                    todo.append((d, scope, context, None))
                continue
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                self.add_import(node, context)
                continue
            if isinstance(node, ast.ClassDef) and any(_call_name(d.func if isinstance(d, ast.Call) else d)
                                                      == "dataclass" for d in node.decorator_list):
                self.add_dataclass(node, scope)
            if isinstance(node, ast.If) and _is_type_checking(node.test):
                for child in node.body:
                    todo.append((child, scope, "type-checking", None))
                for child in node.orelse:
                    todo.append((child, scope, context, None))
                continue
            if isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
                handlers = getattr(node, "handlers", [])
                optional = any(_catches_import_error(h) for h in handlers)
                inner = "optional" if optional and context in ("module", "function") else context
                for child in getattr(node, "body", []):
                    todo.append((child, scope, inner, None))
                for part in ("handlers", "orelse", "finalbody"):
                    for child in getattr(node, part, []):
                        todo.append((child, scope, context, None))
                continue
            if isinstance(node, ast.Assign):
                target = node.targets[0] if len(node.targets) == 1 else None
                if isinstance(target, ast.Name):
                    todo.append((node.value, scope, context, target.id))
                    continue
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
                    self.attr_assigns.append((scope, node))
            if isinstance(node, ast.Call):
                chain = _dotted(node.func)
                if chain and chain[-1][:1].isupper():
                    self.class_calls.append((chain, node, scope))
                name = _call_name(node.func)
                if name in CONFIG_CLASSES:
                    self.add_config(name, node, scope, assigned)
                elif name and name.endswith("Trainer"):
                    self.trainers.append((name, node, scope))
                elif name == "evaluate" and isinstance(node.func, ast.Attribute):
                    self.calls_evaluate = True
                elif name == "HfArgumentParser" and node.args:
                    first = node.args[0]
                    elts = first.elts if isinstance(first, (ast.Tuple, ast.List)) else [first]
                    self.parsers.append(([e.id for e in elts if isinstance(e, ast.Name)], node, scope))
                elif name in _DATASET_CALLS:
                    self.add_dataset_call(name, node, scope)
                elif name == "from_pretrained" and isinstance(node.func, ast.Attribute):
                    self.add_model(node, scope)
                if name in _ADAPTER_CALLS or any(k.arg == "peft_config" for k in node.keywords):
                    self.adapters = True
            for sub in reversed(list(ast.iter_child_nodes(node))):
                todo.append((sub, scope, context, None))

    def add_import(self, node: ast.Import | ast.ImportFrom, context: str) -> None:
        span = self.span(node)
        if isinstance(node, ast.Import):
            for alias in node.names:
                self.imports.append(ImportLine(module=alias.name, level=0, names=(), span=span, context=context))
                if alias.asname:  # import a.b as c: c is a.b
                    self.bindings[alias.asname] = (alias.name, "")
                else:  # import a.b: a is bound, a.b reached through it
                    root = alias.name.split(".")[0]
                    self.bindings[root] = (root, "")
        else:
            if node.module == "__future__":
                return
            if not node.level and node.module:
                for alias in node.names:
                    if alias.name != "*":
                        self.bindings[alias.asname or alias.name] = (node.module, alias.name)
            self.imports.append(ImportLine(module=node.module or "", level=node.level or 0,
                                           names=tuple(a.name for a in node.names), span=span, context=context))

    def add_config(self, cls: str, call: ast.Call, scope: str, var: str | None) -> None:
        kwargs: dict[str, Value] = {}
        opaque = bool(call.args)
        for kw in call.keywords:
            if kw.arg is None:
                extra = self.star_kwargs(kw.value, scope)
                if extra is None:
                    opaque = True
                else:
                    kwargs.update(extra)
            else:
                kwargs[kw.arg] = self.value(kw.value, scope)
        self.configs.append(ConfigCall(cls=cls, span=self.span(call), kwargs=kwargs, var=var, scope=scope,
                                       opaque=opaque))

    def add_model(self, call: ast.Call, scope: str) -> None:
        owner = _call_name(call.func.value) if isinstance(call.func, ast.Attribute) else None
        if not owner or "Model" not in owner or "Tokenizer" in owner or not call.args:
            return
        first = self.value(call.args[0], scope)
        if not (first.known and isinstance(first.value, str)):
            return
        dtype = next((k.value for k in call.keywords if k.arg in ("torch_dtype", "dtype")), None)
        load = _dtype_name(self.text(dtype)) if dtype is not None else None
        self.models.append(ModelRef(text=first.value, span=first.span, load_dtype=load,
                                    load_dtype_span=self.span(dtype) if dtype is not None else None))

    def add_dataclass(self, node: ast.ClassDef, scope: str) -> None:
        fields: dict[str, Value] = {}
        for stmt in node.body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None):
                continue
            default: ast.expr | None = stmt.value
            if isinstance(stmt.value, ast.Call) and _call_name(stmt.value.func) == "field":
                default = next((k.value for k in stmt.value.keywords if k.arg == "default"), None)
            if default is not None:
                fields[stmt.target.id] = self.value(default, scope)
        bases = [b for b in (_call_name(x) for x in node.bases) if b]
        self.dataclasses[node.name] = (bases, fields)

    def add_dataset_call(self, name: str, call: ast.Call, scope: str) -> None:
        """load_dataset("json", data_files=PATH | [PATH] | {"train": PATH, ...}),
        load_dataset(PATH), Dataset.from_json(PATH) / from_csv / from_parquet."""
        target: ast.expr | None = None
        if name == "load_dataset":
            target = next((k.value for k in call.keywords if k.arg == "data_files"), None)
            if target is None and call.args:
                first = self.value(call.args[0], scope)
                if first.known and isinstance(first.value, str) and _is_data_file(first.value):
                    target = call.args[0]
        elif call.args:
            target = call.args[0]
        if target is None:
            return
        if isinstance(target, ast.Dict):
            for k, v in zip(target.keys, target.values):
                if isinstance(k, ast.Constant) and isinstance(k.value, str):
                    self.add_dataset(v, scope, "train" if k.value == "train" else "eval")
            return
        self.add_dataset(target, scope, "train")

    def add_dataset(self, node: ast.expr, scope: str, split: str) -> None:
        items = node.elts if isinstance(node, (ast.List, ast.Tuple)) else [node]
        for item in items:
            v = self.value(item, scope)
            if v.known and isinstance(v.value, str) and _is_data_file(v.value):
                self.datasets.append(DatasetRef(text=v.value, span=v.span, split=split))

    def parser_configs(self) -> None:
        """HfArgumentParser's dataclasses: a config class (or a local subclass of one)
        becomes a ConfigCall of its literal defaults; a data class's path-like defaults
        become datasets."""
        for names, call, scope in self.parsers:
            for name in names:
                base, defaults = self.config_dataclass(name, set())
                if base is not None:
                    self.configs.append(ConfigCall(cls=base, span=self.span(call), kwargs=defaults, var=None,
                                                   scope=scope, origin="parser"))
                    continue
                for key, v in self.dataclasses.get(name, ([], {}))[1].items():
                    if _dataset_key(key) and v.known and isinstance(v.value, str) and _is_data_file(v.value):
                        self.datasets.append(DatasetRef(text=v.value, span=v.span,
                                                        split="eval" if _eval_key(key) else "train"))

    def config_dataclass(self, name: str, seen: set[str]) -> tuple[str | None, dict[str, Value]]:
        if name in CONFIG_CLASSES:
            return name, {}
        if name in seen or name not in self.dataclasses:
            return None, {}
        seen.add(name)
        bases, fields = self.dataclasses[name]
        for b in bases:
            base, inherited = self.config_dataclass(b, seen)
            if base is not None:
                return base, {**inherited, **fields}
        return None, {}

    def api_call(self, chain: list[str], call: ast.Call, scope: str) -> ApiCall | None:
        """The call resolved through the imports to a class of API_ROOTS; None otherwise
        (a local class, a name assigned rather than imported)."""
        bound = self.bindings.get(chain[0])
        if bound is None:
            return None
        module, attr = bound
        if module.split(".")[0] not in API_ROOTS:
            return None
        attr = ".".join([p for p in (attr, *chain[1:]) if p])
        if not attr:
            return None
        keywords: list[ApiKeyword] = []
        opaque = False
        for kw in call.keywords:
            if kw.arg is not None:
                start = self.span(kw)
                name_span = Span(start.start_line, start.start_char, start.start_line,
                                 start.start_char + len(kw.arg))
                keywords.append(ApiKeyword(name=kw.arg, name_span=name_span, value=self.value(kw.value, scope)))
                continue
            extra = self.star_keywords(kw.value, scope)
            if extra is None:
                opaque = True
            else:
                keywords.extend(extra)
        return ApiCall(written=".".join(chain), module=module, attr=attr, span=self.span(call),
                       keywords=tuple(keywords), opaque=opaque)

    def star_keywords(self, node: ast.AST, scope: str) -> list[ApiKeyword] | None:
        """The keys of `**{...}` / `**dict(...)` (or a name assigned one once) with the span
        of each key's name; None when they are not all written out."""
        if isinstance(node, ast.Name):
            target = self.lookup(node.id, scope)
            if target is None or target.value is None:
                return None
            node = target.value
        out: list[ApiKeyword] = []
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
                    return None
                span = self.span(k)
                text = self.text(k)
                # a plain one-line "key" or 'key': the name sits between the quotes
                plain = len(text) == len(k.value) + 2 and text[0] in "'\"" and span.start_line == span.end_line
                name_span = Span(span.start_line, span.start_char + 1, span.end_line, span.end_char - 1) \
                    if plain else span
                out.append(ApiKeyword(name=k.value, name_span=name_span, value=self.value(v, scope), quoted=plain))
            return out
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" and not node.args:
            for kw in node.keywords:
                if kw.arg is None:
                    return None
                start = self.span(kw)
                out.append(ApiKeyword(name=kw.arg, name_span=Span(start.start_line, start.start_char,
                                                                  start.start_line, start.start_char + len(kw.arg)),
                                      value=self.value(kw.value, scope)))
            return out
        return None

    def trainer(self, cls: str, call: ast.Call, scope: str) -> TrainerCall:
        args_node: ast.expr | None = None
        eval_node: ast.expr | None = None
        for kw in call.keywords:
            if kw.arg == "args":
                args_node = kw.value
            elif kw.arg == "eval_dataset":
                eval_node = kw.value
        if args_node is None and len(call.args) >= 2:
            args_node = call.args[1]
        config: int | None = None
        unknown = False
        if args_node is not None:
            for i, c in enumerate(self.configs):
                if isinstance(args_node, ast.Call) and c.span == self.span(args_node):
                    config = i
                elif isinstance(args_node, ast.Name) and c.var == args_node.id and c.scope in (scope, "<module>"):
                    config = i
            unknown = config is None
        eval_value = None
        if eval_node is not None and not (isinstance(eval_node, ast.Constant) and eval_node.value is None):
            eval_value = Value(known=False, value=None, span=self.span(eval_node), text=self.text(eval_node))
        return TrainerCall(cls=cls, span=self.span(call), config=config, config_unknown=unknown,
                           eval_dataset=eval_value)


# Calls that set up adapters: only their parameters train.
_ADAPTER_CALLS = frozenset({"get_peft_model", "LoraConfig", "prepare_model_for_kbit_training", "PeftModel",
                            "AutoPeftModelForCausalLM"})


def _dtype_name(text: str) -> str | None:
    """torch.float16 / "float16" / torch.half / "auto" -> a dtype name; None if not one."""
    t = text.strip().strip("'\"").rsplit(".", 1)[-1].lower()
    return {"float16": "float16", "half": "float16", "fp16": "float16", "bfloat16": "bfloat16", "bf16": "bfloat16",
            "float32": "float32", "float": "float32", "auto": "auto"}.get(t)


# Calls that name a dataset file, and the suffixes of the files the preflight reader counts.
_DATASET_CALLS = frozenset({"load_dataset", "from_json", "from_csv", "from_parquet"})
_DATA_SUFFIXES = (".jsonl", ".json", ".ndjson")


def _is_data_file(text: str) -> bool:
    return text.lower().endswith(_DATA_SUFFIXES) and "\n" not in text


def _dataset_key(key: str) -> bool:
    """A dataclass field or flag that names a dataset file (train_file, data_path, ...)."""
    low = key.lower()
    return ("file" in low or "path" in low or "data" in low) and ("data" in low or "train" in low or "eval" in low
                                                                 or "valid" in low)


def _eval_key(key: str) -> bool:
    low = key.lower()
    return "eval" in low or "valid" in low or "test" in low


def _dotted(func: ast.AST) -> list[str] | None:
    """`a.b.C` -> ["a", "b", "C"]; None for anything but names and attributes."""
    parts: list[str] = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if not isinstance(func, ast.Name):
        return None
    parts.append(func.id)
    return parts[::-1]


def _binop(op: ast.operator, a: float, b: float) -> float | None:
    if isinstance(op, ast.Add):
        return a + b
    if isinstance(op, ast.Sub):
        return a - b
    if isinstance(op, ast.Mult):
        return a * b
    if isinstance(op, ast.Div):
        return a / b
    if isinstance(op, ast.FloorDiv):
        return a // b
    if isinstance(op, ast.Pow) and abs(b) <= 64:
        power = a ** b  # a negative base to a fractional power is complex: not a number here
        return power if isinstance(power, (int, float)) else None
    return None


def _scope_statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """Statements of one scope, descending into if/for/while/with/try but not into
    functions or classes."""
    out: list[ast.stmt] = []
    todo = list(body)
    while todo:
        node = todo.pop(0)
        out.append(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for part in ("body", "orelse", "finalbody"):
            todo.extend(getattr(node, part, []) or [])
        for h in getattr(node, "handlers", []) or []:
            todo.extend(h.body)
    return [n for n in out if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign))]


def _is_type_checking(test: ast.AST) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    t = handler.type
    if t is None:
        return True
    names = [t] if not isinstance(t, ast.Tuple) else list(t.elts)
    return any(_call_name(n) in _OPTIONAL_EXCEPTIONS for n in names)


def _is_main_guard(node: ast.stmt) -> bool:
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    parts = [node.test.left, *node.test.comparators]
    return any(isinstance(p, ast.Name) and p.id == "__name__" for p in parts) and any(
        isinstance(p, ast.Constant) and p.value == "__main__" for p in parts)


def read_script(path: Path, data: bytes | None = None) -> ScriptFacts:
    """Parse a Python file. Raises ReadError (one line, with the position) when it is not
    valid Python."""
    name = str(path)
    if data is None:
        try:
            data = path.read_bytes()
        except OSError as e:
            raise ReadError(f"{name}: cannot read ({e.strerror or e})") from None
    try:
        tree = ast.parse(data, filename=name)
    except SyntaxError as e:
        line = (e.lineno or 1) - 1
        col = max((e.offset or 1) - 1, 0)
        raise ReadError(f"{name}:{line + 1}:{col + 1}: not valid Python: {e.msg}",
                        span=Span(line, col, line, col + 1)) from None
    except (ValueError, RecursionError, MemoryError) as e:
        raise ReadError(f"{name}: not readable as Python ({type(e).__name__})") from None
    facts = _Reader(name, data, tree).run()
    return with_the_run(facts, path)


# A dataset larger than this is not counted while a script is judged (the editor judges on
# every edit); the preflight reader reads ~250 MB/s, so this is about a second, once: the
# count is kept per (file, size, mtime).
MAX_COUNT_BYTES = 256 * 1024 * 1024


@functools.lru_cache(maxsize=64)
def _count_rows(path: str, size: int, mtime_ns: int) -> tuple[int | None, str]:
    from .dataset_scan import scan_dataset

    try:
        scan = scan_dataset(path, duplicates=False)
    except ReadError as e:
        return None, str(e)
    return scan.records, ""


def rows_of(text: str, folders: tuple[Path, ...]) -> tuple[int | None, str, str]:
    """(rows, the file counted, why not counted) for a dataset path as a script names it,
    relative to the first of `folders` where it is a regular file."""
    candidates = [Path(text)] if Path(text).is_absolute() else [f / text for f in folders]
    for candidate in candidates:
        try:
            st = candidate.stat()
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            return None, str(candidate), "not a regular file"
        if st.st_size > MAX_COUNT_BYTES:
            return None, str(candidate), f"{st.st_size / 2**20:.0f} MiB, larger than the {MAX_COUNT_BYTES >> 20} MiB counted"
        rows, why = _count_rows(str(candidate), st.st_size, st.st_mtime_ns)
        return rows, str(candidate), why
    return None, "", "not on disk"


def with_the_run(facts: ScriptFacts, path: Path) -> ScriptFacts:
    """The facts with what the run around the script says: the launch script's flags
    (merged into HfArgumentParser configs), its process count, and the rows of the
    datasets named (counted where they are on disk)."""
    from .launch import find_launch

    configs = list(facts.configs)
    datasets = list(facts.datasets)
    processes: Value | None = None
    launch_path = ""
    if any(c.origin == "parser" for c in configs) or not configs:
        launch = find_launch(path)
        if launch is not None:
            launch_path = launch.path
            flags = {f.name: Value(known=f.known, value=f.value, span=f.span, text=f.text, path=launch.path)
                     for f in launch.flags}
            configs = [replace(c, kwargs={**c.kwargs, **flags}) if c.origin == "parser" else c for c in configs]
            for f in launch.flags:
                if _dataset_key(f.name) and f.known and isinstance(f.value, str) and _is_data_file(f.value):
                    datasets.append(DatasetRef(text=f.value, span=f.span, path=launch.path,
                                               split="eval" if _eval_key(f.name) else "train"))
            p = launch.processes
            if p is not None:
                processes = Value(known=p.known, value=p.value, span=p.span, text=p.text, path=launch.path)
    models = tuple(_model_config(m, path) for m in facts.models)
    counted = []
    for d in datasets:
        folders = (Path(d.path).parent,) if d.path else ()
        rows, found, why = rows_of(d.text, folders + (path.parent,))
        counted.append(replace(d, rows=rows, found=found, note=why))
    return replace(facts, configs=tuple(configs), datasets=tuple(counted), processes=processes, launch=launch_path,
                   models=models)


# config.json is a few KiB; a larger file is not a model config.
MAX_CONFIG_BYTES = 1024 * 1024


def _model_config(m: ModelRef, script: Path) -> ModelRef:
    """The model's config.json where it is on disk: the folder named (relative to the
    script), or the local Hugging Face cache for a hub name. Never downloads."""
    import json
    import os

    candidates: list[Path] = []
    if not m.text.startswith(("http:", "https:")):
        named = Path(m.text)
        candidates += [named / "config.json"] if named.is_absolute() else [script.parent / m.text / "config.json"]
        if m.text.count("/") == 1 and not named.is_absolute():
            home = Path(os.environ.get("HF_HUB_CACHE") or Path(os.environ.get("HF_HOME") or
                                                                Path.home() / ".cache" / "huggingface") / "hub")
            snapshots = home / f"models--{m.text.replace('/', '--')}" / "snapshots"
            try:
                candidates += sorted(snapshots.glob("*/config.json"))[:8]
            except OSError:
                pass
    for c in candidates:
        try:
            st = c.stat()
            if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_CONFIG_BYTES:
                continue
            doc = json.loads(c.read_bytes())
        except (OSError, ValueError):
            continue
        if not isinstance(doc, dict):
            continue
        dtype = doc.get("torch_dtype", doc.get("dtype"))
        text_config = doc.get("text_config")
        if dtype is None and isinstance(text_config, dict):
            dtype = text_config.get("torch_dtype", text_config.get("dtype"))
        model_type = doc.get("model_type")
        modules, where = _weight_modules(c.parent)
        return replace(m, config=str(c), torch_dtype=dtype if isinstance(dtype, str) else None,
                       model_type=model_type if isinstance(model_type, str) else None, modules=modules,
                       modules_from=where)
    return m


# A weights index of this size holds tens of thousands of names; larger is not one.
MAX_INDEX_BYTES = 16 * 1024 * 1024


def _weight_modules(folder: Path) -> tuple[tuple[str, ...], str]:
    """Module names of the weights in `folder`: the sharded index's weight_map, else the
    safetensors files' headers (readers/checkpoint.py; tensor bytes never read)."""
    import json

    index = folder / "model.safetensors.index.json"
    names: list[str] = []
    where = ""
    try:
        st = index.stat()
        if stat.S_ISREG(st.st_mode) and st.st_size <= MAX_INDEX_BYTES:
            doc = json.loads(index.read_bytes())
            weight_map = doc.get("weight_map") if isinstance(doc, dict) else None
            if isinstance(weight_map, dict):
                names, where = [str(k) for k in weight_map], str(index)
    except (OSError, ValueError):
        pass
    if not names:
        from .checkpoint import CheckpointError, read_checkpoint

        try:
            files = sorted(folder.glob("*.safetensors"))[:64]
        except OSError:
            files = []
        for f in files:
            try:
                facts = read_checkpoint(f, scan=False)
            except (CheckpointError, ReadError, OSError, ValueError):
                continue
            names += [t.name for t in facts.tensors]
            where = where or str(f)
    modules = sorted({n.rsplit(".", 1)[0] for n in names if "." in n})
    return tuple(modules), where
