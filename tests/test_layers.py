"""Layers point one way: every import in perfkit/ (module-level or inside a function)
goes to its own layer or one below, never up, and never to another module's private names.
And no function in perfkit/ is over 80 lines.

    faces     perfkit (the package), cli, __main__, ui.*
    analysis  store, comparison, ratesearch, report, server, sweep, remote (old import path)
    run       run
    kinds     kinds.* (one module per kind of test), spec (their shared checks), dperf
    engines   engines.*, procs, lab
    base      perfkit._* (native), stats, units, errors, version

A function-local import must have a reason other than a cycle (a heavy optional package,
a native module that may be missing); the first one in each module says why in a comment.
A local import that would close an import cycle if hoisted, or one of perfkit's own
modules without such a reason, is listed here as a cycle dodge.
Read from the source with ast: nothing is imported.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "perfkit"

LAYERS = ("base", "engines", "kinds", "run", "analysis", "faces")
# a module's layer: its longest dotted prefix here
LAYER_OF = {
    "perfkit": "faces", "perfkit.__main__": "faces", "perfkit.cli": "faces", "perfkit.cluster_cli": "faces", "perfkit.ui": "faces",
    "perfkit.store": "analysis", "perfkit.comparison": "analysis", "perfkit.ratesearch": "analysis",
    "perfkit.report": "analysis", "perfkit.server": "analysis", "perfkit.sweep": "analysis",
    "perfkit.remote": "analysis",
    "perfkit.ladder": "analysis",
    "perfkit.rfc2544": "analysis", "perfkit.rfc2544_cli": "faces", "perfkit.converge_cli": "faces",
    "perfkit.run": "run", "perfkit.cluster": "run",
    "perfkit.savefile": "run",
    "perfkit.thresholds": "run",
    "perfkit.stages": "run",
    "perfkit.hostmetrics": "run",
    "perfkit.kinds": "kinds", "perfkit.spec": "kinds", "perfkit.dperf": "kinds",
    "perfkit.engines": "engines", "perfkit.procs": "engines", "perfkit.nics": "engines", "perfkit.lab": "engines",
    "perfkit.cgroups": "engines",
    "perfkit.stats": "base", "perfkit.units": "base", "perfkit.fields": "base", "perfkit.sandbox": "base", "perfkit.errors": "base", "perfkit.version": "base",
    "perfkit.staticfig": "base",   # how a finished figure displays (HTML, PNG): the UI and the comparisons
    "perfkit.converge": "analysis",   # live rate convergence (issue 30)
}
NATIVE = ("perfkit._sock", "perfkit._dpdk", "perfkit._counters", "perfkit._delayline")

# What is still wrong, by "importer -> imported[.name]"; each entry says why it stays.
# Fixed ones must leave: an entry that no longer matches fails the test too.
ALLOWED_UP: dict[str, str] = {}
ALLOWED_PRIVATE: dict[str, str] = {}
# modules whose local imports of perfkit's own modules have a reason other than a cycle
LOCAL_BY_DESIGN = {
    "perfkit": "import perfkit stays light: the UI modules load with the first HTML report",
    "perfkit.lab": "the delay-line process loads lab.py from its file, without the perfkit package: "
                   "its top imports only the standard library",
}
ALLOWED_LOCAL: dict[str, str] = {}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


FILES = {module_name(p): p for p in sorted(PKG.rglob("*.py"))}
MODULES = set(FILES) | set(NATIVE)


def layer(mod: str) -> int | None:
    if mod in NATIVE or mod.startswith(tuple(n + "." for n in NATIVE)):
        return 0
    parts = mod.split(".")
    for n in range(len(parts), 0, -1):
        name = ".".join(parts[:n])
        if name in LAYER_OF:
            return LAYERS.index(LAYER_OF[name])
    if parts[0] == "perfkit":
        raise AssertionError(f"{mod}: no layer for it in LAYER_OF (add it)")
    return None


class Import:
    """One imported thing: target module, name taken from it (None for a whole module)."""

    def __init__(self, importer: str, node, target: str, name: str | None, local: bool):
        self.importer, self.node, self.target, self.name, self.local = importer, node, target, name, local

    @property
    def key(self) -> str:
        return f"{self.importer} -> {self.target}{'.' + self.name if self.name else ''}"


def imports_of(mod: str) -> list[Import]:
    tree = ast.parse(FILES[mod].read_text(encoding="utf-8"))
    local_nodes = {id(n) for fn in ast.walk(tree) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
                   for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom))}
    pkg = mod if FILES[mod].name == "__init__.py" else mod.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        local = id(node) in local_nodes
        if isinstance(node, ast.Import):
            out += [Import(mod, node, a.name, None, local) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:   # relative: from .x import y
                anchor = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for a in node.names:
                sub = f"{base}.{a.name}"
                out.append(Import(mod, node, sub, None, local) if sub in MODULES
                           else Import(mod, node, base, a.name, local))
    return out


ALL = [imp for mod in FILES for imp in imports_of(mod)]


def ours(imp: Import) -> bool:
    return imp.target == "perfkit" or imp.target.startswith("perfkit.")


def check(found: set[str], allowed: dict[str, str], what: str) -> None:
    new, stale = sorted(found - set(allowed)), sorted(set(allowed) - found)
    msg = []
    if new:
        msg.append(f"{what}:\n  " + "\n  ".join(new))
    if stale:
        msg.append("fixed, so remove from the allow-list:\n  " + "\n  ".join(stale))
    assert not msg, "\n".join(msg)


def test_every_module_has_a_layer():
    for mod in FILES:
        layer(mod)


def test_no_import_points_up():
    up = {imp.key for imp in ALL if ours(imp) and layer(imp.target) > layer(imp.importer)}
    check(up, ALLOWED_UP, "imports pointing up a layer")


def test_no_private_names_of_other_modules():
    private = {imp.key for imp in ALL if ours(imp) and imp.name and imp.name.startswith("_")
               and not imp.name.startswith("__") and imp.target != imp.importer}
    check(private, ALLOWED_PRIVATE, "imports of another module's private names (give them public names)")


def _graph() -> dict[str, set[str]]:
    """Every import between perfkit's Python modules, module-level and local alike (a
    parent package's own __init__ left out: Python runs it first, whatever its order)."""
    g: dict[str, set[str]] = {m: set() for m in FILES}
    for imp in ALL:
        if imp.target in FILES and imp.target != imp.importer:
            g[imp.importer].add(imp.target)
    return g


