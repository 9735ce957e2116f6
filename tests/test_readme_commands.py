"""Every shell block of the README runs as shown, as a newcomer would type it, and prints what it shows.

The blocks run in order in one temporary directory (each continues the story of the one before: the corpus the
first copies is the one the next deletes from), with ``sample_corpora/`` linked into it and a ``dedup`` on the
PATH that runs this checkout (``sys.executable -m dedup_cli``). A block written with ``$ `` prompts runs its
prompted lines as commands; the lines under a command are its output as shown, each of which must match a line
that the command printed in shape (numbers stand for any number: timings and estimates vary, ids and words do
not), ``...`` standing for lines left out. A block without prompts is one script. Every command must exit 0.

Blocks are skipped by one rule, :data:`NOT_RUN`: a block all of whose commands start with one of its programs
(make, pip, the test runner, the S3 test server) sets up or tests the checkout itself; it takes minutes or the
network, or never ends. A block that mixes such a command with others fails, so no command is skipped silently.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parent.parent
README = REPOSITORY / "README.md"

# A command starting with one of these is not run, and why.
NOT_RUN = {
    "make": "builds the virtualenv, or runs the suite, the linters or the benchmarks: minutes, the network",
    "pip": "installs from PyPI: the network",
    ".venv/bin/pytest": "the test suite, which runs this test",
    "python tests/s3_server.py": "a server that runs until it is stopped",
}
SHELL_FENCES = {"", "sh", "shell", "bash", "console"}


@dataclass
class Block:
    """A fenced shell block of the README: its first line's number, its commands and the output shown under each."""

    line: int
    commands: list[str]
    shown: list[list[str]]

    def skipped(self) -> str | None:
        """Why the block is not run, or None; a block that mixes run and skipped commands is an error."""
        reasons = [next((why for program, why in NOT_RUN.items() if command.startswith(program)), None)
                   for command in self.commands]
        if all(reasons):
            return f"README.md:{self.line}: " + "; ".join(sorted(set(filter(None, reasons))))
        assert not any(reasons), f"README.md:{self.line} mixes commands run with commands skipped by NOT_RUN"
        return None


def _without_comment(line: str) -> str:
    """A command line without its ``# comment`` (a ``#`` after a space, or first)."""
    return re.sub(r"(?:^|\s+)# .*$", "", line).rstrip()


def shell_blocks(text: str) -> list[Block]:
    """The README's fenced blocks whose language is a shell's (or none)."""
    blocks: list[Block] = []
    lines = text.splitlines()
    number = 0
    while number < len(lines):
        fence = re.match(r"```(\w*)\s*$", lines[number])
        if not fence:
            number += 1
            continue
        end = next(index for index in range(number + 1, len(lines)) if lines[index].startswith("```"))
        body = lines[number + 1:end]
        if fence.group(1) in SHELL_FENCES:
            blocks.append(_block(number + 1, body))
        number = end + 1
    return blocks


def _block(line: int, body: list[str]) -> Block:
    if not any(text.startswith("$ ") for text in body):
        # One command a line, continued after a backslash; comments and comment-only lines dropped.
        logical = re.split(r"(?<!\\)\n", "\n".join(body))
        commands = [command for command in map(_without_comment, logical) if command.strip()]
        return Block(line, commands, [[] for _ in commands])
    commands: list[str] = []
    shown: list[list[str]] = []
    for text in body:
        if text.startswith("$ "):
            commands.append(text[2:])
            shown.append([])
        elif commands and text.strip():
            shown[-1].append(text)
    return Block(line, commands, shown)


