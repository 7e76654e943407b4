"""The package's layers, checked on its import graph (README.md, "Architecture").

Every `import` in every module counts: at the top, inside a function, under
`if TYPE_CHECKING:`. Layers, bottom to top:

    core < readers < rules < judge < output < guardian, server < cli, api, launcher, __main__

A module imports only from its own layer or below; `guardian` and `server` never import
each other; `output` is given reports and never imports the judge; and no two modules
import each other, directly or round a longer loop (an import hidden inside a function to
dodge a cycle is still a cycle). An import kept inside a function in core, judge, output,
guardian or the command line says why in a comment (start-up time, or an optional dependency).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "trainproof_lsp"
NAME = PACKAGE.name

# Layer of each top-level part of the package (its folder or module), bottom to top. The
# package's own __init__ holds only its name and version, so everything may import it.
LAYERS: dict[str, int] = {
    "": 0, "core": 0,
    "readers": 1,
    "rules": 2,
    "judge": 3,
    "output": 4,
    "guardian": 5, "server": 5,
    "cli": 6, "api": 6, "launcher": 6, "__main__": 6,
}
TOP = 6  # every `__main__` module (`python -m ...`) is an entry point, whatever its folder
# Front ends on one layer that stay apart: the training-process guardian never loads the
# language server, and the server never loads a training framework's callbacks.
APART = {"guardian", "server"}
# The layers that run in any process (the CLI, a training process, a server worker):
# they never import the editor protocol libraries.
NO_EDITOR_LIBS = ("core", "readers", "rules", "judge", "output", "guardian")
EDITOR_LIBS = ("pygls", "lsprotocol")

# Pairs of layers where the lower may not import the higher, though the order allows it.
NEVER = {("output", "judge"): "output renders the reports it is given; it never runs the judge"}

# Known exceptions, (importer, imported module) -> why it is tolerated for now. Keep this
# short; each entry is a place to fix, not a licence.
KNOWN_EXCEPTIONS: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Import:
    importer: str  # dotted module name
    target: str  # dotted module name (a module of this package, or an outside one)
    where: str  # path:line
    in_function: bool


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(importer: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    if node.level > 1:
        base = base[:-(node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


class _Collector(ast.NodeVisitor):
    def __init__(self, importer: str, path: Path, modules: dict[str, Path]) -> None:
        self.importer, self.path, self.modules = importer, path, modules
        self.depth = 0
        self.found: list[Import] = []

    def _add(self, target: str, line: int) -> None:
        if target.split(".")[0] == NAME:
            # The longest prefix that is a module of the package: `from ..rules import
            # BY_ID` imports trainproof_lsp.rules, `from . import engine` the module.
            parts = target.split(".")
            while len(parts) > 1 and ".".join(parts) not in self.modules:
                parts.pop()
            target = ".".join(parts)
        where = f"{self.path.relative_to(ROOT)}:{line}"
        self.found.append(Import(self.importer, target, where, self.depth > 0))

    def _function(self, node: ast.AST) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = _resolve(self.importer, self.path.name == "__init__.py", node)
        for alias in node.names:
            full = f"{base}.{alias.name}"
            self._add(full if full in self.modules else base, node.lineno)


def imports() -> list[Import]:
    modules = _modules()
    found: list[Import] = []
    for name, path in modules.items():
        collector = _Collector(name, path, modules)
        collector.visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        found.extend(collector.found)
    return found


def part_of(module: str) -> str:
    """The layer part a module belongs to: its first name under the package."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def layer_of(module: str) -> int:
    return TOP if module.endswith(".__main__") else LAYERS[part_of(module)]


def internal(found: list[Import]) -> list[Import]:
    return [i for i in found if i.target.split(".")[0] == NAME and i.target != i.importer]


def _cycles(edges: list[Import]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        graph.setdefault(e.importer, set()).add(e.target)
        graph.setdefault(e.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))
    return components


def _known(i: Import) -> bool:
    return (i.importer, i.target) in KNOWN_EXCEPTIONS


def test_every_part_of_the_package_has_a_layer():
    parts = {part_of(m) for m in _modules()}
    assert parts <= set(LAYERS), f"folders or modules with no layer: {sorted(parts - set(LAYERS))}"


def test_no_module_imports_a_higher_layer():
    wrong = []
    for i in internal(imports()):
        if _known(i):
            continue
        src, dst = part_of(i.importer), part_of(i.target)
        if layer_of(i.target) > layer_of(i.importer):
            wrong.append(f"{i.where}: {i.importer} ({src}) imports {i.target} ({dst}), a higher layer")
        elif src != dst and src in APART and dst in APART:
            wrong.append(f"{i.where}: {i.importer} imports {i.target}: {src} and {dst} stay apart")
        elif (src, dst) in NEVER:
            wrong.append(f"{i.where}: {i.importer} imports {i.target}: {NEVER[src, dst]}")
    assert not wrong, "\n".join(wrong)


