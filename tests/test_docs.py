"""The documents say what the code does: the generated references are current, and no document points outside
the repository or at an issue tracker."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import click
import pytest

import dedup_cli
from dedup_cli.cli.main import cli

REPOSITORY = Path(__file__).resolve().parent.parent
DOCS = REPOSITORY / "docs"
REGENERATE = "python docs/generate_reference.py (or make docs)"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("generate_reference", DOCS / "generate_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module


generator = _generator()


@pytest.mark.parametrize("name", ["cli.md", "api.md"])
def test_the_generated_reference_is_current(name: str) -> None:
    path = DOCS / name
    expected = generator.references()[path]
    assert path.exists(), f"docs/{name} is missing; run {REGENERATE}"
    actual = path.read_text(encoding="utf-8")
    assert actual == expected, f"docs/{name} differs from what the code says; run {REGENERATE} and commit it"


def test_the_reference_holds_every_command_and_option() -> None:
    text = generator.cli_reference()
    commands = list(cli.commands)
    assert {"sign", "find", "filter", "estimate", "eval", "plan", "info"} <= set(commands)
    for name, command in cli.commands.items():
        assert f"\n## dedup {name}\n" in text, name
        for parameter in command.params:
            if isinstance(parameter, click.Option):
                assert any(flag in text for flag in parameter.opts), (name, parameter.opts)


def test_the_reference_does_not_depend_on_the_terminal_or_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    reference = generator.cli_reference()
    monkeypatch.setenv("COLUMNS", "40")
    monkeypatch.setenv("DEDUP_STORE", "/leaked/sigs.parquet")
    monkeypatch.setenv("DEDUP_FIND_THRESHOLD", "0.9")
    monkeypatch.setenv("DEDUP_SCHEDULER", "tcp://leaked:8786")
    assert generator.cli_reference() == reference
    assert "leaked" not in reference


def test_the_api_reference_holds_every_public_name() -> None:
    text = generator.api_reference()
    for name in dedup_cli.__all__:
        assert f"\n## `{name}`\n" in text, name
    assert " at 0x" not in text, "an object's address leaked into docs/api.md"
    assert "(No docstring.)" not in text, "give every public name, method and property a docstring"


# "issue 12", "#19"; not a standard's section ("UAX #29").
_ISSUE = re.compile(r"\b[Ii]ssues? #?\d+|(?<![\w&])(?<!UAX )#\d+\b")
_OUTSIDE = re.compile(r"\bSPEC\.md|\bSTYLE\.md|\.\./shared|\.\./papers|\bpapers/")


# Results files the benchmark scripts write when they are run (named by the documents before the first run).
_WRITTEN_BY_BENCHMARKS = {"bench/RESULTS-filter.md", "bench/RESULTS-resume.md"}


def _documents() -> list[Path]:
    return [REPOSITORY / "README.md", *sorted(DOCS.glob("*.md")), *sorted((REPOSITORY / "bench").glob("*.md"))]


def test_no_document_cites_an_issue_or_a_file_outside_the_repository() -> None:
    sources = [*sorted((REPOSITORY / "dedup_cli").rglob("*.py")), DOCS / "generate_reference.py"]
    offenders = [f"{path.relative_to(REPOSITORY)}:{number}: {line.strip()}"
                 for path in [*_documents(), *sources]
                 for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
                 if _ISSUE.search(line) or _OUTSIDE.search(line)]
    assert not offenders, "\n".join(offenders)


def _anchors(path: Path) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown file (outside code blocks)."""
    headings, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            headings.append(line.lstrip("#").strip())
    return set(generator._unique_anchors(headings))


def test_links_between_documents_lead_somewhere() -> None:
    # Relative Markdown links (and their #anchors), and docs/NAME.md or bench/NAME.md named in the text, must name
    # files and headings that exist.
    missing = []
    for path in _documents():
        text = path.read_text(encoding="utf-8")
        for target, anchor in re.findall(r"\]\(([^)#:\s]*)(?:#([^)\s]*))?\)", text):
            linked = path if not target else path.parent / target
            if not linked.exists():
                missing.append(f"{path.relative_to(REPOSITORY)} → {target}")
            elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
                missing.append(f"{path.relative_to(REPOSITORY)} → {target}#{anchor}")
        for target in re.findall(r"\b((?:docs|bench)/[\w.-]+\.(?:md|py|png))\b", text):
            if not (REPOSITORY / target).exists() and target not in _WRITTEN_BY_BENCHMARKS:
                missing.append(f"{path.relative_to(REPOSITORY)} → {target}")
    assert not missing, "\n".join(missing)


def test_the_readme_is_a_front_door() -> None:
    readme = (REPOSITORY / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    assert "make test" in readme and "make demo" in readme  # .ci/run runs the README's test command


def _bench_script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, REPOSITORY / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module


readme_numbers = _bench_script("readme_numbers")


def _how_fast(bench: Path) -> str:
    try:
        return str(readme_numbers.section(bench))
    except readme_numbers.ResultsError as error:
        if "git does not know" in str(error) and not (REPOSITORY / ".git").exists():
            pytest.skip("the results name commits, dated by git, and this is no git checkout")
        raise


def test_the_readme_numbers_are_the_benchmarks_numbers() -> None:
    readme = (REPOSITORY / "README.md").read_text(encoding="utf-8")
    assert readme_numbers.with_section(readme, _how_fast(REPOSITORY / "bench")) == readme, (
        "README.md's How fast section differs from bench/RESULTS*.md; run python bench/readme_numbers.py")


@pytest.mark.parametrize(("name", "measured", "changed"), [
    ("RESULTS.md", "| 0.5 | 5.27 |", "| 0.5 | 5.30 |"),  # dedup's sign + find of 10^5 documents
    ("RESULTS-scaling.md", "| 10,000,000 | 2 | 10.87 |", "| 10,000,000 | 2 | 11.87 |"),  # find 10^7, -j 2
    ("RESULTS-scale.md", "| 209.5 (285.7) |", "| 219.5 (285.7) |"),  # the card's find of 10^8, local
    ("RESULTS-scaling.md", "| find | Dask, 2 hosts | 4.78 |", "| find | Dask, 2 hosts | 4.88 |"),  # loopback hosts
])
def test_a_number_changed_in_the_results_changes_the_readme(tmp_path: Path, name: str, measured: str,
                                                            changed: str) -> None:
    for path in (REPOSITORY / "bench").glob("RESULTS*.md"):
        (tmp_path / path.name).write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    text = (tmp_path / name).read_text(encoding="utf-8")
    assert text.count(measured) == 1
    (tmp_path / name).write_text(text.replace(measured, changed), encoding="utf-8")
    assert _how_fast(tmp_path) != _how_fast(REPOSITORY / "bench")
