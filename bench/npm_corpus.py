"""Build a real, repetitive corpus: the README, CHANGELOG and LICENSE files of a few hundred npm packages at three
versions each.

Usage:

    python bench/npm_corpus.py [--out bench/data/npm] [--resolve] [--jobs 4]

What it is for: the exact checks of ``find`` on text as it is found in the wild, where one licence text (MIT, ISC,
Apache 2.0, BSD) repeats hundreds of times with a different copyright line, and a package's README and CHANGELOG
recur, a little changed, in each of its versions (bench/exact_checks.py measures on it).

The packages are :data:`PACKAGES` (widely used packages, named here once; no registry listing is read). Their
versions are pinned in ``bench/npm-specs.txt`` (``name@version``, one a line), so that two runs fetch the same
files; ``--resolve`` chooses them afresh: for each package, ``npm view NAME versions`` and three stable versions
spread over its history (the newest, and those a third and two thirds of the way along), written back to that
file. Each ``name@version`` is fetched with ``npm pack`` (the ordinary client, into ``OUT/tarballs/``), and the
top-level files of the package whose names start with README, CHANGELOG, HISTORY, LICENSE or LICENCE (any
extension, any case) are written to ``OUT/files/NAME@VERSION/FILE``; the tarballs are then deleted. The corpus is
git-ignored (under ``bench/data/``): only this script and the pinned versions are kept.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tarfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
SPECS = HERE / "npm-specs.txt"
KEPT = re.compile(r"^(readme|changelog|changes|history|license|licence)([.-].*)?$", re.IGNORECASE)
STABLE = re.compile(r"^\d+\.\d+\.\d+$")
VERSIONS_EACH = 3
PACKS_PER_CALL = 40

PACKAGES = """
semver ansi-styles debug minimatch strip-ansi chalk supports-color string-width ansi-regex ms lru-cache
brace-expansion tslib emoji-regex wrap-ansi type-fest commander glob color-name color-convert source-map
has-flag readable-stream picomatch ajv safe-buffer escape-string-regexp uuid yallist signal-exit react-is
is-fullwidth-code-point which p-limit json-schema-traverse find-up locate-path p-locate mime-db
eslint-visitor-keys minipass glob-parent iconv-lite string_decoder js-yaml isarray mime-types @babel/types
@babel/code-frame globals path-key yargs-parser ws resolve get-stream argparse @babel/parser yargs
pretty-format ignore undici-types acorn isexe cross-spawn postcss balanced-match resolve-from fs-extra
camelcase cliui @jridgewell/trace-mapping punycode @babel/helper-validator-identifier @babel/generator
is-stream entities agent-base estraverse strip-json-comments shebang-regex shebang-command json5
@babel/traverse webidl-conversions path-exists path-to-regexp whatwg-url https-proxy-agent onetime
@babel/core form-data tr46 @babel/template execa eslint-scope inherits convert-source-map rimraf
negotiator qs get-intrinsic @babel/helper-module-imports @babel/runtime statuses universalify fast-deep-equal
minimist picocolors @babel/helper-module-transforms chokidar @babel/compat-data @babel/helpers has-symbols
@jest/types @typescript-eslint/types @babel/helper-compilation-targets function-bind
npm-run-path js-tokens graceful-fs @babel/helper-string-parser is-number bytes @jridgewell/sourcemap-codec
readdirp mimic-fn slash @typescript-eslint/typescript-estree y18n browserslist kind-of
@typescript-eslint/visitor-keys yaml buffer cookie jsesc lodash braces fill-range @babel/helper-plugin-utils
hasown ini node-fetch escalade @jridgewell/gen-mapping human-signals mkdirp gopd http-errors micromatch
@typescript-eslint/scope-manager strip-bom es-object-atoms concat-map make-dir is-glob es-define-property
nanoid @smithy/util-utf8 es-errors to-regex-range @babel/helper-validator-option call-bind-apply-helpers
schema-utils update-browserslist-db path-scurry yocto-queue node-releases ci-info dunder-proto
math-intrinsics mime get-proto @jridgewell/resolve-uri has-tostringtag uri-js magic-string object-inspect
fast-glob dotenv pify zod @aws-sdk/types @typescript-eslint/utils @smithy/util-buffer-from http-proxy-agent
is-extglob strip-final-newline parse-json espree once source-map-support content-disposition jest-util
es-set-tostringtag is-wsl wrappy @sinclair/typebox safer-buffer normalize-path side-channel is-core-module
eslint cosmiconfig util-deprecate axios jsonfile ansi-escapes encodeurl jest-worker @smithy/is-array-buffer
depd jackspeak scheduler doctrine @smithy/types postcss-selector-parser flat-cache callsites react
delayed-stream @opentelemetry/core is-arrayish @typescript-eslint/parser asynckit require-from-string
combined-stream file-entry-cache source-map-js is-docker @jest/schemas object-assign eastasianwidth parse5
arg estree-walker fastq send get-caller-file finalhandler esprima import-fresh path-parse raw-body
range-parser optionator anymatch esutils type-check restore-cursor call-bound diff csstype write-file-atomic
setprototypeof path-type keyv supports-preserve-symlinks-flag async foreground-child on-finished levn
prelude-ls vary fast-json-stable-stringify globby cli-cursor @typescript-eslint/eslint-plugin slice-ansi
base64-js react-dom @nodelib/fs.stat merge-stream eventemitter3 detect-libc serve-static
lines-and-columns require-directory @typescript-eslint/type-utils rollup reusify tough-cookie sprintf-js
body-parser follow-redirects jiti imurmurhash hosted-git-info
json-parse-even-better-errors open is-plain-obj parent-module flatted @isaacs/cliui call-bind core-util-is
@nodelib/fs.walk @nodelib/fs.scandir esquery @eslint/eslintrc fast-levenshtein gensync type-is ieee754
accepts @eslint/js prettier side-channel-weakmap side-channel-map side-channel-list
istanbul-lib-instrument aria-query media-typer chownr ipaddr.js run-parallel which-typed-array express
cookie-signature pkg-dir esrecurse fdir
""".split()


def npm(*arguments: str, cwd: Path | None = None) -> str:
    """What ``npm ARGUMENTS`` prints on stdout (it must succeed)."""
    done = subprocess.run(["npm", *arguments], cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"npm {' '.join(arguments[:3])} …: {done.stderr.strip()[-400:]}")
    return done.stdout


def chosen_versions(name: str) -> list[str]:
    """Three stable versions of ``name`` spread over its history (fewer when it has fewer)."""
    versions = json.loads(npm("view", name, "versions", "--json"))
    versions = [versions] if isinstance(versions, str) else versions
    stable = [version for version in versions if STABLE.match(version)] or versions
    last = len(stable) - 1
    picks = sorted({round(last * step / VERSIONS_EACH) for step in range(1, VERSIONS_EACH + 1)})
    return [stable[index] for index in picks]


def resolve(jobs: int) -> list[str]:
    """``name@version`` of every package's chosen versions, in the order of :data:`PACKAGES`."""
    with ThreadPoolExecutor(jobs) as pool:
        found = list(pool.map(chosen_versions, PACKAGES))
    return [f"{name}@{version}" for name, versions in zip(PACKAGES, found, strict=True) for version in versions]


