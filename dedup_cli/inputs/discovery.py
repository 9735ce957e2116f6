"""Finding inputs: walking directories, the id root, ``--files-from`` lists, and the plan of what to read.

Inputs are files and directories, ``-`` (stdin) and the paths listed in a ``files_from`` file (newline- or
NUL-separated). Directories are walked recursively in sorted order; hidden entries (names starting with ``.``)
and symbolic links to directories are skipped, so a link to an ancestor cannot loop. ``auto`` chooses the
format by name: ``.jsonl``/``.ndjson`` → jsonl, ``.csv`` → csv, ``.tsv`` → tsv, ``.parquet`` → parquet, anything
else → text; stdin is JSON Lines when its first line is a JSON object, else text (:mod:`dedup_cli.inputs.stdin`).

Ids
    A file's id is its path relative to the id root (the store's, else the deepest directory holding every
    input), with ``/`` separators, so a store is the same wherever the corpus is mounted. A record's id is the
    value of ``id_field`` / ``id_column`` (a string, or an integer written in decimal); without one it is
    ``FILE:LINE`` (jsonl, lines; lines count from 1), ``FILE:N`` (csv, tsv; the N-th record after the header,
    from 1, however many lines its quoted fields span) or ``FILE:ROW`` (parquet; rows count from 0, as in Arrow
    and pandas), FILE being the file's id. Stdin is ``-`` (text) or ``-:LINE`` (records). Undecodable bytes
    of file names are written ``\\xNN``; the rare real name containing that text would collide, and the later
    document is then skipped as a duplicate id. The first document with an id is kept; later ones are skipped
    and reported with their location.
"""

from __future__ import annotations

import fnmatch
import heapq
import os
from collections.abc import Callable, Iterator, Sequence
from typing import BinaryIO, NamedTuple

from dedup_cli.errors import InputError, UsageError
from dedup_cli.inputs.locations import STDIN, STDIN_NAME, FileRun, Source, display_name
from dedup_cli.inputs.name_formats import format_and_compression, known_endings
from dedup_cli.inputs.report import ReadReport
from dedup_cli.inputs.store_folders import StoreDirectories, holds_a_store
from dedup_cli.objectstore.urls import is_url
from dedup_cli.options.checks import literal
from dedup_cli.options.input_options import InputOptions


class SourceFile(NamedTuple):
    """A file to read and the id its document will have."""

    id: str
    path: str
    status: os.stat_result | None = None  # known when listed (objects in object storage)


def _matches(relative: str, patterns: Sequence[str]) -> bool:
    name = relative.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatchcase(relative, p) or fnmatch.fnmatchcase(name, p) for p in patterns)


def _id_root(paths: Sequence[str], id_root: str | None) -> str:
    """The directory ids are relative to: ``id_root`` when given (every path must lie under it), else the
    deepest directory holding every path.

    A store keeps the root of its first run, so a document keeps its id whichever other inputs a later run
    names; an input outside that root could only get an id that depends on the inputs, so it is refused.
    """
    if id_root is None:
        return os.path.commonpath([p if os.path.isdir(p) else os.path.dirname(p) for p in paths])
    root = os.path.abspath(id_root)
    for path in paths:
        if os.path.commonpath([root, path]) != root:
            raise UsageError(
                f"input {display_name(path)} lies outside {display_name(root)}, the directory the store's ids are "
                "relative to; sign it into another store, or name inputs under that directory"
            )
    return root


Found = tuple[str, str, str]
"""A file found: (its id, the displayed path relative to the id root; that path as the OS spells it; its path)."""

WALK_FILES = 1024
"""Files of one directory found, stated and handed on together: the walk's work per file is a few list
operations on such batches, and the first tasks can start before a large directory is all stated."""


class FoundFiles(NamedTuple):
    """Files found one after another, in id order: their ids (the displayed paths relative to the id root), those
    paths as the OS spells them, their paths, and ``os.stat`` of each when listed (objects in object storage)."""

    ids: list[str]
    relatives: list[str]
    paths: list[str]
    statuses: list[os.stat_result | None] | None = None


def _kind(entry: os.DirEntry[str]) -> str | None:
    """"d" for a directory to walk, "f" for a file, None for what the walk skips (hidden entries, links to
    directories: a link to a directory is not followed, so links cannot loop)."""
    if entry.name[0] == ".":
        return None
    try:
        if not entry.is_dir():  # from the listing's entry type: no system call on most file systems
            return "f"
    except OSError:
        return "f"
    return None if entry.is_symlink() else "d"


