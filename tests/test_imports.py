"""The package's import graph, read from the source with `ast`: no cycles, and the layers keep
their direction (LAYERS below: a module imports only from its own layer or lower ones), and the
search's optimizer and GP stay free of torch.

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


def _module_level(tree: ast.Module):
    """The statements that run when the module is imported (not those inside functions)."""
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, (ast.If, ast.Try, ast.With)):
            todo.extend(ast.iter_child_nodes(node))


def _imports(module: str, path: pathlib.Path, known: set[str],
             at_import: bool = False) -> tuple[set[str], set[str]]:
    """(wfrl modules, top-level names of other modules) that `module` imports anywhere, or with
    at_import only those imported when the module itself is imported."""
    internal, external = set(), set()

    def add(name: str):
        if name == "wfrl" or name.startswith("wfrl."):
            if name != COMPILED and not name.startswith(COMPILED + "."):
                internal.add(name)
        else:
            external.add(name.split(".")[0])

    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in (_module_level(tree) if at_import else ast.walk(tree)):
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


def _graph(at_import: bool = False):
    sources = _sources()
    known = set(sources)
    internal, external = {}, {}
    for module, path in sources.items():
        internal[module], external[module] = _imports(module, path, known, at_import)
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


# The package's layers, lowest first. A module belongs to the layer of the longest prefix that
# names it, and imports only modules of its own layer or lower ones (docs/architecture.md).
LAYERS = [
    # facts with no wfrl dependency above them: errors, seeds, the version, the env contract
    # and the names settings take (wfrl.config.names: reds, pools, backends, collectors)
    ("wfrl._version", "wfrl.errors", "wfrl.rng", "wfrl.stats", "wfrl.config.names",
     "wfrl.envs.actions", "wfrl.envs.base", "wfrl.envs.reds", "wfrl.runlog"),
    # what a workflow is, and the defender's features computed from what it sees
    ("wfrl.workflow", "wfrl.features"),
    # the backends and their wrappers
    ("wfrl.envs",),
    # the flat-weights layout and the collectors that play it
    ("wfrl.ppo.netspec", "wfrl.collect"),
    # every setting (checks may ask the envs and the collectors)
    ("wfrl.config",),
    # the learner
    ("wfrl.ppo",),
    # scoring a policy or an agent
    ("wfrl.evaluation",),
    # one training run
    ("wfrl.training",),
    # the workflow search; the tool commands
    ("wfrl.search", "wfrl.tools"),
    # the front doors: from Python, and the callable facades of the package and of the search
    ("wfrl.api", "wfrl.__init__", "wfrl.search.__init__"),
    # the command line
    ("wfrl.cli", "wfrl.__main__"),
]


def layer_of(module: str, layers=LAYERS) -> int:
    """The index in `layers` of the longest prefix naming `module` (a package's __init__ is named
    by its package, or by `<package>.__init__` to place the facade apart from its modules)."""
    best, rank = -1, None
    for i, names in enumerate(layers):
        for name in names:
            if module == name or module.startswith(name + ".") or (
                    name.endswith(".__init__") and module == name[:-len(".__init__")]):
                length = len(name)
                if length > best:
                    best, rank = length, i
    assert rank is not None, f"{module} is in no layer: add it to LAYERS"
    return rank


def upward_imports(graph: dict[str, set[str]], layers=LAYERS) -> list[tuple[str, str]]:
    """Every (importer, imported) pair whose imported module sits in a higher layer."""
    return sorted((m, n) for m, deps in graph.items() for n in deps
                  if layer_of(n, layers) > layer_of(m, layers))


def test_the_walker_sees_every_kind_of_import():
    internal, _ = _graph()
    # from-import of a submodule (async_exec: `from wfrl.collect import worker`)
    assert "wfrl.collect.worker" in internal["wfrl.collect.async_exec"]
    # function-level import (make_collector imports each collector only when it is asked for)
    assert "wfrl.collect.sync" in internal["wfrl.collect.base"]
    # a function-level import in a package's __init__ (wfrl.search is callable: wfrl.api.search)
    assert "wfrl.api" in internal["wfrl.search"]
    assert COMPILED not in internal["wfrl.collect.buffer"]
    assert _resolve_relative("wfrl.search.loop", False, 2, "ppo") == "wfrl.ppo"
    assert _resolve_relative("wfrl.search", True, 1, "gp") == "wfrl.search.gp"
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle():
    internal, _ = _graph()
    cycle = _find_cycle(internal)
    assert cycle is None, "import cycle: " + " → ".join(cycle)


def test_every_module_has_a_layer_and_imports_downward_only():
    internal, _ = _graph()
    for module in internal:
        layer_of(module)
    bad = upward_imports(internal)
    assert not bad, "imports that reach up a layer: " + ", ".join(
        f"{m} → {n}" for m, n in bad)


def test_the_layer_rule_catches_a_planted_upward_import():
    """The rule is able to fail: the real graph with one upward import planted in it (the
    collectors reaching into the search) is refused, and so are the rule's own corner cases."""
    internal, _ = _graph()
    planted = {m: set(d) for m, d in internal.items()}
    planted["wfrl.collect.sequential"].add("wfrl.search.loop")
    assert upward_imports(planted) == [("wfrl.collect.sequential", "wfrl.search.loop")]
    # the facade of a package sits apart from its modules; the longest prefix decides
    assert layer_of("wfrl.search") > layer_of("wfrl.search.loop")
    assert layer_of("wfrl.envs.base") < layer_of("wfrl.features") < layer_of("wfrl.envs.vector")
    assert layer_of("wfrl.ppo.netspec") < layer_of("wfrl.config") < layer_of("wfrl.ppo.learner")


def test_optimizer_and_gp_are_free_of_torch():
    internal, external = _graph()
    for module in ("wfrl.search.optimizer", "wfrl.search.gp"):
        modules = {module} | _reachable(internal, module)
        torch_users = sorted(m for m in modules if "torch" in external[m])
        assert not torch_users, f"{module} reaches torch through {torch_users}"


def test_config_and_the_front_doors_load_without_numpy_or_torch():
    """`wfrl --help`, a bad flag and the thread rule of __main__ run before numpy or torch load:
    the modules they import reach neither."""
    internal, external = _graph(at_import=True)
    for module in ("wfrl.cli", "wfrl.api", "wfrl.__main__", "wfrl.config.run"):
        top = {module} | _reachable(internal, module)
        heavy = sorted(m for m in top if external[m] & {"numpy", "torch"})
        assert not heavy, f"{module} loads numpy or torch through {heavy}"