def _shape(line: str) -> str:
    return re.sub(r"\d+(?:\.\d+)?", "N", line.rstrip())


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A directory with sample_corpora/ and an environment whose ``dedup`` runs this checkout."""
    directory = tmp_path_factory.mktemp("readme")
    (directory / "sample_corpora").symlink_to(REPOSITORY / "sample_corpora")
    bin_dir = tmp_path_factory.mktemp("bin")
    dedup = bin_dir / "dedup"
    dedup.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m dedup_cli "$@"\n', encoding="utf-8")
    dedup.chmod(0o755)
    environment = {name: value for name, value in os.environ.items() if not name.startswith("DEDUP_")}
    environment["PATH"] = f"{bin_dir}{os.pathsep}{environment.get('PATH', '')}"
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPOSITORY), environment.get("PYTHONPATH")]))
    return directory, environment


BLOCKS = shell_blocks(README.read_text(encoding="utf-8"))
RAN: set[int] = set()  # the blocks run in the module's workspace, by line


def test_the_readme_has_shell_blocks_to_run() -> None:
    assert [block for block in BLOCKS if block.skipped() is None]
    assert [block for block in BLOCKS if block.skipped() is not None]  # the rule is used, so is tested


def run_block(block: Block, directory: Path, environment: dict[str, str]) -> None:
    """Run ``block``'s commands in ``directory``; fail when one exits non-zero or prints no line like one shown."""
    for command, shown in zip(block.commands, block.shown, strict=True):
        done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", command], cwd=directory, env=environment,
                              capture_output=True, text=True, timeout=300)
        printed = done.stdout + done.stderr
        assert done.returncode == 0, f"README.md:{block.line}: `{command}` exited {done.returncode}:\n{printed}"
        shapes = {_shape(line) for line in printed.splitlines()}
        for line in shown:
            assert line.strip() == "..." or _shape(line) in shapes, (
                f"README.md:{block.line}: `{command}` printed no line like\n{line}\nbut:\n{printed}")


@pytest.mark.parametrize("block", BLOCKS, ids=[f"line-{block.line}" for block in BLOCKS])
def test_every_readme_shell_block_runs_as_shown(block: Block, workspace: tuple[Path, dict[str, str]]) -> None:
    why = block.skipped()
    if why is not None:
        pytest.skip(why)
    # The blocks before it first (once each), when it runs alone: it continues their story.
    for earlier in BLOCKS[:BLOCKS.index(block) + 1]:
        if earlier.skipped() is None and earlier.line not in RAN:
            RAN.add(earlier.line)
            run_block(earlier, *workspace)


def test_a_command_that_fails_or_prints_otherwise_fails_the_block(tmp_path: Path,
                                                                  workspace: tuple[Path, dict[str, str]]) -> None:
    _, environment = workspace
    (tmp_path / "a.txt").write_text("one two three four five six seven\n", encoding="utf-8")
    with pytest.raises(AssertionError, match="exited 1"):
        run_block(Block(1, ["dedup sign missing/"], [[]]), tmp_path, environment)
    with pytest.raises(AssertionError, match="printed no line like"):
        run_block(Block(1, ["dedup sign a.txt"], [["signed 1 document into nowhere"]]), tmp_path, environment)
    run_block(Block(1, ["dedup sign a.txt -o other.parquet"], [["..."]]), tmp_path, environment)


def test_a_block_is_read_as_a_newcomer_reads_it() -> None:
    text = ("intro\n```\n$ dedup sign corpus/\nsigned 4 documents\n\n$ dedup find -q\n{\"group\": 1}\n...\n```\n"
            "```python\nimport dedup_cli\n```\n```\nmake demo    # the demo\nmake test\n```\n"
            "```\ncd corpus && dedup find \\\n  | cut -f1   # the ids\n```\n")
    prompted, made, script = shell_blocks(text)
    assert prompted.commands == ["dedup sign corpus/", "dedup find -q"]
    assert prompted.shown == [["signed 4 documents"], ['{"group": 1}', "..."]]
    assert made.commands == ["make demo", "make test"] and made.skipped() is not None
    assert script.commands == ["cd corpus && dedup find \\\n  | cut -f1"] and script.skipped() is None
    assert _shape("0.15 s (0.8 MB/s), run 1") == _shape("2.5 s (10 MB/s), run 3") != _shape("run one")