def _aside(entries: list[os.DirEntry[str]], entry: os.DirEntry[str]) -> bool:
    entries.append(entry)
    return False


def _listed(directory: str) -> tuple[list[str], list[str]]:
    """(the names of the files, of the directories to walk) in ``directory``, as :func:`_kind` sorts them: in one
    pass over its listing that keeps only the names and the few directories' entries, each other entry (a name and
    a path) dropped as soon as it is read, with a method call or two per entry rather than a function call (holding
    every entry first took a third more time: 47 ms against 36 ms for 10^5 files, most of it faulting in the memory
    of 10^5 names and paths at once). Raises OSError when the directory cannot be read."""
    directories: list[os.DirEntry[str]] = []
    try:
        with os.scandir(directory) as listing:
            # is_dir: from the listing's entry type, mostly; a directory's entry is kept aside
            names = [entry.name for entry in listing if not entry.is_dir() or _aside(directories, entry)]
    except OSError:  # maybe an entry of unknown type whose stat failed (a file, as _kind says): once more, slowly
        with os.scandir(directory) as listing:
            kinds = [(entry.name, _kind(entry)) for entry in listing]
        return ([name for name, kind in kinds if kind == "f"], [name for name, kind in kinds if kind == "d"])
    if "\0." in "\0" + "\0".join(names):  # a hidden file
        names = [name for name in names if name[0] != "."]
    subdirectories = [entry.name for entry in directories if entry.name[0] != "." and not entry.is_symlink()]
    return names, subdirectories


def _displayable(names: list[str]) -> bool:
    """Whether every name is its own displayed name (valid UTF-8): one encoding of them all."""
    try:
        "".join(names).encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _sorted_tree(directory: str, prefix: str, wanted: Callable[[str], bool] | None,
                 unreadable: Callable[[OSError], None], left_out: Callable[[str], None]) -> Iterator[FoundFiles]:
    """The files under ``directory`` (``prefix``: its own relative path and ``/``), in id order, one directory
    listing at a time, in batches of at most :data:`WALK_FILES`: a directory's entries are sorted with a ``/``
    after each subdirectory's name, so its files come exactly where sorting all the relative paths would put them,
    and the walk yields the first files before it has listed the rest. ``wanted`` (None: every file) filters the
    files by their displayed relative path; a directory that is a dedup store is told to ``left_out`` instead of
    walked (:mod:`dedup_cli.inputs.store_folders`)."""
    try:
        names, subdirectories = _listed(directory)
    except OSError as error:
        unreadable(error)
        return
    if holds_a_store(names):
        left_out(directory)
        return
    base = directory if directory.endswith("/") else directory + "/"
    shown_prefix = display_name(prefix)
    if not subdirectories and _displayable(names):  # the usual directory: its files, sorted by name
        names.sort()
        yield from _batches(names, prefix, shown_prefix, base, wanted, displayable=True)
        return
    children = sorted([(display_name(prefix + name), prefix + name, name, False) for name in names]
                      + [(display_name(prefix + name + "/"), prefix + name + "/", name, True)
                         for name in subdirectories])
    files: list[str] = []
    for _, relative, name, is_directory in children:
        if not is_directory:
            files.append(name)
            continue
        yield from _batches(files, prefix, shown_prefix, base, wanted)
        files = []
        yield from _sorted_tree(base + name, relative, wanted, unreadable, left_out)
    yield from _batches(files, prefix, shown_prefix, base, wanted)


def _batches(names: list[str], prefix: str, shown_prefix: str, base: str, wanted: Callable[[str], bool] | None,
             displayable: bool = False) -> Iterator[FoundFiles]:
    """The files ``names`` of one directory (in order) as batches of at most :data:`WALK_FILES`, filtered;
    ``displayable``: every name is known to be its own displayed name."""
    for start in range(0, len(names), WALK_FILES):
        batch = names[start:start + WALK_FILES]
        relatives = [prefix + name for name in batch] if prefix else batch
        shown = relatives if shown_prefix == prefix and (displayable or _displayable(batch)) else [
            display_name(relative) for relative in relatives]
        if wanted is not None:
            kept = [position for position, name in enumerate(shown) if wanted(name)]
            if len(kept) < len(batch):
                batch, relatives, shown = ([items[position] for position in kept]
                                           for items in (batch, relatives, shown))
        if batch:
            yield FoundFiles(shown, relatives, [base + name for name in batch])


