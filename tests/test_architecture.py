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

# module prefix -> kvtool prefixes it may import (longest matching prefix wins)
ALLOWED: dict[str, tuple[str, ...]] = {
    "kvtool.errors": (),
    "kvtool.units": ("kvtool.errors",),
    "kvtool.files": ("kvtool.errors",),
    "kvtool.findings": (),
    "kvtool.model": ("kvtool.errors", "kvtool.units", "kvtool.model"),
    "kvtool.profiles.schema": ("kvtool.errors",),
    "kvtool.profiles.hardware": ("kvtool.errors", "kvtool.profiles.schema"),
    "kvtool.profiles": ("kvtool.errors", "kvtool.files", "kvtool.model", "kvtool.profiles"),
    "kvtool.plan": (
        "kvtool.findings",
        "kvtool.errors",
        "kvtool.units",
        "kvtool.model",
        "kvtool.profiles.schema",
        "kvtool.profiles.hardware",
        "kvtool.plan",
    ),
    "kvtool.probe": ("kvtool.errors", "kvtool.units", "kvtool.files", "kvtool.probe"),
    "kvtool.doctor": (
        "kvtool.findings",
        "kvtool.errors",
        "kvtool.units",
        "kvtool.model",
        "kvtool.profiles",
        "kvtool.plan",
        "kvtool.probe",
        "kvtool.doctor",
    ),
    "kvtool.bench": (
        "kvtool.errors",
        "kvtool.units",
        "kvtool.model",
        "kvtool.profiles",
        "kvtool.plan",
        "kvtool.probe",
        "kvtool.bench",
    ),
    "kvtool.engine": (
        "kvtool.errors",
        "kvtool.units",
        "kvtool.model",
        "kvtool.plan",
        "kvtool.engine",
    ),
    "kvtool.replay": (
        "kvtool.errors",
        "kvtool.model",
        "kvtool.plan",
        "kvtool.engine",
        "kvtool.replay",
    ),
    "kvtool.cli": ("kvtool",),
    "kvtool.__main__": ("kvtool.cli",),
    "kvtool": ("kvtool",),  # the lazy package __init__ re-exports the library
}
PURE = (
    "kvtool.model",
    "kvtool.plan",
    "kvtool.profiles.schema",
    "kvtool.profiles.hardware",
    "kvtool.probe.parse",
    "kvtool.probe.facts",
    "kvtool.doctor.checks",
    "kvtool.findings",
    "kvtool.bench.fio",
    "kvtool.bench.result",
    "kvtool.bench.measured",
    "kvtool.engine.keys",
    "kvtool.engine.policy",
    "kvtool.engine.manager",
    "kvtool.engine.chunkfile",
    "kvtool.replay.trace",
    "kvtool.replay.run",
    "kvtool.replay.ttft",
    "kvtool.replay.gen",
)
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


def test_every_package_has_a_row_in_the_docs() -> None:
    packages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and not p.name.startswith("_")}
    for package in packages:
        assert f"`{package}/`" in ARCHITECTURE, package


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
