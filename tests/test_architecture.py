"""The package's import structure (docs/architecture.md): no cycles, and imports run one way.

Every `import` and `from ... import` of a moozi module is read from the source
with `ast`, at module level and inside functions alike (a lazy import is still
a dependency). Run this file alone to print the layers and their imports:

    python -m pytest tests/test_architecture.py -s
"""

from __future__ import annotations

import ast
import re
import pathlib
import subprocess
import sys

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "moozi"

# Lowest first: a module may import modules of its own layer or of any layer below it.
LAYERS = [
    ("moozi._version", "moozi.errors", "moozi.xla_defaults"),
    ("moozi.envs",),
    ("moozi.core",),
    ("moozi.actor_critic",),
    ("moozi.config",),
    ("moozi.builders",),
    ("moozi.runs",),
    ("moozi.play",),
    ("moozi.evaluation",),
    ("moozi.training",),
    ("moozi.cli", "moozi"),
]


def module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: pathlib.Path, modules: set[str]) -> set[str]:
    """The moozi modules `path` imports (a `from pkg import name` counts as pkg.name when that is a module)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] == "moozi")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "moozi":
                continue
            submodules = {f"{target}.{alias.name}" for alias in node.names} & modules
            found.update(submodules or {target})
    found.discard(name)
    return found


def import_graph() -> dict[str, set[str]]:
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {module_name(p) for p in paths}
    return {module_name(p): imported_modules(p, modules) for p in paths}


def layer_of(module: str) -> int:
    """The index of the most specific layer prefix that names `module`."""
    best, best_length = None, -1
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_length:
                best, best_length = index, len(prefix)
    assert best is not None, f"{module} is in no layer of tests/test_architecture.py"
    return best


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{module} (layer {layer_of(module)}) imports {target} (layer {layer_of(target)})"
        for module, targets in graph.items()
        for target in targets
        if layer_of(target) > layer_of(module)
    )


def test_the_package_has_no_import_cycles():
    assert cycles(import_graph()) == []


def test_imports_run_one_way_from_errors_up_to_the_cli():
    graph = import_graph()
    print()
    for index, prefixes in enumerate(LAYERS):
        members = sorted(m for m in graph if layer_of(m) == index)
        below = sorted({layer_of(t) for m in members for t in graph[m] if layer_of(t) < index})
        print(f"layer {index} {', '.join(prefixes)}: {len(members)} modules, imports layers {below or 'none'}")
    assert upward_imports(graph) == []


def test_the_checks_catch_a_cycle_and_an_upward_import():
    graph = {"moozi.core.a": {"moozi.core.b"}, "moozi.core.b": {"moozi.core.a"}, "moozi.envs.x": {"moozi.training.y"}}
    assert cycles(graph) == [["moozi.core.a", "moozi.core.b"]]
    assert upward_imports(graph) == ["moozi.envs.x (layer 1) imports moozi.training.y (layer 9)"]


def test_every_module_is_in_a_layer_and_the_graph_sees_lazy_imports():
    graph = import_graph()
    for module in graph:
        layer_of(module)
    # cli imports the driver inside a function: the graph must still see it.
    assert "moozi.training.driver" in graph["moozi.cli"]


@pytest.mark.parametrize("module, forbidden", [("moozi.play", "moozi.training"), ("moozi", "jax")])
def test_importing_does_not_pull_in(module, forbidden):
    """Loading an agent does not import the training package; `import moozi` stays cheap."""
    code = f"import sys, {module}; print(any(m == {forbidden!r} or m.startswith({forbidden!r} + '.') for m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def _is_config_agent(node) -> bool:
    """`config.agent`, `self.config.agent`, `agent.config.agent`, ...: the run's agent kind."""
    if not (isinstance(node, ast.Attribute) and node.attr == "agent"):
        return False
    owner = node.value
    return (isinstance(owner, ast.Name) and owner.id == "config") or (
        isinstance(owner, ast.Attribute) and owner.attr == "config")


def test_the_agent_kind_is_chosen_in_builders_only():
    # docs/architecture.md: builders.py turns the config's agent kind into the pieces each part of the
    # system uses (searches_env_state, is_actor_critic, make_act, ...); config/ defines and validates
    # it. A comparison of `config.agent` anywhere else is a decision made behind builders' back.
    allowed = {PACKAGE / "builders.py", *sorted((PACKAGE / "config").glob("*.py"))}
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path in allowed:
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Compare) and any(map(_is_config_agent, [node.left, *node.comparators])):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert found == []