def walk_files(named: Sequence[str], listed: Sequence[str], include: Sequence[str], exclude: Sequence[str],
               report: ReadReport, id_root: str | None = None) -> Iterator[SourceFile]:
    """Files under ``named`` and ``listed`` paths, in id order, found as the iterator is consumed: those of
    :func:`walk_file_batches`, one at a time."""
    return (SourceFile(identifier, path, status) for batch in walk_file_batches(named, listed, include, exclude,
                                                                                 report, id_root)
            for identifier, path, status in zip(batch.ids, batch.paths, batch.statuses or [None] * len(batch.ids),
                                                strict=True))


def walk_file_batches(named: Sequence[str], listed: Sequence[str], include: Sequence[str], exclude: Sequence[str],
                      report: ReadReport, id_root: str | None = None) -> Iterator[FoundFiles]:
    """Files under ``named`` and ``listed`` paths, in id order, in batches, found as the iterator is consumed
    (``s3://`` URLs: the objects under them, listed now, :func:`dedup_cli.inputs.remote.find_objects`).

    ``include``/``exclude`` are glob patterns matched against the path relative to the id root or the file
    name; they filter the files found in directories and the listed ones (a file named itself is always read).

    Checked now, before the first file: a named path that does not exist stops the run; a listed one is
    reported unreadable and skipped, since a list made by ``find`` may name a file deleted since. Ids are
    relative to :func:`_id_root`, which is recorded in ``report.id_root``.
    """
    if any(is_url(name) for name in [*named, *listed]):
        from dedup_cli.inputs.remote import find_objects

        objects = find_objects(named, listed, include, exclude, report, id_root, _matches)
        return iter([FoundFiles([display_name(relative) for relative, _, _ in objects],
                                [relative for relative, _, _ in objects], [url for _, url, _ in objects],
                                [status for _, _, status in objects])] if objects else [])
    named_absolute = []
    for name in named:
        if not os.path.lexists(name):
            raise InputError(f"input {display_name(name)} does not exist; check the path")
        named_absolute.append(os.path.abspath(name))
    listed_absolute = []
    for name in listed:
        if os.path.lexists(name):
            listed_absolute.append(os.path.abspath(name))
        else:
            report.note("unreadable", (display_name(name), "does not exist (listed in --files-from)"))
    everything = named_absolute + listed_absolute
    if not everything:
        return iter(())
    root = _id_root(everything, id_root)
    report.id_root = root

    def record_unreadable(error: OSError) -> None:
        report.note("unreadable", (display_name(str(error.filename)), error.strerror or str(error)))

    def wanted(relative: str) -> bool:
        return not (include and not _matches(relative, include)) and not (exclude and _matches(relative, exclude))

    def left_out(store: str) -> None:
        report.leave_out_store(display_name(store))

    single: list[Found] = []  # files named or listed themselves
    trees = []
    stores = StoreDirectories()
    for path, always in [(p, True) for p in named_absolute] + [(p, False) for p in listed_absolute]:
        if os.path.isdir(path):
            base = os.path.relpath(path, root).replace(os.sep, "/")
            trees.append(_noting_empty(_sorted_tree(path, "" if base == "." else base + "/", wanted if include or
                                                    exclude else None, record_unreadable, left_out), path, report))
            continue
        store = stores.holds(path)
        if store is not None:  # a file of a store, named or listed by itself
            left_out(store)
            continue
        relative = os.path.relpath(path, root).replace(os.sep, "/")
        if always or wanted(display_name(relative)):
            single.append((display_name(relative), relative, path))
    single.sort()
    if not single and len(trees) == 1:
        return trees[0]  # one directory: its relative paths are distinct, and its batches already in order
    return _batched(_distinct(heapq.merge(iter(single), *(_each(tree) for tree in trees))))


def _noting_empty(tree: Iterator[FoundFiles], directory: str, report: ReadReport) -> Iterator[FoundFiles]:
    """The batches of ``tree``; the directory is noted as an empty input if it gave no file to read."""
    found = 0
    for batch in tree:
        found += len(batch.ids)
        yield batch
    if not found:
        report.note("empty_inputs", (display_name(directory), "holds no file to read"))


