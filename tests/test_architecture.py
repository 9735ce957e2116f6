"""House rules on imports (STYLE.md, Architecture), read from the source with ``ast``.

documents → shingles → signatures → candidates → estimates → groups: data flows forward only, only the CLI
knows about click and tqdm, and only the store (and input readers) know about pyarrow.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = "dedup_cli"
PACKAGE_DIR = Path(__file__).resolve().parent.parent / PACKAGE


@dataclass(frozen=True)
class Import:
    """One thing a module imports: a third-party top-level name, or a dedup module (by its name in the package)."""

    module: str  # the importing module, e.g. "lsh"
    target: str  # e.g. "numpy", "pyarrow", or "dedup_cli.errors"
    line: int

    def __str__(self) -> str:
        return f"{PACKAGE}/{self.module.replace('.', '/')}.py:{self.line} imports {self.target}"


def _package_modules(package_dir: Path) -> dict[str, Path]:
    """Module name inside the package (``"lsh"``, ``"__main__"``, ``"engine.spark"``) → file."""
    modules = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = path.relative_to(package_dir).with_suffix("").parts
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _internal(dotted: str, known: set[str]) -> str:
    """``dedup_cli.x.y`` → ``dedup_cli.x.y`` if a module, else its longest module prefix (``x.y`` may be a name)."""
    inside = dotted.split(".")[1:]
    while inside and ".".join(inside) not in known:
        inside.pop()
    return ".".join([PACKAGE, *inside]) if inside else f"{PACKAGE}.__init__"


def parse_imports(source: str, module: str, known: set[str]) -> list[Import]:
    """Every import in ``source``, including ones inside functions and ``importlib.import_module("…")``."""
    package_parts = module.split(".")[:-1]  # where relative imports start from
    found: list[Import] = []

    def add(dotted: str, line: int, names: tuple[str, ...] = ()) -> None:
        top = dotted.split(".")[0]
        if top != PACKAGE:
            found.append(Import(module, top, line))
            return
        # ``from dedup_cli import pipeline`` imports the module dedup_cli.pipeline.
        submodules = [f"{dotted}.{name}" for name in names if ".".join([*dotted.split(".")[1:], name]) in known]
        for target in submodules or [dotted]:
            found.append(Import(module, _internal(target, known), line))

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            names = tuple(alias.name for alias in node.names)
            if node.level:
                base = package_parts[: len(package_parts) - (node.level - 1)] if node.level > 1 else package_parts
                dotted = ".".join([PACKAGE, *base, *([node.module] if node.module else [])])
            else:
                dotted = node.module or ""
            add(dotted, node.lineno, names)
        elif (
            isinstance(node, ast.Call)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and (
                (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                or (isinstance(node.func, ast.Name) and node.func.id in ("import_module", "__import__"))
            )
        ):
            add(node.args[0].value, node.lineno)
    return found


def _all_imports() -> list[Import]:
    modules = _package_modules(PACKAGE_DIR)
    known = set(modules)
    imports = []
    for name, path in modules.items():
        imports.extend(parse_imports(path.read_text(encoding="utf-8"), name, known))
    return imports


IMPORTS = _all_imports()


def _importers(target_prefix: str) -> dict[str, list[Import]]:
    found: dict[str, list[Import]] = {}
    for item in IMPORTS:
        if item.target == target_prefix or item.target.startswith(target_prefix + "."):
            found.setdefault(item.module, []).append(item)
    return found


def _imports_of(module: str) -> list[Import]:
    return [item for item in IMPORTS if item.module == module]


def _violations(items: list[Import]) -> str:
    return "; ".join(str(item) for item in items)


# --- the rules ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("library", "allowed"),
    [
        ("click", {"cli"}),
        ("tqdm", {"cli"}),
        # Input readers may read Parquet text columns too.
        ("pyarrow", {"storage", "corpus"}),
    ],
)
def test_third_party_libraries_stay_in_their_module(library: str, allowed: set[str]) -> None:
    offenders = [item for module, items in _importers(library).items() if module not in allowed for item in items]
    assert not offenders, f"only {', '.join(sorted(allowed))} may import {library}: {_violations(offenders)}"


@pytest.mark.parametrize(
    ("module", "forbidden"),
    [
        ("shingling", {"lsh", "scoring", "grouping", "pipeline", "cli"}),
        ("lsh", {"scoring", "grouping", "pipeline", "cli"}),
    ],
)
def test_data_flows_one_way(module: str, forbidden: set[str]) -> None:
    assert module in _package_modules(PACKAGE_DIR)
    forbidden_targets = {f"{PACKAGE}.{name}" for name in forbidden}
    offenders = [item for item in _imports_of(module) if item.target in forbidden_targets]
    assert not offenders, f"{module} is upstream of {', '.join(sorted(forbidden))}: {_violations(offenders)}"


def test_estimators_stand_alone() -> None:
    allowed = {f"{PACKAGE}.errors", f"{PACKAGE}.collisions"}
    offenders = [
        item
        for item in _imports_of("estimators")
        if item.target.startswith(PACKAGE + ".") and item.target not in allowed
    ]
    assert not offenders, f"estimators may import only errors and collisions: {_violations(offenders)}"


def test_nothing_imports_the_cli_but_main() -> None:
    offenders = [
        item for module, items in _importers(f"{PACKAGE}.cli").items() if module != "__main__" for item in items
    ]
    assert not offenders, f"only __main__ may import the CLI: {_violations(offenders)}"


# --- the parser sees what the rules need -------------------------------------------------------------------


def test_rules_are_not_vacuous() -> None:
    # If parsing silently missed imports, every rule above would pass; these are known to exist.
    assert {item.target for item in _imports_of("cli")} >= {"click", "tqdm", f"{PACKAGE}.pipeline"}
    assert "pyarrow" in {item.target for item in _imports_of("storage")}
    assert f"{PACKAGE}.errors" in {item.target for item in _imports_of("estimators")}  # a relative import
    assert f"{PACKAGE}.cli" in {item.target for item in _imports_of("__main__")}
    assert len({item.module for item in IMPORTS}) >= 10


KNOWN = {"__init__", "__main__", "pipeline", "errors", "lsh", "grouping", "scoring", "estimators", "engine.spark"}


def _targets(source: str, module: str) -> set[tuple[str, int]]:
    return {(item.target, item.line) for item in parse_imports(source, module, KNOWN)}


def test_parse_imports_understands_every_form() -> None:
    source = """
