"""The child side of `trainproof-lsp env`: runs inside the user's chosen interpreter.

Not imported by trainproof_lsp: envcheck.py passes this file's source with `python -c`,
so it must run on any Python 3.6+ and import nothing but the standard library (the
interpreter under test may not have trainproof-lsp installed, and running it as a file
would put this folder first on sys.path).

Protocol: argv[1] is a JSON job {"path0": ..., "items": [...]}. One JSON object per line
goes to a private copy of stdout; the real fd 1 is pointed at stderr first, so whatever
the imported modules print cannot corrupt the protocol.

    {"hello": "<version>", "executable": "<path>"}
    {"begin": <id>}                       before each item
    {"end": <id>, "ok": true}             after it, or {"end": <id>, "ok": false, "kind": ...}
    {"done": true}

An item that never reports its end was killed by a signal (native crash), ended the
process (os._exit) or hung: the parent tells these apart by the exit status and its clock.
With "guard": <entrypoint path> in the job, an import that resolves to that file is
refused (kind "entrypoint-not-run"), so the script's top level never runs by way of a
self-import or a local module importing it.
Items: {"id", "kind": "import", "module", "package", "names"}, {"id", "kind": "run",
"path"} (run a script's top level, only with --run-entrypoint), {"id", "kind": "locate",
"module"} (find a module's file without importing it or its packages), {"id", "kind":
"signature", "module", "attr", "strings"} (import a library, look the class up and read
its signature with `inspect.signature` -- never calling it -- and, for the keywords named
in "strings", the string values its annotation allows), {"id", "kind": "fields", "module",
"attr"} (import a library and read a pydantic model's field names and aliases from its
`model_fields` -- never instantiating it).
With "forbid": [folders] in the job (the signature job), a module whose file lies in one
of those folders (the workspace) is refused unless it lies in the interpreter's own
prefix (a venv inside the project): nothing from the workspace is imported.
"""
import json
import os
import sys


def _where(exc):
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    last = frames[-1]
    return "%s:%s" % (last.filename, last.lineno)


def _locate(module):
    import importlib.machinery

    path = None
    spec = None
    for part in module.split("."):
        spec = importlib.machinery.PathFinder.find_spec(part, path)
        if spec is None:
            return {"ok": False, "kind": "module-not-found", "type": "ModuleNotFoundError",
                    "message": "No module named %r" % module, "missing_module": module}
        path = spec.submodule_search_locations
    origin = spec.origin
    if spec.submodule_search_locations:  # a package: `python -m pkg` runs pkg/__main__.py
        for folder in spec.submodule_search_locations:
            main = os.path.join(folder, "__main__.py")
            if os.path.isfile(main):
                origin = main
                break
    return {"ok": True, "file": origin or ""}


def _import(item):
    import importlib

    module = item["module"]
    package = item.get("package") or None
    mod = importlib.import_module(module, package)
    base = mod.__name__
    missing = []
    for name in item.get("names") or []:
        if name == "*" or hasattr(mod, name):
            continue
        # `from pkg import sub` also imports the submodule pkg.sub.
        try:
            importlib.import_module(base + "." + name)
        except ImportError as e:
            if getattr(e, "name", None) == base + "." + name:
                missing.append(name)
                continue
            raise
        if not hasattr(mod, name):
            missing.append(name)
    if missing:
        return {"ok": False, "kind": "missing-name", "type": "ImportError", "names": missing,
                "message": "cannot import name %s from %r (%s)" % (
                    ", ".join(repr(n) for n in missing), base, getattr(mod, "__file__", None) or "built-in"),
                "file": getattr(mod, "__file__", None) or ""}
    return {"ok": True, "file": getattr(mod, "__file__", None) or ""}


def _is_literal(annotation):
    return str(getattr(annotation, "__origin__", "")) == "typing.Literal"