def _each(batches: Iterator[FoundFiles]) -> Iterator[Found]:
    for batch in batches:
        yield from zip(batch.ids, batch.relatives, batch.paths, strict=True)


def _distinct(files: Iterator[Found]) -> Iterator[Found]:
    """One file per relative path (a file named and also found in a named directory is read once); ids are the
    displayed names: two OS names may display alike, and the later one is then a duplicate id."""
    previous = None
    for found in files:
        if found[1] != previous:
            yield found
        previous = found[1]


def _batched(files: Iterator[Found]) -> Iterator[FoundFiles]:
    batch: list[Found] = []
    for found in files:
        batch.append(found)
        if len(batch) >= WALK_FILES:
            yield FoundFiles(*(list(column) for column in zip(*batch, strict=True)))
            batch = []
    if batch:
        yield FoundFiles(*(list(column) for column in zip(*batch, strict=True)))


def read_file_list(files_from: str, null_separated: bool, stdin: BinaryIO) -> list[str]:
    """The paths listed in ``files_from`` (``-``: stdin), decoded like file names (surrogateescape)."""
    try:
        if files_from == STDIN:
            data = stdin.read()
        else:
            with open(files_from, "rb") as handle:
                data = handle.read()
    except OSError as error:
        raise InputError(f"cannot read {{files_from}} {literal(display_name(files_from))}: "
                         f"{literal(error.strerror or error)}", options=True) from error
    if null_separated:
        entries = data.split(b"\0")
    else:
        entries = [line[:-1] if line.endswith(b"\r") else line for line in data.split(b"\n")]
    return [os.fsdecode(entry) for entry in entries if entry]


def walk_sources(inputs: Sequence[str], options: InputOptions, report: ReadReport,
                 stdin: BinaryIO) -> Iterator[Source]:
    """Check the inputs now, and give what to read in order (stdin first, then files by id) as the walk finds it.

    Raised now: no input, stdin named twice or holding the file list, Parquet on stdin, an unreadable
    ``files_from``, a named input that does not exist, an input outside the id root. Raised when the walk reaches
    it: a Parquet file without a named column (:func:`dedup_cli.inputs.parquet_inputs.check_columns`). Once the walk
    has ended, ``report.files_found`` and ``report.input_bytes`` (None when stdin is read) are set.
    """
    return _sources(walk_runs(inputs, options, report, stdin), report)


def walk_runs(inputs: Sequence[str], options: InputOptions, report: ReadReport, stdin: BinaryIO
              ) -> Iterator[Source | FileRun]:
    """:func:`walk_sources`, with the whole text files found one after another in a directory given together as
    a :class:`FileRun` rather than a :class:`Source` each (what the local engine's planning takes)."""
    named = list(inputs)
    if not named and options.files_from is None:
        raise InputError("no input given; name files or directories, - for stdin, or {files_from} FILE", options=True)
    if named.count(STDIN) > 1:
        raise UsageError("- (stdin) is named more than once; name it once")
    reads_stdin = STDIN in named
    if reads_stdin and options.files_from == STDIN:
        raise UsageError("stdin cannot hold both documents (-) and the {files_from} list; put the list in a file",
                         options=True)
    stdin_format = "text" if options.input_format == "auto" else options.input_format
    if reads_stdin and stdin_format == "parquet":
        raise UsageError("Parquet cannot be read from stdin (it needs a seekable file); save it to a file first")
    listed = read_file_list(options.files_from, options.null_separated, stdin) if options.files_from else []
    files = walk_file_batches([n for n in named if n != STDIN], listed, options.include, options.exclude, report,
                              options.id_root)
    first = [Source(STDIN, STDIN, STDIN_NAME, stdin_format, None)] if reads_stdin else []
    return _runs(first, files, options, report)


