"""The package's import graph, read from the source with `ast`: no cycles, and the layers keep
their direction (collect/ does not reach up into the learner or the search; the search's
optimizer and GP stay free of torch).

Every `import` and `from … import` counts, at module level and inside functions; relative imports
are resolved; `from pkg import name` counts as importing pkg.name when that is a submodule; a
package stands for its __init__.py. wfrl._core (the compiled extension) is not a source file."""
import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
PKG = ROOT / "wfrl"
COMPILED = "wfrl._core"


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources() -> dict[str, pathlib.Path]:
    return {_module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def _resolve_relative(module: str, is_package: bool, level: int, target: str | None) -> str:
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    if level > 1:
        base = base[:len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def _imports(module: str, path: pathlib.Path, known: set[str]) -> tuple[set[str], set[str]]:
    """(wfrl modules, top-level names of other modules) that `module` imports anywhere."""
    internal, external = set(), set()

    def add(name: str):
        if name == "wfrl" or name.startswith("wfrl."):
            if name != COMPILED and not name.startswith(COMPILED + "."):
                internal.add(name)
        else:
            external.add(name.split(".")[0])

    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            source = (_resolve_relative(module, path.name == "__init__.py", node.level, node.module)
                      if node.level else node.module)
            submodules = [f"{source}.{a.name}" for a in node.names
                          if f"{source}.{a.name}" in known]
            for name in submodules:
                add(name)
            if len(submodules) < len(node.names):  # names defined in `source` itself
                add(source)
    unknown = {m for m in internal if m not in known}
    assert not unknown, f"{module} imports modules that do not exist: {sorted(unknown)}"
    return internal, external


def _graph():
    sources = _sources()
    known = set(sources)
    internal, external = {}, {}
    for module, path in sources.items():
        internal[module], external[module] = _imports(module, path, known)
        internal[module].discard(module)
    return internal, external


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as [a, b, …, a], or None."""
    WHITE, GREY, BLACK = 0, 1, 2
    colour = {m: WHITE for m in graph}
    stack: list[str] = []

    def visit(m):
        colour[m] = GREY
        stack.append(m)
        for n in sorted(graph[m]):
            if colour[n] == GREY:
                return stack[stack.index(n):] + [n]
            if colour[n] == WHITE:
                found = visit(n)
                if found:
                    return found
        stack.pop()
        colour[m] = BLACK
        return None

    for m in sorted(graph):
        if colour[m] == WHITE:
            found = visit(m)
            if found:
                return found
    return None


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        m = todo.pop()
        for n in graph[m]:
            if n not in seen:
                seen.add(n)
                todo.append(n)
    return seen


def _in(module: str, *packages: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def test_the_walker_sees_every_kind_of_import():
    internal, _ = _graph()
    # from-import of a submodule (async_exec: `from wfrl.collect import worker`)
    assert "wfrl.collect.worker" in internal["wfrl.collect.async_exec"]
    # function-level import (make_collector imports each collector only when it is asked for)
    assert "wfrl.collect.sync" in internal["wfrl.collect.base"]
    # a module importing its package's names (`from wfrl import __version__`)
    assert "wfrl" in internal["wfrl.train"]
    assert COMPILED not in internal["wfrl.collect.buffer"]
    assert _resolve_relative("wfrl.search.loop", False, 2, "ppo") == "wfrl.ppo"
    assert _resolve_relative("wfrl.search", True, 1, "gp") == "wfrl.search.gp"
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle():
    internal, _ = _graph()
    cycle = _find_cycle(internal)
    assert cycle is None, "import cycle: " + " → ".join(cycle)


def test_collect_does_not_reach_up_into_learner_or_search():
    """Collectors turn flat weights into episodes; they know the flat-weights layout
    (wfrl.ppo.netspec, torch-free) and nothing else of the learner, the protocol or the search."""
    internal, external = _graph()
    for module in internal:
        if not _in(module, "wfrl.collect"):
            continue
        reached = _reachable(internal, module)
        bad = sorted(m for m in reached
                     if _in(m, "wfrl.search", "wfrl.train", "wfrl.protocol", "wfrl.cli")
                     or (_in(m, "wfrl.ppo") and m != "wfrl.ppo.netspec"))
        assert not bad, f"{module} imports (directly or through others) {bad}"


def test_optimizer_and_gp_are_free_of_torch():
    internal, external = _graph()
    for module in ("wfrl.search.optimizer", "wfrl.search.gp"):
        modules = {module} | _reachable(internal, module)
        torch_users = sorted(m for m in modules if "torch" in external[m])
        assert not torch_users, f"{module} reaches torch through {torch_users}"
