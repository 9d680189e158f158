"""The import graph reads one way: no module imports itself back through others (at module
level or inside a function), so every module can be understood from the ones below it."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("tosa_verify", "lowering", "golden", "ethosu", "vgf")


def _modules() -> dict[str, Path]:
    mods = {}
    for pkg in PACKAGES:
        for f in sorted((ROOT / pkg).rglob("*.py")) if (ROOT / pkg).is_dir() else []:
            parts = f.relative_to(ROOT).with_suffix("").parts
            mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return mods


def import_graph() -> dict[str, set[str]]:
    """Project module -> the project modules it imports anywhere in its body.

    Example:
        >>> "lowering.graph_utils" in import_graph()["lowering.emitter"]
        True
    """
    mods = _modules()
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in mods.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = name.split(".") if is_pkg else name.split(".")[:-1]
                base = base[: len(base) - node.level + 1] if node.level else []
                module = ".".join(base + ([node.module] if node.module else []))
                targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in mods else module
                           for a in node.names]
            else:
                continue
            for target in targets:
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
    return found


def test_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_import_cycles():
    graph = import_graph()
    assert "lowering.ops" in graph["lowering.emitter"]  # the graph is really read
    assert cycles(graph) == []


# --------------------------------------------------------------------------- layers (docs/ARCHITECTURE.md)

#: The application layer: the tosa_verify modules that join the core with lowering, ethosu, vgf
#: and golden (the console script and public imports keep cli/check/eval_cli/report at their paths).
APP_MODULES = {"tosa_verify.cli", "tosa_verify.check", "tosa_verify.eval_cli", "tosa_verify.report"}
OUTSIDE_CORE = ("lowering", "ethosu", "golden", "vgf")
#: What a function-level import of a project module must say on its line (the one allowed reason).
LAZY_MARK = "# lazy: start-up speed"


def layer(module: str) -> str:
    """The node of ``module`` in the package-level graph: its top package, with tosa_verify split
    into the core (``tosa_verify``) and the application layer (``tosa_verify.app``).

    >>> layer("tosa_verify.app.check"), layer("tosa_verify.cli"), layer("tosa_verify.ops.facts")
    ('tosa_verify.app', 'tosa_verify.app', 'tosa_verify')
    """
    if module in APP_MODULES or module.startswith("tosa_verify.app"):
        return "tosa_verify.app"
    return module.split(".")[0]


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph collapsed to :func:`layer` nodes."""
    out: dict[str, set[str]] = defaultdict(set)
    for src, targets in graph.items():
        for dst in targets:
            if layer(src) != layer(dst):
                out[layer(src)].add(layer(dst))
    return out


def _function_level_imports(path: Path) -> list[tuple[int, str, str]]:
    """(line, imported project module or package, the source line) of every import of a project
    module that sits inside a function."""
    text = path.read_text()
    lines = text.splitlines()
    found = []
    for fn in ast.walk(ast.parse(text)):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.ImportFrom):
                name = "." * node.level + (node.module or "")
            elif isinstance(node, ast.Import):
                name = node.names[0].name
            else:
                continue
            if name.startswith(".") or name.split(".")[0] in PACKAGES:
                found.append((node.lineno, name, lines[node.lineno - 1]))
    return found


def test_core_never_reaches_the_packages_above_it():
    """The core of tosa_verify imports nothing of lowering/ethosu/golden/vgf or the application
    layer, at module level or inside a function."""
    graph = import_graph()
    assert "lowering" in graph["tosa_verify.app.check"]  # the application layer is really read
    bad = {m: sorted(t for t in targets if layer(t) != "tosa_verify")
           for m, targets in graph.items() if layer(m) == "tosa_verify"}
    assert {m: t for m, t in bad.items() if t} == {}


def test_packages_form_no_cycle_but_through_the_application_layer():
    packages = package_graph(import_graph())
    assert "tosa_verify.app" in packages and "tosa_verify" in packages["lowering"]
    assert cycles(packages) == []
    assert not any("tosa_verify.app" in targets for targets in packages.values())  # the top


def test_tosa_verify_imports_at_module_level():
    """No import of a project module hides inside a function (to dodge a cycle); the only
    exception is a lazy import for start-up speed, marked on its line."""
    hidden = []
    for path in sorted((ROOT / "tosa_verify").rglob("*.py")):
        for line, name, source in _function_level_imports(path):
            if LAZY_MARK not in source:
                hidden.append(f"{path.relative_to(ROOT)}:{line}: {name}")
    assert hidden == []


def test_function_level_import_finder_finds_one(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("import os\n\ndef f():\n    from . import graph\n    import lowering  " + LAZY_MARK + "\n")
    assert [(n, name) for n, name, _ in _function_level_imports(src)] == [(4, "."), (5, "lowering")]


def test_help_does_not_import_torch():
    """``tosa-verify --help`` builds every verb's parser without loading torch (start-up speed):
    the verbs that need torch are imported when they run."""
    code = ("import sys; from tosa_verify.cli import build_parser; build_parser();"
            "assert 'torch' not in sys.modules and 'lowering' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT,
                   env={**os.environ, "PYTHONPATH": str(ROOT)})