def _annotation_choices(cls, name):
    """The string values the annotation of `name` allows, when it names an Enum or a
    Literal: (values, also_any_str); None when it names neither."""
    import enum

    annotation = None
    fields = getattr(cls, "__dataclass_fields__", None)
    if fields and name in fields:
        annotation = fields[name].type
    else:
        import inspect

        try:
            parameter = inspect.signature(cls).parameters.get(name)
        except (TypeError, ValueError):
            parameter = None
        if parameter is not None and parameter.annotation is not parameter.empty:
            annotation = parameter.annotation
    if isinstance(annotation, str):  # postponed annotations: resolve them, or give up
        try:
            import typing

            annotation = typing.get_type_hints(cls).get(name)
        except Exception:
            return None
    if _is_literal(annotation) or not hasattr(annotation, "__args__"):
        members = (annotation,)
    else:  # Union[...] / X | Y
        members = annotation.__args__
    values = []
    any_str = False
    found = False
    for member in members:
        if member is str:
            any_str = True
        elif isinstance(member, type) and issubclass(member, enum.Enum):
            found = True
            values.extend(m.value for m in member if isinstance(m.value, str))
        elif _is_literal(member):
            found = True
            values.extend(v for v in member.__args__ if isinstance(v, str))
    if not found:
        return None
    return values, any_str


def _version(module):
    root = module.split(".")[0]
    try:
        from importlib import metadata

        return metadata.version(root)
    except Exception:
        return str(getattr(sys.modules.get(root), "__version__", "") or "")


def _resolve(item):
    """(module, the named attribute, the library's version, the attribute's qualified name)."""
    import importlib

    mod = importlib.import_module(item["module"])
    obj = mod
    for part in item["attr"].split("."):
        obj = getattr(obj, part)
    version = _version(item["module"])
    qualname = "%s.%s" % (getattr(obj, "__module__", "?"), getattr(obj, "__qualname__", item["attr"]))
    return mod, obj, version, qualname


def _signature(item):
    import inspect

    mod, obj, version, qualname = _resolve(item)
    if not isinstance(obj, type):
        return {"ok": False, "kind": "not-a-class", "message": "%s is not a class" % qualname,
                "version": version, "qualname": qualname}
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError) as e:
        return {"ok": False, "kind": "no-signature", "message": str(e)[:200], "version": version,
                "qualname": qualname}
    params = []
    var_keyword = False
    for p in sig.parameters.values():
        if p.kind == p.VAR_KEYWORD:
            var_keyword = True
        elif p.kind != p.POSITIONAL_ONLY and p.kind != p.VAR_POSITIONAL:
            params.append(p.name)
    choices = {}
    for name in item.get("strings") or []:
        if name in params:
            found = _annotation_choices(obj, name)
            if found is not None:
                choices[name] = {"values": found[0][:200], "any_str": found[1]}
    return {"ok": True, "params": params[:1000], "var_keyword": var_keyword, "choices": choices,
            "version": version, "qualname": qualname, "file": getattr(mod, "__file__", None) or ""}


def _fields(item):
    _, obj, version, qualname = _resolve(item)
    fields = getattr(obj, "model_fields", None)
    if not isinstance(obj, type) or not isinstance(fields, dict):
        return {"ok": False, "kind": "not-a-model", "message": "%s is not a pydantic model" % qualname,
                "version": version, "qualname": qualname}
    names = []
    for name, field in fields.items():
        names.append(name)
        for alias in (getattr(field, "alias", None), getattr(field, "validation_alias", None)):
            if isinstance(alias, str) and alias not in names:
                names.append(alias)  # a config may spell the field by its alias
    config = getattr(obj, "model_config", None) or {}
    return {"ok": True, "params": names[:5000], "extra": str(config.get("extra") or "ignore"),
            "version": version, "qualname": qualname}


def _probe(item):
    try:
        if item["kind"] == "locate":
            return _locate(item["module"])
        if item["kind"] == "signature":
            return _signature(item)
        if item["kind"] == "fields":
            return _fields(item)
        if item["kind"] == "run":
            import runpy

            runpy.run_path(item["path"], run_name="__trainproof_probe__")
            return {"ok": True}
        return _import(item)
    except SystemExit as e:
        return {"ok": False, "kind": "exit", "type": "SystemExit", "message": "sys.exit(%r)" % (e.code,),
                "where": _where(e)}
    except BaseException as e:  # everything an import can raise, reported, never re-raised
        kind = "module-not-found" if type(e).__name__ == "ModuleNotFoundError" else "exception"
        cause = e
        while cause is not None:  # the guard's refusal, possibly wrapped by the importer
            if isinstance(cause, EntrypointNotRun):
                return {"ok": False, "kind": "entrypoint-not-run", "type": "EntrypointNotRun",
                        "message": str(cause)[:400], "where": _where(e)}
            cause = cause.__cause__ or cause.__context__
        return {"ok": False, "kind": kind, "type": type(e).__name__, "message": str(e)[:400],
                "missing_module": getattr(e, "name", None) or "", "where": _where(e)}