def _status(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None  # reported when it is read


def stat_run(run: FileRun, report: ReadReport, every: int = 1) -> FileRun:
    """``run`` with the ``stat`` of its files and their sizes (a run stated when listed is returned as it is),
    their sizes added to ``report.input_bytes`` (unless stdin is read).

    ``every`` > 1 states only every ``every``-th file (from the first) and gives each file the mean size of
    those, its status None: what the planning of a run that compares no file with a store needs (sizes to cut
    tasks, and a total for the progress, about right), for a ``stat`` in ``every`` of the files' (2 µs each).
    The workers state the files they read themselves, so what is stored and reported does not depend on it.
    """
    if run.statuses is not None and run.sizes is not None:
        return run
    statuses: list[os.stat_result | None]
    if every <= 1:
        statuses = [_status(path) for path in run.paths]
        sizes = [0 if status is None else status.st_size for status in statuses]
        total = sum(sizes)
    else:
        sampled = [status.st_size for status in map(_status, run.paths[::every]) if status is not None]
        mean = sum(sampled) // len(sampled) if sampled else 0
        statuses, sizes = [None] * len(run.paths), [mean] * len(run.paths)
        total = mean * len(run.paths)
    if report.input_bytes is not None:
        report.input_bytes += total
    return FileRun(run.ids, run.paths, statuses, sizes)


def _runs(first: list[Source], batches: Iterator[FoundFiles], options: InputOptions, report: ReadReport
          ) -> Iterator[Source | FileRun]:
    """``first`` (stdin), then the files of each batch: the whole text files among them as :class:`FileRun` s,
    not stated (their consumer states them, :func:`stat_run`, and adds their sizes to ``report.input_bytes``)
    unless listed with their status, the others (line files, Parquet) a :class:`Source` each, stated here; the
    count of files at the end."""
    yield from first
    count = len(first)
    report.input_bytes = None if first else 0
    fixed = None if options.input_format == "auto" else options.input_format
    for batch in batches:
        ids, paths, statuses = batch.ids, batch.paths, batch.statuses
        count += len(paths)
        if fixed is None:  # a name tells its format only when it ends like one
            others = [position for position in known_endings(batch.relatives)  # the paths' endings, shorter
                      if format_and_compression(paths[position])[0] != "text"]
        else:
            others = [] if fixed == "text" else list(range(len(paths)))
        if len(others) < len(paths):  # whole text files (the walk's counts tell which options apply)
            report.formats["text"] = report.formats.get("text", 0) + len(paths) - len(others)
        start = 0
        for position in [*others, len(paths)]:
            if position > start:
                if statuses is None and start == 0 and position == len(paths):  # the whole batch: no copy
                    yield FileRun(ids, paths, None, None)
                elif statuses is None:
                    yield FileRun(ids[start:position], paths[start:position], None, None)
                else:  # listed with their status (objects in object storage)
                    sizes = [0 if status is None else status.st_size for status in statuses[start:position]]
                    if report.input_bytes is not None:
                        report.input_bytes += sum(sizes)
                    yield FileRun(ids[start:position], paths[start:position], statuses[start:position], sizes)
            if position < len(paths):
                path = paths[position]
                status = statuses[position] if statuses is not None else _status(path)
                size = 0 if status is None else status.st_size
                file_format, file_compression = format_and_compression(path)
                source = Source(ids[position], path, display_name(path), fixed or file_format, file_compression,
                                size, status)
                if source.format == "parquet" and source.compression is None and _parquet_store(source, options):
                    report.leave_out_store(source.display)  # a single-file store
                    count -= 1
                    start = position + 1
                    continue
                if report.input_bytes is not None:
                    report.input_bytes += size
                report.formats[source.format] = report.formats.get(source.format, 0) + 1
                yield source
            start = position + 1
    report.files_found += count


def _parquet_store(source: Source, options: InputOptions) -> bool:
    """Whether a Parquet file is a single-file store; stops the run when it lacks a named column."""
    from dedup_cli.inputs.parquet_inputs import check_parquet  # only with Parquet inputs: text starts without pyarrow

    return check_parquet(source, options)


def _sources(walked: Iterator[Source | FileRun], report: ReadReport | None = None) -> Iterator[Source]:
    """A :class:`Source` per file of ``walked``, each stated (its size added to ``report.input_bytes``)."""
    for item in walked:
        if isinstance(item, Source):
            yield item
            continue
        item = stat_run(item, report if report is not None else ReadReport())
        assert item.statuses is not None and item.sizes is not None
        for identifier, path, status, size in zip(item.ids, item.paths, item.statuses, item.sizes, strict=True):
            yield Source(identifier, path, display_name(path), "text", format_and_compression(path)[1], size, status)


def plan_sources(inputs: Sequence[str], options: InputOptions, report: ReadReport,
                 stdin: BinaryIO) -> list[Source]:
    """Check the inputs and list what to read, in order (stdin first, then files by id): :func:`walk_sources`
    to its end, so that a Parquet file without a named column stops the run before any work."""
    return list(walk_sources(inputs, options, report, stdin))
