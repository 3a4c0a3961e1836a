"""The layer table of DESIGN.md holds in the code: a module imports only from its own layer or lower.

The table (``../shared/DESIGN.md``, "Layout"), bottom up:

====  ===================================================================
0     ``errors.py``, ``config.py``, ``processes.py``, ``clock.py``, ``protocol/``
0.5   ``client/`` (the HTTP client: the Spark source, the brokers' leader client and the CLI use it)
1     ``log_tables/``
2     ``replication/``, ``producers/``
3     ``consumer_groups/``, ``coordinators/``, ``security/``, ``schemas/``
3.5   ``requests/`` (the request layer: one typed operation per request kind, for every front door)
4     ``ingest_api/``, ``spark/``
5     ``broker.py``, ``cli/``, ``runtime/``
====  ===================================================================

Every import counts, also one inside a function; only imports under ``if TYPE_CHECKING:`` (type hints,
never executed) are exempt. When DESIGN.md is found beside the repository, its table is parsed and must
agree with :data:`LAYERS`. Units of one layer may import each other, but never both ways round: the
import graph between the top-level units is acyclic.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "platform"
DESIGN = ROOT.parent / "shared" / "DESIGN.md"

#: top-level module or subpackage of ``lakelog`` -> layer
LAYERS: dict[str, float] = {
    "errors": 0, "config": 0, "processes": 0, "protocol": 0, "defaults": 0,
    "clock": 0,
    "log_tables": 1,
    "replication": 2, "producers": 2,
    "consumer_groups": 3, "coordinators": 3, "security": 3, "schemas": 3,
    "requests": 3.5,
    "ingest_api": 4, "spark": 4, "kafka": 4,
    "client": 0.5,
    "broker": 5, "cli": 5, "runtime": 5,
    # DESIGN.md's table names these top-level modules, now in runtime/ (layer 5 all the same)
    "broker_process": 5, "server": 5, "demo": 5, "demo_secure": 5,
}


def _unit(module: str) -> str | None:
    """``lakelog.replication.follower`` -> ``replication``; non-lakelog modules -> None."""
    parts = module.split(".")
    if parts[0] != "lakelog":
        return None
    return parts[1] if len(parts) > 1 else None


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, package: str) -> list[tuple[int, str]]:
    """``(line, module)`` of every executed import in ``tree`` (relative imports resolved)."""
    out: list[tuple[int, str]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            out.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            out.append((node.lineno, module))
            if module == "lakelog":  # from lakelog import x
                out.extend((node.lineno, f"lakelog.{alias.name}") for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return out


def _modules() -> list[tuple[Path, str]]:
    found = []
    for path in sorted(SOURCE.rglob("*.py")):
        rel = path.relative_to(SOURCE).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found.append((path, ".".join(["lakelog", *parts])))
    return found


def test_every_module_has_a_layer():
    missing = sorted({_unit(m) for _, m in _modules() if _unit(m) not in LAYERS and _unit(m) is not None})
    assert not missing, f"modules with no layer in DESIGN.md's table: {missing}; add them to the table and LAYERS"


def _unit_imports():
    """``(path, unit, line, imported unit)`` of every executed import of one lakelog unit by another."""
    for path, module in _modules():
        own = _unit(module)
        if own is None:
            continue
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        for line, imported in _imports(ast.parse(path.read_text(), str(path)), package):
            other = _unit(imported)
            if other is not None and other != own:
                yield path, own, line, other


def test_no_module_imports_from_a_higher_layer():
    violations = [f"{path.relative_to(ROOT)}:{line} ({own}, layer {LAYERS[own]}) imports {other} (layer "
                  f"{LAYERS[other]})" for path, own, line, other in _unit_imports()
                  if own in LAYERS and other in LAYERS and LAYERS[other] > LAYERS[own]]
    assert not violations, "imports from a higher layer:\n" + "\n".join(violations)


#: Pairs of units known to import each other, each with where and why; each is to be untangled, and the
#: test fails once a pair no longer imports both ways, so that the entry goes too.
KNOWN_CYCLES: dict[frozenset[str], str] = {}


def _unit_graph() -> dict[str, dict[str, str]]:
    """``{unit: {imported unit: "path:line" of one such import}}`` between lakelog's top-level units."""
    graph: dict[str, dict[str, str]] = {}
    for path, own, line, other in _unit_imports():
        graph.setdefault(own, {}).setdefault(other, f"{path.relative_to(ROOT)}:{line}")
    return graph


