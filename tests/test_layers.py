"""Layers point one way: every import in perfkit/ (module-level or inside a function)
goes to its own layer or one below, never up, and never to another module's private names.

    faces     perfkit (the package), cli, __main__, ui.*
    analysis  store, comparison, ratesearch, report, serve, sweep, remote (old import path)
    run       run
    kinds     spec, dperf
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
    "perfkit": "faces", "perfkit.__main__": "faces", "perfkit.cli": "faces", "perfkit.ui": "faces",
    "perfkit.store": "analysis", "perfkit.comparison": "analysis", "perfkit.ratesearch": "analysis",
    "perfkit.report": "analysis", "perfkit.serve": "analysis", "perfkit.sweep": "analysis",
    "perfkit.remote": "analysis",
    "perfkit.run": "run",
    "perfkit.spec": "kinds", "perfkit.dperf": "kinds",
    "perfkit.engines": "engines", "perfkit.procs": "engines", "perfkit.lab": "engines",
    "perfkit.stats": "base", "perfkit.units": "base", "perfkit.errors": "base", "perfkit.version": "base",
}
NATIVE = ("perfkit._sock", "perfkit._dpdk", "perfkit._counters", "perfkit._delayline")

# What is still wrong, by "importer -> imported[.name]"; each entry says why it stays.
# Fixed ones must leave: an entry that no longer matches fails the test too.
ALLOWED_UP: dict[str, str] = {
    "perfkit.comparison -> perfkit.ui.html.html_report": "",
    "perfkit.dperf -> perfkit.report._time_us": "",
    "perfkit.engines.dpdk -> perfkit.spec.DpdkFlows": "",
    "perfkit.engines.dpdk -> perfkit.spec.DpdkReflect": "",
    "perfkit.engines.dpdk -> perfkit.spec.cpu_list": "",
    "perfkit.engines.dpdk -> perfkit.spec.size_pattern": "",
    "perfkit.engines.dpdk_tcp -> perfkit.spec.DpdkHttpClient": "",
    "perfkit.engines.dpdk_tcp -> perfkit.spec.DpdkHttpServer": "",
    "perfkit.engines.socket -> perfkit.remote.RemoteHandle": "",
    "perfkit.engines.socket -> perfkit.spec.HttpLoad": "",
    "perfkit.engines.socket -> perfkit.spec.HttpServe": "",
    "perfkit.engines.socket -> perfkit.spec.LocalTest": "",
    "perfkit.engines.socket -> perfkit.spec.RemoteTest": "",
    "perfkit.engines.socket -> perfkit.spec.SocketReflect": "",
    "perfkit.engines.socket -> perfkit.spec.check_cpu_here": "",
    "perfkit.run -> perfkit.__version__": "",
    "perfkit.run -> perfkit.ui.html.html_report": "",
}
ALLOWED_PRIVATE: dict[str, str] = {
    "perfkit.cli -> perfkit.spec._int_in": "",
    "perfkit.comparison -> perfkit.store._rate_text": "",
    "perfkit.dperf -> perfkit.report._time_us": "",
    "perfkit.procs -> perfkit.engines.socket._raise_fd_limit": "",
    "perfkit.ui.html -> perfkit.store._rate_text": "",
    "perfkit.ui.lab -> perfkit.ui.panel._GREEN": "",
    "perfkit.ui.lab -> perfkit.ui.panel._GREY": "",
    "perfkit.ui.lab -> perfkit.ui.panel._RED": "",
    "perfkit.ui.lab -> perfkit.ui.panel._launch": "",
    "perfkit.ui.panel -> perfkit.cli._conf_text": "",
}
ALLOWED_LOCAL: dict[str, str] = {
    "perfkit.cli -> perfkit.__version__ (needless)": "",
    "perfkit.cli -> perfkit.dperf (needless)": "",
    "perfkit.cli -> perfkit.engines.dpdk (needless)": "",
    "perfkit.cli -> perfkit.lab (needless)": "",
    "perfkit.cli -> perfkit.ratesearch.parse_criterion (needless)": "",
    "perfkit.cli -> perfkit.ratesearch.result_text (needless)": "",
    "perfkit.cli -> perfkit.ratesearch.search (needless)": "",
    "perfkit.cli -> perfkit.ratesearch.trial_line (needless)": "",
    "perfkit.cli -> perfkit.remote (needless)": "",
    "perfkit.cli -> perfkit.remote.Server (needless)": "",
    "perfkit.cli -> perfkit.report.http_row_line (needless)": "",
    "perfkit.cli -> perfkit.spec.CONTROL_TIMEOUT_S (needless)": "",
    "perfkit.cli -> perfkit.spec.DPDK_MODES (needless)": "",
    "perfkit.cli -> perfkit.spec.DpdkFlows (needless)": "",
    "perfkit.cli -> perfkit.spec.DpdkReflect (needless)": "",
    "perfkit.cli -> perfkit.spec.HttpLoad (needless)": "",
    "perfkit.cli -> perfkit.spec.HttpServe (needless)": "",
    "perfkit.cli -> perfkit.spec.SocketReflect (needless)": "",
    "perfkit.cli -> perfkit.spec._int_in (needless)": "",
    "perfkit.cli -> perfkit.spec.check_target (needless)": "",
    "perfkit.cli -> perfkit.spec.check_timeout (needless)": "",
    "perfkit.cli -> perfkit.spec.check_wait_server (needless)": "",
    "perfkit.cli -> perfkit.units.parse_duration (needless)": "",
    "perfkit.cli -> perfkit.units.parse_size (needless)": "",
    "perfkit.comparison -> perfkit.run.Run (cycle)": "",
    "perfkit.comparison -> perfkit.store._rate_text (cycle)": "",
    "perfkit.comparison -> perfkit.ui.html.html_report (cycle)": "",
    "perfkit.comparison -> perfkit.units.format_si (needless)": "",
    "perfkit.engines.socket -> perfkit.lab.Lab (needless)": "",
    "perfkit.engines.socket -> perfkit.procs.ProcessHandle (cycle)": "",
    "perfkit.engines.socket -> perfkit.remote.RemoteHandle (cycle)": "",
    "perfkit.lab -> perfkit.units.parse_duration (needless)": "",
    "perfkit.lab -> perfkit.units.parse_rate (needless)": "",
    "perfkit.lab -> perfkit.units.parse_size (needless)": "",
    "perfkit.procs -> perfkit.engines.socket._raise_fd_limit (cycle)": "",
    "perfkit.procs -> perfkit.stats.COUNTERS (needless)": "",
    "perfkit.procs -> perfkit.stats.Histogram (needless)": "",
    "perfkit.ratesearch -> perfkit.stats.INDEX (needless)": "",
    "perfkit.remote -> perfkit.run.Run (cycle)": "",
    "perfkit.remote -> perfkit.run.environment (cycle)": "",
    "perfkit.remote -> perfkit.spec.RemoteTest (needless)": "",
    "perfkit.remote -> perfkit.spec.check_cpu_here (needless)": "",
    "perfkit.remote -> perfkit.spec.check_target (needless)": "",
    "perfkit.remote -> perfkit.stats.COUNTERS (needless)": "",
    "perfkit.remote -> perfkit.stats.COUNTER_NAMES (needless)": "",
    "perfkit.remote -> perfkit.stats.Histogram (needless)": "",
    "perfkit.remote -> perfkit.units.parse_duration (needless)": "",
    "perfkit.remote -> perfkit.units.parse_rate (needless)": "",
    "perfkit.remote -> perfkit.units.parse_size (needless)": "",
    "perfkit.run -> perfkit.__version__ (cycle)": "",
    "perfkit.run -> perfkit.ui.html.html_report (cycle)": "",
    "perfkit.spec -> perfkit.dperf.load (cycle)": "",
    "perfkit.store -> perfkit.comparison.compare (cycle)": "",
    "perfkit.store -> perfkit.run.Run (cycle)": "",
    "perfkit.store -> perfkit.units.Rate (needless)": "",
    "perfkit.ui.dashboard -> perfkit.run.Run (needless)": "",
    "perfkit.ui.html -> perfkit.__version__ (cycle)": "",
    "perfkit.ui.html -> perfkit.comparison.Comparison (cycle)": "",
    "perfkit.ui.html -> perfkit.comparison.compare (cycle)": "",
    "perfkit.ui.html -> perfkit.report.summary_text (needless)": "",
    "perfkit.ui.html -> perfkit.run.Run (cycle)": "",
    "perfkit.ui.html -> perfkit.store._rate_text (cycle)": "",
    "perfkit.ui.html -> perfkit.ui.charts (needless)": "",
    "perfkit.ui.lab -> perfkit.lab.Lab (needless)": "",
    "perfkit.ui.lab -> perfkit.lab.status_text (needless)": "",
    "perfkit.ui.panel -> perfkit.cli._conf_text (needless)": "",
    "perfkit.ui.panel -> perfkit.engines.dpdk (needless)": "",
    "perfkit.ui.panel -> perfkit.ratesearch (needless)": "",
    "perfkit.ui.panel -> perfkit.ratesearch.MAX_TRIALS (needless)": "",
    "perfkit.ui.panel -> perfkit.ratesearch.MAX_TRIAL_S (needless)": "",
    "perfkit.ui.panel -> perfkit.remote (needless)": "",
    "perfkit.ui.panel -> perfkit.remote.SWEEPABLE (needless)": "",
    "perfkit.ui.panel -> perfkit.remote.Server (needless)": "",
    "perfkit.ui.panel -> perfkit.ui.charts (needless)": "",
    "perfkit.ui.panel -> perfkit.ui.lab.LabPanel (cycle)": "",
    "perfkit.ui.panel -> perfkit.ui.points (needless)": "",
    "perfkit.ui.points -> perfkit.ui.charts.mimebundle (needless)": "",
    "perfkit.ui.points -> perfkit.ui.charts.spec_title (needless)": "",
    "perfkit.ui.points -> perfkit.units.Rate (needless)": "",
    "perfkit.ui.store -> perfkit.ui.charts (needless)": "",
    "perfkit.ui.store -> perfkit.ui.html.html_report (needless)": "",
    "perfkit.ui.store -> perfkit.ui.panel.summary_line (needless)": "",
}
ALLOWED_UNCOMMENTED: dict[str, str] = {
    "perfkit.cli": "",
    "perfkit.comparison": "",
    "perfkit.engines.dpdk": "",
    "perfkit.engines.dpdk_tcp": "",
    "perfkit.lab": "",
    "perfkit.procs": "",
    "perfkit.ratesearch": "",
    "perfkit.remote": "",
    "perfkit.run": "",
    "perfkit.spec": "",
    "perfkit.stats": "",
    "perfkit.store": "",
    "perfkit.ui.charts": "",
    "perfkit.ui.dashboard": "",
    "perfkit.ui.html": "",
    "perfkit.ui.lab": "",
    "perfkit.ui.panel": "",
    "perfkit.ui.points": "",
    "perfkit.ui.store": "",
}


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
    imports hoisted, it would close one), or, on none, it has no reason to be local."""
    g = _graph()
    out = set()
    for imp in ALL:
        if imp.local and imp.target in FILES and imp.target != imp.importer:
            why = "cycle" if _reaches(g, imp.target, imp.importer) else "needless"
            out.add(f"{imp.key} ({why})")
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
        if "#" not in here and not above.startswith("#") and mod not in ALLOWED_UNCOMMENTED:
            missing.append(f"{path.relative_to(ROOT)}:{first}: {here.strip()}")
    assert not missing, ("the first function-local import of a module says why it is local "
                         "(a comment on its line or the one above):\n  " + "\n  ".join(missing))