def listed_modules(text: str) -> dict[str, set[str]]:
    """docs/architecture.md's module list ("## The house", its first list): each item starts with a
    folder in backticks (`moozi/` for the top level, else relative to it, e.g. `training/roles/`),
    and every other backticked name in it (a bare lowercase identifier) is one of that folder's
    modules; a folder may have more than one item. Returns folder ('' for the top level) -> modules."""
    lines = text[text.index("## The house"):].splitlines()[1:]
    start = next(i for i, line in enumerate(lines) if line.startswith("- "))
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    listed: dict[str, set[str]] = {}
    for item in re.split(r"\n(?=\s*- )", "\n".join(lines[start:end])):
        folder, *names = re.findall(r"`([^`]+)`", item)
        assert folder.endswith("/"), f"an item of the module list starts with {folder!r}, not a folder: {item!r}"
        folder = "" if folder == "moozi/" else folder.rstrip("/")
        listed.setdefault(folder, set()).update(
            name for name in names if re.fullmatch(r"_?[a-z][a-z0-9_]*", name) and name != "__init__")
    return listed


def package_modules() -> dict[str, set[str]]:
    """Folder of moozi/ ('' for the top level) -> its modules (file stems, `__init__` aside)."""
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        folder = path.parent.relative_to(PACKAGE).as_posix()
        modules = found.setdefault("" if folder == "." else folder, set())
        if path.stem != "__init__":
            modules.add(path.stem)
    return found


def list_mismatches(listed: dict[str, set[str]], actual: dict[str, set[str]]) -> tuple[list[str], list[str]]:
    """(modules of the package the list lacks, modules or folders the list names that are not there)."""
    def where(folder: str, module: str) -> str:
        return "/".join(["moozi", *([folder] if folder else []), f"{module}.py"])

    missing = sorted(where(folder, m) for folder, modules in actual.items()
                     for m in modules - listed.get(folder, set()))
    missing += sorted(f"moozi/{folder}/" for folder in actual.keys() - listed.keys() if not actual[folder])
    absent = sorted(where(folder, m) for folder, modules in listed.items()
                    for m in modules - actual.get(folder, set()))
    absent += sorted(f"moozi/{folder}/" for folder in listed.keys() - actual.keys())
    return missing, absent


def test_docs_architecture_lists_every_module_and_only_modules_that_exist():
    listed = listed_modules((PACKAGE.parent / "docs" / "architecture.md").read_text())
    missing, absent = list_mismatches(listed, package_modules())
    assert missing == [], f"docs/architecture.md's module list lacks {missing}"
    assert absent == [], f"docs/architecture.md's module list names what moozi/ does not hold: {absent}"


def test_the_module_list_check_catches_a_missing_and_a_stale_module():
    text = """## The house

- `moozi/`: `cli` and the moozi command (`moozi train`)
- `core/`: `network`, `planner` (agent=muzero)
  - `core/nested/`: `old_module`

Afterwards, not the list: `gone`.
"""
    listed = listed_modules(text)
    assert listed == {"": {"cli"}, "core": {"network", "planner"}, "core/nested": {"old_module"}}
    actual = {"": {"cli", "errors"}, "core": {"network", "planner"}, "envs": set()}
    assert list_mismatches(listed, actual) == (
        ["moozi/errors.py", "moozi/envs/"], ["moozi/core/nested/old_module.py", "moozi/core/nested/"])


def test_no_two_classes_and_no_two_modules_share_a_name():
    """A name says one thing: go-to-definition and a reader's search land on one place."""
    classes: dict[str, list[str]] = {}
    modules: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        where = str(path.relative_to(PACKAGE.parent))
        if path.name != "__init__.py":
            modules.setdefault(path.name, []).append(where)
        for node in ast.parse(path.read_text(), filename=str(path)).body:
            if isinstance(node, ast.ClassDef):
                classes.setdefault(node.name, []).append(where)
    assert {name: paths for name, paths in classes.items() if len(paths) > 1} == {}
    assert {name: paths for name, paths in modules.items() if len(paths) > 1} == {}


def test_one_driver_runs_every_agent_kind():
    """moozi/training holds one driver class; the agent kinds differ only in the loop it runs."""
    drivers = [f"{path.relative_to(PACKAGE.parent)}:{node.name}" for path in sorted(PACKAGE.rglob("*.py"))
               for node in ast.parse(path.read_text()).body
               if isinstance(node, ast.ClassDef) and node.name.endswith("Driver")]
    assert drivers == ["moozi/training/driver.py:Driver"]