import numpy as np, os.path
import pyarrow.parquet as pq
from click import echo
from dedup_cli import __version__, pipeline
from dedup_cli import __version__
from dedup_cli.errors import UsageError
import dedup_cli.lsh
from . import grouping
from .scoring import score_pairs

def later():
    from tqdm import tqdm
    import importlib
    importlib.import_module("dedup_cli.estimators")
    __import__("xxhash")
"""
    assert _targets(source, "pipeline") == {
        ("numpy", 2),
        ("os", 2),
        ("pyarrow", 3),
        ("click", 4),
        ("dedup_cli.pipeline", 5),  # __version__ is a name, pipeline a module
        ("dedup_cli.__init__", 6),
        ("dedup_cli.errors", 7),
        ("dedup_cli.lsh", 8),
        ("dedup_cli.grouping", 9),
        ("dedup_cli.scoring", 10),
        ("tqdm", 13),  # imports inside functions count
        ("importlib", 14),
        ("dedup_cli.estimators", 15),
        ("xxhash", 16),
    }


def test_parse_imports_resolves_relative_imports_in_subpackages() -> None:
    source = """
from .. import lsh
from ..errors import UsageError
from . import spark
from .spark import run
"""
    assert _targets(source, "engine.local") == {
        ("dedup_cli.lsh", 2),
        ("dedup_cli.errors", 3),
        ("dedup_cli.engine.spark", 4),
        ("dedup_cli.engine.spark", 5),
    }
