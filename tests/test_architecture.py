"""docs/architecture.md's import rules, checked on every module's own imports (read with ast).

A module may import only the kvtool layers its row allows; ``TYPE_CHECKING`` imports count
too (a type-only import still says which way the layers lean).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[1] / "kvtool"
ARCHITECTURE = (Path(__file__).parents[1] / "docs" / "architecture.md").read_text()


def _dotted(name: str) -> str:
    """``model/`` -> ``kvtool.model``; ``profiles/schema`` -> ``kvtool.profiles.schema``."""
    name = name.strip().strip("`").rstrip("/")
    return "kvtool" if name == "kvtool" else "kvtool." + name.replace("/", ".")


def _table(heading: str) -> list[list[str]]:
    """The rows of the first table after ``heading`` in docs/architecture.md."""
    section = ARCHITECTURE.split(heading, 1)[1]
    rows = []
    for line in section.splitlines():
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
        elif rows:
            break
    return rows[2:]  # past the header and the rule


def _allowed() -> dict[str, tuple[str, ...]]:
    """docs/architecture.md's layer table: module prefix -> the kvtool prefixes it may import
    (itself always; ``anything`` is the whole package)."""
    out = {}
    for layer, _what, may in _table("## The layers and what each may import"):
        name = _dotted(layer)
        if may == "anything":
            out[name] = ("kvtool",)
        elif may == "nothing":
            out[name] = (name,)
        else:
            out[name] = (name, *(_dotted(m) for m in may.split(",")))
    return out


ALLOWED = _allowed()
PURE = tuple(_dotted(row[0]) for row in _table("## Pure modules"))

SIDE_EFFECTS = {"subprocess", "boto3", "botocore", "torch", "urllib", "socket", "shutil"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def kvtool_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kvtool"):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("kvtool")}
    return found


def rule_for(module: str) -> tuple[str, ...]:
    prefix = max((p for p in ALLOWED if module == p or module.startswith(p + ".")), key=len)
    return ALLOWED[prefix]


MODULES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=[module_name(p) for p in MODULES])
def test_module_imports_only_what_its_layer_allows(path: Path) -> None:
    module = module_name(path)
    allowed = rule_for(module)
    bad = sorted(
        name
        for name in kvtool_imports(path)
        if not any(name == a or name.startswith(a + ".") for a in allowed)
    )
    assert not bad, f"{module} imports {bad}; docs/architecture.md allows {allowed}"


def test_nothing_below_cli_imports_cli() -> None:
    for path in MODULES:
        module = module_name(path)
        if module.startswith("kvtool.cli") or module in ("kvtool.__main__",):
            continue
        assert not any(n.startswith("kvtool.cli") for n in kvtool_imports(path)), module


def test_every_package_and_module_has_a_row_in_the_docs() -> None:
    assert len(ALLOWED) >= 18  # the tables were read
    assert len(PURE) >= 18
    for path in MODULES:
        module = module_name(path)
        assert any(module == p or module.startswith(p + ".") for p in ALLOWED), module
    for pure in PURE:  # every pure entry names a real module or package
        relative = Path(*pure.split(".")[1:])
        assert (PACKAGE / relative).is_dir() or (PACKAGE / relative).with_suffix(".py").is_file()


def test_only_the_cli_imports_the_front_door() -> None:
    for path in MODULES:
        module = module_name(path)
        if module.startswith(("kvtool.cli", "kvtool.inputs")):
            continue
        assert not any(n.startswith("kvtool.inputs") for n in kvtool_imports(path)), module


def test_there_are_no_import_cycles() -> None:
    """Between packages (module-level and type-only imports alike), the layers form a DAG."""
    graph: dict[str, set[str]] = {}

    def package(name: str) -> str:
        parts = name.split(".")
        return ".".join(parts[:2]) if len(parts) > 1 else name

    for path in MODULES:
        here = package(module_name(path))
        if here in ("kvtool", "kvtool.__main__"):
            continue  # the lazy package re-exports; __main__ calls the cli
        graph.setdefault(here, set()).update(
            p for p in map(package, kvtool_imports(path)) if p not in (here, "kvtool")
        )
    seen: dict[str, int] = {}

    def visit(node: str, trail: tuple[str, ...]) -> None:
        if seen.get(node) == 2:
            return
        assert seen.get(node) != 1, " -> ".join((*trail, node))
        seen[node] = 1
        for nxt in sorted(graph.get(node, ())):
            visit(nxt, (*trail, node))
        seen[node] = 2

    for node in sorted(graph):
        visit(node, ())


def test_every_library_module_has_its_test_module() -> None:
    """kvtool/<package>/<module>.py is tested in tests/unit/<package>/test_<module>.py (a
    command, kvtool/cli/<command>.py, in tests/cli/test_<command>.py)."""
    tests = Path(__file__).parent
    missing = []
    for path in MODULES:
        relative = path.relative_to(PACKAGE)
        if path.name in ("__init__.py", "__main__.py") or relative.parts[0] == "cli":
            continue
        folder = tests / "unit" / Path(*relative.parts[:-1])
        if not (folder / f"test_{path.stem}.py").is_file():
            missing.append(str(relative))
    assert not missing, f"no test module for {missing}"


@pytest.mark.parametrize("path", MODULES, ids=[module_name(p) for p in MODULES])
def test_pure_modules_import_nothing_with_side_effects(path: Path) -> None:
    module = module_name(path)
    if not any(module == p or module.startswith(p + ".") for p in PURE):
        return
    imported = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
    assert not imported & SIDE_EFFECTS, f"{module} is pure but imports {imported & SIDE_EFFECTS}"


def test_no_engine_is_special_cased_by_name() -> None:
    """Adding an engine is one registry entry: conventions are EngineRules / OffloadLayout
    fields, never a comparison with an engine's or a stack's name."""
    import re

    names = "vllm|sglang|formula|hf|hf-legacy|lmcache|dynamo"
    pattern = re.compile(
        rf"(name|engine|stack|target)\s*(==|!=|\bin\b|\bnot in\b)\s*\(?\s*\"({names})\""
    )
    found = [
        f"{path.relative_to(PACKAGE)}:{n}: {line.strip()}"
        for path in MODULES
        if not module_name(path).startswith("kvtool.cli")
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert not found


def test_there_are_no_import_cycles_between_modules() -> None:
    """Within packages too: no module imports one that imports it back, directly or around a
    circle, counting imports made inside functions (a lazy import still ties the two)."""
    names = {module_name(path) for path in MODULES}

    def resolve(name: str) -> str | None:
        while name and name not in names:  # "kvtool.cli.render.text" or a package's module
            name = name.rpartition(".")[0]
        return name or None

    graph = {
        module_name(path): {
            target
            for target in map(resolve, kvtool_imports(path))
            if target
            and target != module_name(path)
            and not target.endswith("__init__")
            and target != "kvtool"
        }
        for path in MODULES
        if module_name(path) not in ("kvtool", "kvtool.__main__")
    }
    state: dict[str, int] = {}
    cycles: list[str] = []

    def visit(node: str, trail: list[str]) -> None:
        if state.get(node) == 2:
            return
        if state.get(node) == 1:
            cycles.append(" -> ".join([*trail[trail.index(node) :], node]))
            return
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            visit(nxt, [*trail, node])
        state[node] = 2

    for node in sorted(graph):
        visit(node, [])
    assert not cycles, cycles
