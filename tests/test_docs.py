"""The documents say what the code does: the generated references of the command line and the API are current."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import click
import pytest

import dedup_cli
from dedup_cli.cli import cli

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