class EntrypointNotRun(ImportError):
    """Importing this would run the entrypoint's top level, which only --run-entrypoint allows."""


class _GuardEntrypoint(object):
    """First on sys.meta_path: any import that resolves to the entrypoint's own file (the
    script importing itself, `import train` in a local module) is refused instead of
    running the script's top level."""

    def __init__(self, path):
        # Imported here, before the guard is on sys.meta_path: an import inside find_spec
        # would ask find_spec again, without end, where nothing imported it yet.
        import importlib.machinery

        self.real = os.path.realpath(path)
        self.path_finder = importlib.machinery.PathFinder

    def find_spec(self, fullname, path=None, target=None):
        spec = self.path_finder.find_spec(fullname, path)
        origin = getattr(spec, "origin", None) if spec is not None else None
        if origin and os.path.realpath(origin) == self.real:
            raise EntrypointNotRun("importing %r would run the entrypoint %s, whose top-level code "
                                   "is run only with --run-entrypoint" % (fullname, origin), name=fullname)
        return None  # not the entrypoint: the ordinary finders decide

    # Python < 3.4 asks for find_module
    def find_module(self, fullname, path=None):
        self.find_spec(fullname, path)
        return None


class WorkspaceNotImported(ImportError):
    """The module would be imported from the workspace, which the signature probe never does."""


class _GuardFolders(object):
    """First on sys.meta_path in the signature job: a module whose file lies in one of
    `folders` (the workspace) is refused, unless it lies under the interpreter's own
    prefix (its site-packages, a venv kept inside the project)."""

    def __init__(self, folders):
        import importlib.machinery

        self.folders = [os.path.realpath(f) for f in folders]
        allowed = set([sys.prefix, sys.exec_prefix, getattr(sys, "base_prefix", sys.prefix)])
        try:  # the interpreter's own site folders (a user site under the home folder too)
            import site

            allowed.update(site.getsitepackages())
            allowed.add(site.getusersitepackages())
        except Exception:
            pass
        self.allowed = [os.path.realpath(p) for p in allowed if p]
        self.path_finder = importlib.machinery.PathFinder

    @staticmethod
    def _under(path, folder):
        return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)

    def find_spec(self, fullname, path=None, target=None):
        spec = self.path_finder.find_spec(fullname, path)
        origin = getattr(spec, "origin", None) if spec is not None else None
        if origin and origin not in ("built-in", "frozen"):
            real = os.path.realpath(origin)
            if any(self._under(real, f) for f in self.folders) and \
                    not any(self._under(real, a) for a in self.allowed):
                raise WorkspaceNotImported("%r would be imported from the workspace (%s)" % (fullname, origin),
                                           name=fullname)
        return None

    def find_module(self, fullname, path=None):
        self.find_spec(fullname, path)
        return None


def main():
    job = json.loads(sys.argv[1])
    proto = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # module output goes to stderr from here on

    def emit(obj):
        proto.write(json.dumps(obj) + "\n")
        proto.flush()

    try:
        import faulthandler

        faulthandler.enable()  # a native crash prints the Python stack to stderr
    except Exception:
        pass
    sys.argv = [job.get("argv0") or "-"]
    sys.path[0] = job["path0"]
    if job.get("forbid"):
        # `python -c` put the working folder first; the signature job's path0 is an empty
        # folder of its own, and no entry of sys.path may lead into the workspace.
        sys.meta_path.insert(0, _GuardFolders(job["forbid"]))
    if job.get("guard"):
        sys.meta_path.insert(0, _GuardEntrypoint(job["guard"]))
    emit({"hello": sys.version.split()[0], "executable": sys.executable})
    for item in job["items"]:
        emit({"begin": item["id"]})
        result = _probe(item)
        result["end"] = item["id"]
        emit(result)
    emit({"done": True})
    proto.close()
    # Skip interpreter teardown: atexit hooks of imported libraries are not under test.
    os._exit(0)


if __name__ == "__main__":
    main()