def _find_cycle(graph: dict[str, dict[str, str]]) -> list[str] | None:
    """One cycle of ``graph`` as ``[a, b, ..., a]``, or None when it is acyclic (depth-first search)."""
    state: dict[str, str] = {}  # unit -> "open" (on the current path) | "done"
    path: list[str] = []

    def visit(unit: str) -> list[str] | None:
        state[unit] = "open"
        path.append(unit)
        for other in sorted(graph.get(unit, {})):
            if state.get(other) == "open":
                return path[path.index(other):] + [other]
            if other not in state and (cycle := visit(other)) is not None:
                return cycle
        path.pop()
        state[unit] = "done"
        return None

    for unit in sorted(graph):
        if unit not in state and (cycle := visit(unit)) is not None:
            return cycle
    return None


def test_no_package_cycle():
    """No two top-level units import each other, directly or through others (``replication`` imports
    ``producers``, so ``producers`` must not import ``replication``), but for :data:`KNOWN_CYCLES`."""
    graph = _unit_graph()
    for pair in KNOWN_CYCLES:
        a, b = sorted(pair)
        assert b in graph.get(a, {}) and a in graph.get(b, {}), f"{a} and {b} no longer import each other: " \
                                                                 "remove them from KNOWN_CYCLES"
        del graph[a][b]
    cycle = _find_cycle(graph)
    assert cycle is None, "a package cycle: " + " -> ".join(
        f"{a} ({graph[a][b]})" for a, b in zip(cycle, cycle[1:])) + f" -> {cycle[-1]}"


def test_the_cycle_check_finds_a_cycle():
    """:func:`_find_cycle` on made-up graphs: it finds a cycle through three units and passes a chain."""
    assert _find_cycle({"a": {"b": ""}, "b": {"c": ""}, "c": {"a": ""}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b": ""}, "b": {"c": ""}, "d": {"a": ""}}) is None


def _code_lines(tree: ast.AST, source: str) -> set[int]:
    """Line numbers of code in ``source``: not blank, not a comment, not inside a docstring."""
    docstrings: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
            docstrings.update(range(body[0].lineno, body[0].end_lineno + 1))
    return {i for i, line in enumerate(source.splitlines(), 1)
            if line.strip() and not line.strip().startswith("#") and i not in docstrings}


def test_no_module_over_600_code_lines():
    """Code lines count (docstrings and comments do not): a module grows past ~600 by what it does."""
    long = []
    for path, _ in _modules():
        source = path.read_text()
        if (n := len(_code_lines(ast.parse(source), source))) > 600:
            long.append(f"{path.relative_to(ROOT)}: {n} code lines")
    assert not long, "split these by responsibility:\n" + "\n".join(long)


@pytest.mark.skipif(not DESIGN.exists(), reason="DESIGN.md is not beside the repository")
def test_design_table_agrees():
    text = DESIGN.read_text()
    design: dict[str, int] = {}
    for layer, cells in re.findall(r"^\|\s*(\d)\s*\|([^|]*)\|", text, flags=re.M):
        for name in re.findall(r"`([a-z_]+)(?:\.py|/)`", cells):
            design[name] = int(layer)
    assert design, "no layer table found in DESIGN.md"
    disagree = {name: (layer, LAYERS.get(name)) for name, layer in design.items() if LAYERS.get(name) != layer}
    assert not disagree, f"DESIGN.md layer vs LAYERS: {disagree}"


def test_no_class_over_300_code_lines():
    big = []
    for path, _ in _modules():
        source = path.read_text()
        tree = ast.parse(source)
        code = _code_lines(tree, source)
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                n = sum(1 for i in range(node.lineno, node.end_lineno + 1) if i in code)
                if n > 300:
                    big.append(f"{path.relative_to(ROOT)}:{node.lineno} class {node.name}: {n} code lines")
    assert not big, "split these classes by responsibility:\n" + "\n".join(big)


def test_every_package_is_installed():
    """A subpackage missing from pyproject's ``packages`` works in the editable install and is missing from a
    wheel (a Spark cluster's executors, ``pip install .``)."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {"lakelog" + "".join(f".{part}" for part in d.relative_to(SOURCE).parts)
             for d in [SOURCE, *SOURCE.rglob("*")] if d.is_dir() and (d / "__init__.py").exists()}
    assert found - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