def extract(tarball: Path, target: Path) -> int:
    """The kept top-level files of one package tarball written under ``target``; how many."""
    kept = 0
    with tarfile.open(tarball) as archive:
        for member in archive.getmembers():
            parts = member.name.split("/")
            if member.isfile() and len(parts) == 2 and KEPT.match(parts[1]):
                handle = archive.extractfile(member)
                assert handle is not None
                target.mkdir(parents=True, exist_ok=True)
                (target / parts[1]).write_bytes(handle.read())
                kept += 1
    return kept


def fetch(specs: list[str], out: Path, jobs: int) -> int:
    """``npm pack`` every spec (in calls of :data:`PACKS_PER_CALL`, ``jobs`` at once) and keep their files."""
    tarballs = out / "tarballs"
    tarballs.mkdir(parents=True, exist_ok=True)
    calls = [specs[start:start + PACKS_PER_CALL] for start in range(0, len(specs), PACKS_PER_CALL)]

    def pack(batch: list[str]) -> list[dict[str, str]]:
        return json.loads(npm("pack", *batch, "--json", "--pack-destination", str(tarballs)))

    with ThreadPoolExecutor(jobs) as pool:
        packed = [entry for batch in pool.map(pack, calls) for entry in batch]
    kept = 0
    for entry in packed:
        kept += extract(tarballs / entry["filename"], out / "files" / f"{entry['name']}@{entry['version']}")
    shutil.rmtree(tarballs)
    return kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HERE / "data" / "npm")
    parser.add_argument("--resolve", action="store_true", help="choose the versions afresh (npm view)")
    parser.add_argument("--jobs", type=int, default=4, help="npm calls at once")
    arguments = parser.parse_args()
    if arguments.resolve or not SPECS.exists():
        specs = resolve(arguments.jobs)
        SPECS.write_text("".join(f"{spec}\n" for spec in specs))
    specs = SPECS.read_text().split()
    if (arguments.out / "files").exists():
        shutil.rmtree(arguments.out / "files")
    kept = fetch(specs, arguments.out, arguments.jobs)
    print(f"{kept} files of {len(specs)} package versions in {arguments.out / 'files'}", file=sys.stderr)


if __name__ == "__main__":
    main()