def _reaches(g, start: str, goal: str) -> bool:
    seen, todo = set(), [start]
    while todo:
        m = todo.pop()
        if m == goal:
            return True
        if m not in seen:
            seen.add(m)
            todo += g.get(m, ())
    return False


def cycle_dodges() -> set[str]:
    """Local imports of perfkit's own Python modules: each lies on an import cycle (all
    imports hoisted, it would close one), or, on none, it has no reason to be local
    (unless its module is one of LOCAL_BY_DESIGN)."""
    g = _graph()
    out = set()
    for imp in ALL:
        if imp.local and imp.target in FILES and imp.target != imp.importer:
            if _reaches(g, imp.target, imp.importer):
                out.add(f"{imp.key} (cycle)")
            elif imp.importer not in LOCAL_BY_DESIGN:
                out.add(f"{imp.key} (needless)")
    return out


def test_local_imports_dodge_no_cycle():
    check(cycle_dodges(), ALLOWED_LOCAL, "function-local imports of perfkit's own modules "
          "(cycle: hoisting closes an import cycle, fix the layering; needless: hoist it)")


def test_first_local_import_says_why():
    missing = []
    for mod, path in FILES.items():
        lines = path.read_text(encoding="utf-8").splitlines()
        first = min((imp.node.lineno for imp in ALL if imp.importer == mod and imp.local), default=None)
        if first is None:
            continue
        here, above = lines[first - 1], lines[first - 2].strip() if first > 1 else ""
        if "#" not in here and not above.startswith("#"):
            missing.append(f"{path.relative_to(ROOT)}:{first}: {here.strip()}")
    assert not missing, ("the first function-local import of a module says why it is local "
                         "(a comment on its line or the one above):\n  " + "\n  ".join(missing))


def test_the_package_exports_every_spec():
    import perfkit
    from perfkit.spec import SPECS
    assert len(SPECS) >= 9
    for name, cls in SPECS.items():
        assert getattr(perfkit, name) is cls and name in perfkit.__all__
    assert all(hasattr(perfkit, name) for name in perfkit.__all__)


MAX_FUNCTION_LINES = 80


def test_no_function_is_over_80_lines():
    """A function that does not fit on a screen is split into named steps."""
    long = []
    for mod, path in FILES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.name} ({lines} lines)")
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines (split them):\n  " + "\n  ".join(long)


def test_no_module_reads_another_modules_privates():
    """obj._name outside obj's own class: only our own (self, cls, super()) and Python's
    protocol hooks (_repr_html_, _exit, ...) are read; another module's private names are not."""
    hooks = {"_repr_html_", "_repr_mimebundle_", "_exit"}
    found = []
    for path in sorted((ROOT / "perfkit").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                    and not node.attr.startswith("__") and node.attr not in hooks):
                continue
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                continue
            if isinstance(owner, ast.Call) and getattr(owner.func, "id", None) == "super":
                continue
            found.append(f"{path.relative_to(ROOT)}: {ast.unparse(node)}")
    assert sorted(set(found)) == sorted(OWN_PRIVATES), "\n".join(sorted(set(found)))


# a private read through another name, inside the class or module that owns it
OWN_PRIVATES = {
    "perfkit/run.py: run._frame": "Run.load fills the Run it makes",
    "perfkit/run.py: run._done": "Run.load fills the Run it makes",
    "perfkit/run.py: run._host_frame": "Run.load fills the Run it makes",
    "perfkit/kinds/qperf.py: spec._polls": "the qperf kind's CLI asks its own spec class",
    "perfkit/cluster.py: part._lock": "Cluster.select makes a Cluster sharing its client and lock",
    "perfkit/cluster.py: part._only": "Cluster.select makes a Cluster of some of its hosts",
}
