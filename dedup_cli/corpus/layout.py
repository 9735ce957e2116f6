"""Where ``filter`` writes: how OUT maps to the inputs, and the checks that keep it from harming anything.

- One input that is a file (or ``-``, stdin), named on the command line: OUT is one file in the same format and
  compression (``-o -``: stdout, for a line format).
- Otherwise (a directory, several inputs, ``--files-from``): OUT is a directory that mirrors the inputs, each
  file at its path relative to the deepest directory holding all the inputs (for one directory, the directory
  itself), so ``filter corpus/ -o clean/`` makes ``clean/`` a deduplicated ``corpus/``.

OUT is never an input, never inside an input directory (nor holding an input), never the store. An existing
file OUT is replaced (like ``find -o``); an existing directory only when it is empty or an earlier ``filter`` wrote
it (it holds :data:`MARKER`): another directory is refused, never deleted. Any of them may be in object storage
(``s3://``), where a directory is a prefix.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dedup_cli.atomic_files import open_output, path_kind
from dedup_cli.errors import DedupError, UsageError
from dedup_cli.inputs.locations import STDIN, Source, display_name
from dedup_cli.objectstore.urls import absolute as absolute_path
from dedup_cli.objectstore.urls import is_url
from dedup_cli.version import __version__

MARKER = ".dedup-filter.json"
"""Written into a directory OUT: what made it (hidden, so ``sign`` and ``filter`` do not read it as a document)."""


@dataclass(frozen=True)
class Layout:
    """Where each source goes: ``out`` is one file (``single``) or a directory holding ``targets``."""

    out: str
    single: bool
    targets: tuple[str, ...]  # each source's path relative to a directory OUT ("" when ``single``)


def _inside(path: str, directory: str) -> bool:
    if is_url(path) or is_url(directory):
        return is_url(path) and is_url(directory) and (path == directory or path.startswith(directory + "/"))
    return os.path.commonpath([path, directory]) == directory


def _is_directory(path: str) -> bool:
    return path_kind(path) == "directory" if is_url(path) else os.path.isdir(path)


def _holds_files(directory: str) -> tuple[bool, bool]:
    """(whether ``directory`` holds anything, whether it holds :data:`MARKER`)."""
    if is_url(directory):
        from dedup_cli.objectstore import objects

        names = objects.names(directory)
        return bool(names) or objects.kind(directory) == "directory", MARKER in names
    return bool(os.listdir(directory)), os.path.isfile(os.path.join(directory, MARKER))


def _check_out(out: str, inputs: Sequence[str], sources: Sequence[Source], store: str, single: bool) -> None:
    absolute = absolute_path(out)
    shown = display_name(out)
    if _inside(absolute, absolute_path(store)):
        raise UsageError(f"the output {shown} is the store {display_name(store)} or inside it; choose another path")
    for name in inputs:
        if name != STDIN and _is_directory(name) and _inside(absolute, absolute_path(name)):
            raise UsageError(f"the output {shown} lies inside the input {display_name(name)}; write it elsewhere "
                             "(filter never writes into its inputs)")
    exists = path_kind(absolute) is not None if is_url(absolute) else os.path.lexists(absolute)
    for source in sources:
        if source.path == STDIN:
            continue
        if _inside(source.path, absolute) or (exists and not is_url(absolute) and not is_url(source.path)
                                              and os.path.exists(source.path)
                                              and os.path.samefile(source.path, absolute)):
            raise UsageError(f"the output {shown} is, or holds, the input {source.display}; write it elsewhere "
                             "(filter never modifies its inputs)")
    if not exists:
        return
    directory = _is_directory(absolute)
    if single and directory:
        raise DedupError(f"refusing to overwrite {shown}: it is a directory, and one input makes one file; "
                         "name a file")
    if not single and not directory:
        kind = path_kind(absolute) or "broken link"
        raise DedupError(f"refusing to overwrite {shown}: it is a {kind}, and these inputs make a directory; "
                         "name a new directory")
    holds, marked = (False, False) if single else _holds_files(absolute)
    if not single and holds and not marked:
        raise DedupError(f"refusing to overwrite {shown}: it is a directory that dedup filter did not write; "
                         "choose another path or remove it")


def plan_layout(inputs: Sequence[str], sources: Sequence[Source], out: str, store: str,
                files_from: str | None) -> Layout:
    """Where each of ``sources`` (found from ``inputs`` and ``files_from``) goes; checks OUT (see the module)."""
    single = files_from is None and len(inputs) == 1 and (inputs[0] == STDIN or not _is_directory(inputs[0]))
    if out == STDIN:
        if not single:
            raise UsageError("-o - (stdout) takes the output of one input file; name a directory for several")
        if sources and sources[0].format == "parquet":
            raise UsageError("Parquet cannot be written to stdout; name an output file")
        return Layout(out, True, ("",) * len(sources))
    if STDIN in inputs and not single:
        raise UsageError("stdin (-) is filtered only on its own, into one file; filter files separately")
    _check_out(out, inputs, sources, store, single)
    if single:
        return Layout(out, True, ("",) * len(sources))
    if any(is_url(source.path) for source in sources):  # inputs in object storage: keys, not OS paths
        import posixpath

        keys = [absolute_path(name).partition("://")[2] if _is_directory(name) else
                posixpath.dirname(absolute_path(name).partition("://")[2]) for name in inputs]
        keys += [posixpath.dirname(source.path.partition("://")[2]) for source in sources]
        root = posixpath.commonpath(keys)
        return Layout(out, False, tuple(posixpath.relpath(source.path.partition("://")[2], root)
                                        for source in sources))
    bases = [os.path.abspath(name) if os.path.isdir(name) else os.path.dirname(os.path.abspath(name))
             for name in inputs] + [os.path.dirname(source.path) for source in sources]
    base = os.path.commonpath(bases) if bases else os.getcwd()
    return Layout(out, False, tuple(os.path.relpath(source.path, base) for source in sources))


def write_marker(directory: Path | str, store: str, inputs: Sequence[str]) -> None:
    """Mark a directory OUT as ``filter``'s, so that a later run may replace it."""
    record = {"written_by": f"dedup {__version__} filter", "store": absolute_path(store),
              "inputs": [display_name(absolute_path(name)) if name != STDIN else name for name in inputs]}
    if is_url(directory):
        with open_output(f"{directory}/{MARKER}", binary=False) as stream:
            stream.write(json.dumps(record, indent=1) + "\n")
        return
    (Path(directory) / MARKER).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