def test_no_import_cycles_not_even_inside_functions():
    edges = [i for i in internal(imports()) if not _known(i)]
    problems = []
    for component in _cycles(edges):
        members = set(component)
        inside = sorted({f"{e.where}: {e.importer} -> {e.target}"
                         + (" (inside a function)" if e.in_function else "")
                         for e in edges if e.importer in members and e.target in members})
        problems.append("cycle between " + ", ".join(component) + ":\n  " + "\n  ".join(inside))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("part", NO_EDITOR_LIBS)
def test_lower_layers_never_import_the_editor_protocol(part):
    wrong = [f"{i.where}: {i.importer} imports {i.target}" for i in imports()
             if part_of(i.importer) == part and i.target.split(".")[0] in EDITOR_LIBS]
    assert not wrong, "\n".join(wrong)


# Parts where an import inside a function must say why it is there, on its line or the
# line above: start-up time (a command that must answer before the rest is loaded) or an
# optional dependency (an extra that may not be installed).
EXPLAINED = ("", "core", "judge", "output", "guardian", "cli", "api", "launcher", "__main__")
REASONS = ("start-up", "optional")


def test_imports_inside_functions_say_why():
    unexplained = []
    for i in imports():
        if not i.in_function or part_of(i.importer) not in EXPLAINED:
            continue
        path, line = i.where.rsplit(":", 1)
        lines = (ROOT / path).read_text(encoding="utf-8").splitlines()
        near = " ".join(lines[max(0, int(line) - 2):int(line)]).lower()
        if not any(reason in near for reason in REASONS):
            unexplained.append(f"{i.where}: {i.importer} imports {i.target} inside a function; move it to the "
                               f"top, or say why ({' or '.join(REASONS)}) in a comment")
    assert not unexplained, "\n".join(unexplained)


def test_the_package_root_imports_nothing():
    # Every layer imports TOOL_NAME and __version__ from it: it must stay at the bottom.
    assert [i for i in imports() if i.importer == NAME] == []


def test_known_exceptions_are_still_needed():
    found = {(i.importer, i.target) for i in imports()}
    stale = sorted(k for k in KNOWN_EXCEPTIONS if k not in found)
    assert not stale, f"known exceptions no longer in the code (remove them from the list): {stale}"


# --- the checker checks: a small package with one fault of each kind ----------------------

def test_the_graph_resolves_relative_and_function_level_imports():
    found = [i for i in imports() if i.importer == f"{NAME}.judge.compare"]
    targets = {i.target for i in found}
    # `from . import engine` names the module; `from ..rules import BY_ID` the package.
    assert f"{NAME}.judge.engine" in targets
    assert f"{NAME}.rules" in targets
    assert all(i.where.startswith("trainproof_lsp/judge/compare.py:") for i in found)


def test_the_cycle_finder_names_every_member():
    def edge(a: str, b: str) -> Import:
        return Import(a, b, "x.py:1", False)

    edges = [edge("a", "b"), edge("b", "c"), edge("c", "a"), edge("c", "d"), edge("d", "e")]
    assert _cycles(edges) == [["a", "b", "c"]]
    assert _cycles([edge("a", "b"), edge("b", "c")]) == []


def test_core_config_names_the_series_the_readers_map():
    # core/config.py validates `columns` without importing the readers (a higher layer):
    # its list of mappable series must stay the metric readers' alias table.
    from trainproof_lsp.core.config import MAPPABLE as CORE_MAPPABLE
    from trainproof_lsp.readers.metrics import MAPPABLE

    assert CORE_MAPPABLE == MAPPABLE


# --- README.md's layout section names the tree as it is ---------------------------------------

def _layout_block() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n### Layout\n", 1)[1]
    return section.split("```\n", 2)[1].splitlines()


def _layout_entries() -> list[tuple[Path, list[str]]]:
    """(path named at the start of a line, the `x.py` names in its description). A line
    indented by two spaces names something inside the package."""
    entries = []
    for line in _layout_block():
        indented = line.startswith("  ")
        first, _, rest = line.strip().partition(" ")
        base = (PACKAGE if indented else ROOT) / first.rstrip("/")
        names = [n for n in re.findall(r"`([^`]+)`", rest) if n.endswith((".py", "/"))]
        entries.append((base, names))
    return entries


def test_every_folder_and_module_the_readme_layout_names_exists():
    missing = []
    for base, names in _layout_entries():
        if not base.exists():
            missing.append(str(base.relative_to(ROOT)))
        for name in names:
            target = (base if base.is_dir() else base.parent) / name.rstrip("/")
            if not target.exists():
                missing.append(str(target.relative_to(ROOT)))
    assert not missing, f"README.md's layout names what is not in the tree: {missing}"


def test_the_readme_layout_names_every_package_folder_and_top_module():
    named = {base for base, _ in _layout_entries()}
    folders = {p.parent for p in PACKAGE.rglob("*.py") if p.parent != PACKAGE and "__pycache__" not in p.parts}
    folders = {f for f in folders if f.parent == PACKAGE}  # the layer folders (nested ones belong to theirs)
    top = set(PACKAGE.glob("*.py"))
    unnamed = sorted(str(p.relative_to(ROOT)) for p in (folders | top) - named)
    assert not unnamed, f"README.md's layout does not name: {unnamed}"
