"""The package's import graph has no cycles: every `from .x import` / `import ptxla_perf.x` arrow, at module level
or inside a function, read from the source with `ast` (a lazy import is still a dependency). The package face
(`ptxla_perf/__init__.py`) is a module like the others: `from . import NAME`, where NAME is no submodule, is an arrow
to it (the face imports the notebook API, so a module that took the version from it closed a 15-module cycle)."""
from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "ptxla_perf"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _resolve(modname: str, is_pkg: bool, node: ast.ImportFrom) -> list[str]:
    base = modname.split(".") if is_pkg else modname.split(".")[:-1]
    if node.level:
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    if not target.startswith("ptxla_perf"):
        return []
    # `from . import x` names submodules when they exist
    out = []
    for alias in node.names:
        sub = f"{target}.{alias.name}"
        out.append(sub if sub in MODULES else target)
    return out


MODULES = {_module_name(p) for p in PKG.rglob("*.py")}


def import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in PKG.rglob("*.py"):
        name = _module_name(path)
        is_pkg = path.name == "__init__.py"
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                deps.update(_resolve(name, is_pkg, node))
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name.startswith("ptxla_perf"))
        # only the arrows written: importing a submodule runs its packages' __init__ too, but that is no arrow
        graph[name] = {d for d in deps if d in MODULES and d != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_graph_is_read():
    g = import_graph()
    assert "ptxla_perf.rules.iteration" in g["ptxla_perf.report.assemble"]  # the reader sees module-level imports
    assert any("ptxla_perf.backends.torch_xla" in deps for deps in g.values())  # and lazy ones


def test_graph_sees_the_face():
    g = import_graph()
    assert "ptxla_perf.notebook" in g["ptxla_perf"]  # the face's lazy notebook API


def test_no_import_cycles():
    found = cycles(import_graph())
    assert not found, "import cycles (each line: the modules of one cycle):\n" + "\n".join(
        f"{len(c)}: {' '.join(c)}" for c in found)


def path_to(graph: dict[str, set[str]], start: str, goals: set[str]) -> list[str] | None:
    """The shortest chain of imports from `start` to one of `goals` (breadth first), or None."""
    came: dict[str, str | None] = {start: None}
    queue = [start]
    for v in queue:
        if v in goals and v != start:
            chain = [v]
            while came[chain[-1]] is not None:
                chain.append(came[chain[-1]])
            return chain[::-1]
        for w in sorted(graph.get(v, ())):
            if w not in came:
                came[w] = v
                queue.append(w)
    return None


def test_backends_sit_below_the_session():
    """A backend (or a child it spawns) reaches neither the session nor the report assembler: the child's side of
    following spawned processes is spawn_child, below the backends; merging the children is the parent's (spawn)."""
    g = import_graph()
    above = {"ptxla_perf.session", "ptxla_perf.spawn", "ptxla_perf.pods.merge", "ptxla_perf.report.assemble"}
    chains = [c for m in sorted(g) if m.startswith("ptxla_perf.backends") for c in [path_to(g, m, above)] if c]
    assert not chains, "\n".join(" -> ".join(c) for c in chains)


def test_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert path_to({"a": {"b"}, "b": {"c"}, "c": set()}, "a", {"c"}) == ["a", "b", "c"]
    assert path_to({"a": {"b"}, "b": set()}, "a", {"c"}) is None


# The folders' order, bottom first (issue 39, Structure III): a module imports only from its own layer or the ones
# below it, counting imports inside functions. Flat modules sit where their imports put them: `frames` reads the
# model's records, `peaks` is what the roofline's XLA figures are held against, `spawn` (the parent's side of
# following children) merges pods and is what the session calls, `cli`/`run`/`sweep` are entry points.
LAYERS = [
    {"_meta", "config"},
    {"model"},
    {"frames", "runner"},
    {"xla", "peaks"},
    {"analysis"},
    {"trace"},
    {"rules"},
    {"backends"},
    {"diff"},
    {"html"},
    {"report"},
    {"pods"},
    {"spawn"},
    {"session"},
    {"notebook"},
    {"commands", "cli", "run", "sweep", "__main__"},
    {""},  # the package face
]
MAX_FLAT = 15


def layer_of(module: str) -> int | None:
    """The layer of a module's top folder (or of the flat module itself) under ptxla_perf; None: in no layer."""
    top = module.split(".")[1] if "." in module else ""
    return next((i for i, names in enumerate(LAYERS) if top in names), None)


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    out = []
    for m in sorted(graph):
        for d in sorted(graph[m]):
            lm, ld = layer_of(m), layer_of(d)
            if lm is not None and ld is not None and ld > lm:
                out.append(f"{m} -> {d} (layer {lm} imports layer {ld})")
    return out


def test_every_module_has_a_layer():
    missing = sorted(m for m in import_graph() if layer_of(m) is None)
    assert not missing, "modules in no folder of LAYERS (place the new folder or flat module):\n" + "\n".join(missing)


def test_folders_keep_their_order():
    """A lower layer never imports a higher one (model < xla < analysis < ... < session < commands)."""
    found = upward_imports(import_graph())
    assert not found, "imports that run up the folders' order:\n" + "\n".join(found)


def test_top_floor_is_small():
    flat = sorted(p.stem for p in PKG.glob("*.py"))
    assert len(flat) <= MAX_FLAT, f"{len(flat)} modules flat in ptxla_perf/ (at most {MAX_FLAT}): {' '.join(flat)}"


def test_order_check_can_fail():
    assert upward_imports({"ptxla_perf.model.records": {"ptxla_perf.session"}, "ptxla_perf.session": set()}) == [
        "ptxla_perf.model.records -> ptxla_perf.session (layer 1 imports layer 13)"]
    assert layer_of("ptxla_perf") == len(LAYERS) - 1 and layer_of("ptxla_perf.nowhere") is None
