"""The architecture, read from the source with ``ast``: every module in a layer, imports only downward.

documents → shingles → signatures → candidates → estimates → groups: data flows forward only, only the CLI
knows about click and tqdm, only the store, the input readers and the Parquet writer know about pyarrow, and the
public API is resolved lazily so that the CLI starts without numpy (docs/architecture.md). That document is checked
too: its folder table names every package and nothing else, its layer table is LAYERS, and every file, folder and
module (or name in one) it mentions exists.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import os
import re
import subprocess
import sys
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


# --- the layers --------------------------------------------------------------------------------------------

# Every module of the package, in layers: a module may import only modules of lower layers (so there is no
# cycle, and no lazy import can hide one: imports inside functions count too). A layer is a tier (the data
# flow documents → shingles → signatures → candidates → estimates → groups, then what runs and shows it) and a
# step inside the tier, for modules of one package that build on each other. docs/architecture.md explains it.
LAYERS: list[tuple[str, list[list[str]]]] = [
    ("foundations: nothing of dedup but each other", [
        ["errors", "version", "array_primitives", "processes", "objectstore.urls", "candidates", "api", "corpus",
         "engine", "engine.dask", "engine.local", "engine.stages", "estimates", "evaluation", "groups", "inputs",
         "kernel", "minhash", "store", "text", "cli", "options", "objectstore"],
        ["objectstore.objects", "forked"], ["objectstore.object_streams"], ["atomic_files"],
    ]),
    ("options and parameters, standard library only (what the CLI imports)", [
        ["candidates.triple_recall"], ["options.vocabulary"], ["options.checks"],
        ["options.input_options", "options.engine_choice"],
        ["options.signing", "options.finding", "options.planning"],
        ["options.filtering", "options.evaluating", "options.reviewing"],
        ["params"],
    ]),
    ("text: documents → shingles, and the words two texts differ by", [
        ["text.normalise"], ["text.scripts"], ["text.tokens"], ["text.shingles", "text.word_diff"],
    ]),
    ("minhash: shingles → signatures", [
        ["minhash.feistel", "minhash.packing", "minhash.kperm"], ["minhash.oph", "minhash.universe"],
    ]),
    ("kernel: the signing hot path compiled (numba), and when to use it", [
        ["kernel.tables", "kernel.primitives", "kernel.cache"], ["kernel.sketch", "kernel.tokenise"],
        ["kernel.compiled"], ["kernel.choice", "kernel.background"],
    ]),
    ("estimates: the estimators, and scoring pairs and triples with them", [
        ["estimates.guards", "estimates.exact"], ["estimates.two_way", "estimates.three_way", "estimates.densified"],
        ["estimates.half_bit"], ["estimates.dense", "estimates.intervals"],
        ["estimates.pairs", "estimates.triple_scores", "estimates.simultaneous"],
    ]),
    ("candidates: signatures → candidate pairs and triples", [
        ["candidates.banding", "candidates.buckets", "candidates.triangles", "candidates.allpairs",
         "candidates.match_bounds", "candidates.elias_fano"],
        ["candidates.candidate_triples", "candidates.crossing", "candidates.recall_costs"],
        ["candidates.crossing_rounds"],
    ]),
    ("groups: accepted pairs → groups", [
        ["groups.components", "groups.selection", "groups.star_contraction"],
        ["groups.strict", "groups.representatives", "groups.witnesses"],
    ]),
    ("inputs: reading and re-reading documents", [
        ["inputs.locations", "inputs.records", "inputs.report", "inputs.truth", "inputs.store_folders"],
        ["inputs.decoding", "inputs.columns"],
        ["inputs.byte_streams", "inputs.blocks", "inputs.record_ends"],
        ["inputs.parquet_inputs", "inputs.chunks", "inputs.remote", "inputs.name_formats",
         "inputs.json_arrays"], ["inputs.delimited", "inputs.stdin"],
        ["inputs.discovery", "inputs.reread"],
        ["inputs.sets", "inputs.fields", "inputs.members"], ["inputs.files"], ["inputs.tasks"],
        ["inputs.task_planning"], ["inputs.reading", "inputs.skips"], ["inputs.liveness"],
    ]),
    ("store: the Parquet signature store", [
        ["store.format", "store.places", "store.names"],
        ["store.parts", "store.lock", "store.legacy", "store.manifest"],
        ["store.leases", "store.snapshot", "store.document_index"],
        ["store.compaction", "store.memory", "store.numbering", "store.worker_parts"], ["store.runs"], ["store.store"],
        ["store.store_pieces", "store.documents", "store.checkpoints", "store.document_sizes"],
    ]),
    ("verification and evaluation: exact checks of pairs, and what a sample of them says of a run", [
        ["verification"], ["evaluation.survey", "evaluation.design"], ["evaluation.accuracy", "evaluation.retrieval"],
        ["evaluation.recall_curves"],
    ]),
    ("corpus: the kept records of each input, written in its own format", [
        ["corpus.record_decisions", "corpus.writers", "corpus.layout"], ["corpus.lines"],
        ["corpus.parquet_filter", "corpus.table_filter", "corpus.array_filter"],
        ["corpus.sources"], ["corpus.filter_pieces"],
    ]),
    ("engines: the stages of sign and find, the local engine that runs them, and the Dask engine", [
        ["engine.stages.record_places"],
        ["engine.stages.plan", "engine.stages.decisions", "engine.resume", "engine.local.task_board",
         "engine.local.task_rows", "engine.stages.group_members"],
        ["engine.stages.sign", "engine.stages.find", "engine.stages.results", "engine.optional_engines",
         "engine.progress", "engine.find_memory"],
        ["engine.stages.conclude", "engine.local.key_spill"],
        ["engine.local.band_rounds"],
        ["engine.find_driver", "engine.local.sign_workers", "engine.stages.filter", "engine.local.evaluation",
         "engine.dask.table_kinds"],
        ["engine.local.find", "engine.local.sign", "engine.dask.cluster", "engine.dask.exchange"],
        ["engine.dask.ranges", "engine.dask.kept_parts", "engine.dask.star_components", "engine.dask.joins"],
        ["engine.dask.shares", "engine.dask.id_sort", "engine.dask.sorted_output"],
        ["engine.dask.candidates", "engine.dask.pair_decisions", "engine.dask.end_gathered"],
        ["engine.dask.end_on_workers"],
        ["engine.dask.find", "engine.dask.sign", "engine.dask.filter"], ["engine.engines"],
    ]),
    ("api: one module per command of the public API", [
        ["api.sign", "api.find", "api.plan", "api.info", "api.eval", "api.texts", "api.plot", "api.review_groups",
         "api.review_charts"],
        ["api.estimate", "api.filter", "api.review_texts"], ["api.review_page"], ["api.review"],
    ]),
    ("the public API", [["__init__"]]),
    ("cli: the command line, and how it words and writes what the API returns", [
        ["cli.record_writers", "cli.removed", "cli.eval_report", "cli.plan_report", "cli.summaries",
         "cli.pandas_hidden", "cli.blas_threads", "cli.store_option"],
        ["cli.common"],
        ["cli.sign", "cli.find", "cli.filter", "cli.estimate", "cli.eval", "cli.plan", "cli.info", "cli.review"],
        ["cli.main"], ["__main__"],
    ]),
]
LAYER = {module: (tier, step) for tier, (_, steps) in enumerate(LAYERS) for step, modules in enumerate(steps)
         for module in modules}

# Third-party libraries and the modules (or packages, ending in ".") allowed to import them.
CONFINED = {
    "click": {"cli."},
    "tqdm": {"cli."},
    # The store, the input readers (Parquet text columns), the Parquet writers of filter and of find --format parquet,
    # and FindResult.to_arrow (engine.stages.results, lazily).
    "pyarrow": {"store.", "inputs.", "corpus.", "cli.record_writers", "engine.stages.results"},
    # The compiled kernel (the fast extra); kernel.choice and kernel.tables decide and prepare without it.
    "numba": {"kernel.primitives", "kernel.sketch", "kernel.tokenise", "kernel.compiled"},
    # eval's pictures, an optional extra.
    "matplotlib": {"api.plot"},
    # The optional Dask engine (the ``dask`` extra); nothing uses pandas.
    "dask": {"engine.dask."},
    "distributed": {"engine.dask."},
    "pandas": set(),
    # Object storage (the ``s3`` extra): one client, behind one module.
    "s3fs": {"objectstore.objects"},
    "fsspec": {"objectstore.objects", "objectstore.object_streams"},
    "botocore": {"objectstore.objects"},
    "aiobotocore": {"objectstore.objects"},
}


def _layer_name(module: str) -> str:
    tier, step = LAYER[module]
    return f"{LAYERS[tier][0].split(':')[0]} (layer {tier}.{step})"


def test_every_module_has_exactly_one_layer() -> None:
    listed = [module for _, steps in LAYERS for modules in steps for module in modules]
    assert len(listed) == len(set(listed)), "a module is listed twice"
    modules = set(_package_modules(PACKAGE_DIR))
    assert modules - set(listed) == set(), "modules without a layer: add them to LAYERS"
    assert set(listed) - modules == set(), "LAYERS lists modules that do not exist"


def test_imports_go_only_to_lower_layers() -> None:
    offenders = []
    for item in IMPORTS:
        if not item.target.startswith(PACKAGE + "."):
            continue
        target = item.target[len(PACKAGE) + 1 :]
        if LAYER[target] >= LAYER[item.module]:
            offenders.append(f"{item} ({_layer_name(item.module)} → {_layer_name(target)})")
    assert not offenders, "imports of the same or a higher layer: " + "; ".join(offenders)


@pytest.mark.parametrize("library", sorted(CONFINED))
def test_third_party_libraries_stay_in_their_modules(library: str) -> None:
    allowed = CONFINED[library]

    def permitted(module: str) -> bool:
        return module in allowed or any(prefix.endswith(".") and module.startswith(prefix) for prefix in allowed)

    offenders = [item for module, items in _importers(library).items() if not permitted(module) for item in items]
    assert not offenders, f"only {', '.join(sorted(allowed))} may import {library}: {_violations(offenders)}"


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("text.", {"candidates.", "estimates.", "groups.", "engine.", "api.", "cli."}),
        ("candidates.", {"estimates.pairs", "estimates.triple_scores", "groups.", "engine.", "api.", "cli."}),
    ],
)
def test_data_flows_one_way(package: str, forbidden: set[str]) -> None:
    modules = [module for module in _package_modules(PACKAGE_DIR) if module.startswith(package)]
    assert modules
    offenders = [
        item for module in modules for item in _imports_of(module)
        if any(item.target == f"{PACKAGE}.{name}" or (name.endswith(".") and item.target.startswith(
            f"{PACKAGE}.{name}")) for name in forbidden)
    ]
    assert not offenders, f"{package} is upstream of {', '.join(sorted(forbidden))}: {_violations(offenders)}"


def test_estimators_stand_alone() -> None:
    # The formulas of the papers (2-way, b = 1/2, 3-way, dense, densified bins, intervals, exact) need nothing but numpy
    # and each other.
    formulas = {"estimates.guards", "estimates.exact", "estimates.two_way", "estimates.three_way",
                "estimates.half_bit", "estimates.dense", "estimates.intervals", "estimates.densified"}
    offenders = [
        item
        for module in formulas
        for item in _imports_of(module)
        if item.target.startswith(PACKAGE + ".") and item.target[len(PACKAGE) + 1 :] not in formulas
    ]
    assert not offenders, f"the estimator formulas may import only each other: {_violations(offenders)}"


def engine_crossings(imports: list[Import]) -> dict[str, list[Import]]:
    """The imports that break the engines' side-by-side rule, by rule: a shared stage (``engine.stages``) importing
    an engine, an engine importing the other, and the API reaching into an engine rather than through the
    ``Engine`` interface (``engine.engines``)."""
    engines = (f"{PACKAGE}.engine.local", f"{PACKAGE}.engine.dask")

    def into(item: Import, *targets: str) -> bool:
        return any(item.target == target or item.target.startswith(target + ".") for target in targets)

    return {
        "a shared stage imports an engine": [item for item in imports if item.module.startswith("engine.stages.")
                                             and into(item, *engines)],
        "the Dask engine imports the local one": [item for item in imports if item.module.startswith("engine.dask.")
                                                  and into(item, engines[0])],
        "the local engine imports the Dask one": [item for item in imports if item.module.startswith("engine.local.")
                                                  and into(item, engines[1])],
        "the API goes around the Engine interface": [item for item in imports if item.module.startswith("api.")
                                                     and into(item, *engines)],
    }


def test_the_engines_stand_side_by_side() -> None:
    # The shared stages import neither engine, neither engine imports the other, and the commands reach an engine
    # only through engine.engines (docs/architecture.md, "Engines").
    broken = {rule: _violations(items) for rule, items in engine_crossings(IMPORTS).items() if items}
    assert not broken, broken


def test_the_commands_reach_the_engines_through_one_interface() -> None:
    # sign, find, filter and eval choose an engine with engine.engines.engine_for and call it, and so does find of
    # texts in memory; no command repeats an engine's orchestration.
    for command in ("api.sign", "api.find", "api.filter", "api.eval", "api.texts"):
        assert f"{PACKAGE}.engine.engines" in {item.target for item in _imports_of(command)}, command


def test_engine_crossings_are_found() -> None:
    # What the code held before the engines stood side by side: each rule catches its own crossing.
    found = engine_crossings([Import("engine.stages.find", f"{PACKAGE}.engine.local.forked", 27),
                              Import("engine.dask.find", f"{PACKAGE}.engine.local.find", 36),
                              Import("engine.local.find", f"{PACKAGE}.engine.dask.ranges", 1),
                              Import("api.eval", f"{PACKAGE}.engine.local.evaluation", 18),
                              Import("api.find", f"{PACKAGE}.engine.engines", 17),
                              Import("engine.dask.find", f"{PACKAGE}.engine.stages.plan", 40)])
    assert {rule: [item.line for item in items] for rule, items in found.items()} == {
        "a shared stage imports an engine": [27], "the Dask engine imports the local one": [36],
        "the local engine imports the Dask one": [1], "the API goes around the Engine interface": [18]}


def test_nothing_imports_the_cli_but_main() -> None:
    # The library never reaches up into the command line: only the CLI's own modules and __main__ import it.
    offenders = [
        item for module, items in _importers(f"{PACKAGE}.cli").items()
        if module != "__main__" and not module.startswith("cli.") for item in items
    ]
    assert not offenders, f"only __main__ may import the CLI: {_violations(offenders)}"


def test_package_files_hold_only_a_docstring() -> None:
    for name, path in _package_modules(PACKAGE_DIR).items():
        if path.name == "__init__.py" and name != "__init__":
            body = ast.parse(path.read_text(encoding="utf-8")).body
            assert len(body) == 1 and isinstance(body[0], ast.Expr), f"{path} should hold only its docstring"


# Modules allowed above MAX_LINES, and why.
LONG_MODULES: dict[str, str] = {}
MAX_LINES = 500


def test_no_module_is_over_the_size_limit() -> None:
    long = {name: len(path.read_text(encoding="utf-8").splitlines())
            for name, path in _package_modules(PACKAGE_DIR).items()}
    offenders = {name: lines for name, lines in long.items() if lines > MAX_LINES and name not in LONG_MODULES}
    assert not offenders, f"modules over {MAX_LINES} lines: {offenders}"


# Functions allowed above MAX_FUNCTION_LINES: the compiled kernel's, one loop each that numba compiles whole (a
# call out of it costs per document).
LONG_FUNCTION_MODULES = {"kernel.compiled"}
MAX_FUNCTION_LINES = 80


def function_lengths(source: str) -> dict[str, int]:
    """Each function's (and method's) lines, from its ``def`` to its last line, less its docstring."""
    lengths = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            first = node.body[0]
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                lines -= (first.end_lineno or first.lineno) - first.lineno + 1
            lengths[f"{node.name}:{node.lineno}"] = lines
    return lengths


def test_no_function_is_over_the_size_limit() -> None:
    offenders = {f"{name}.{function}": lines for name, path in _package_modules(PACKAGE_DIR).items()
                 if name not in LONG_FUNCTION_MODULES
                 for function, lines in function_lengths(path.read_text(encoding="utf-8")).items()
                 if lines > MAX_FUNCTION_LINES}
    assert not offenders, f"functions over {MAX_FUNCTION_LINES} lines (split them): {offenders}"


def blank_runs(source: str, longest: int = 2) -> list[int]:
    """The lines (from 1) at which a run of more than ``longest`` blank lines reaches its ``longest + 1``-th."""
    found, run = [], 0
    for number, line in enumerate(source.splitlines(), start=1):
        run = run + 1 if not line.strip() else 0
        if run == longest + 1:
            found.append(number)
    return found


def test_no_runs_of_blank_lines() -> None:
    # Two blank lines part top-level definitions; three or more in a row are left over from code taken out.
    offenders = {name: lines for name, path in _package_modules(PACKAGE_DIR).items()
                 if (lines := blank_runs(path.read_text(encoding="utf-8")))}
    assert not offenders, f"runs of three or more blank lines (module: the line of the third): {offenders}"


def test_blank_runs_are_found() -> None:
    assert blank_runs("a\n\n\nb\n\n\n\n\nc\n") == [7]
    assert blank_runs("a\n\n\n") == []


def test_function_lengths_leave_out_the_docstring_only() -> None:
    body = "\n".join(f"    x{n} = {n}" for n in range(81))
    assert function_lengths(f'def f():\n    """Doc\n    string."""\n{body}\n') == {"f:1": 82}
    method = body.replace("\n", "\n    ")
    assert function_lengths(f"class C:\n    def m(self):\n    {method}\n") == {"m:2": 82}


def test_stages_raise_no_usage_errors() -> None:
    # Options are validated once, in dedup_cli.options; below the commands a bad value is a programming error
    # (ValueError), never an error worded for the command line.
    stages = ("text.", "minhash.", "estimates.", "candidates.", "groups.", "evaluation.", "engine.stages.find",
              "engine.stages.decisions", "engine.stages.conclude",
              "engine.stages.sign", "engine.stages.filter", "engine.stages.record_places", "engine.local.evaluation",
              "engine.dask.")
    offenders = []
    for name, path in _package_modules(PACKAGE_DIR).items():
        if not name.startswith(stages):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id in ("UsageError", "OptionError"):
                offenders.append(f"{path.name}:{node.lineno} uses {node.id}")
            if isinstance(node, ast.Raise) and "--" in ast.unparse(node):
                offenders.append(f"{path.name}:{node.lineno} words an error with a flag")
    assert not offenders, "; ".join(offenders)


def test_the_public_api_is_lazy_and_complete() -> None:
    import dedup_cli

    public = dedup_cli._PUBLIC
    assert sorted(dedup_cli.__all__) == sorted([*public, "__version__"])
    for name, module in public.items():
        assert getattr(importlib.import_module(module), name) is getattr(dedup_cli, name), name
    # What mypy sees (the TYPE_CHECKING imports) comes from the modules __getattr__ serves.
    assert {item.target for item in _imports_of("__init__")} >= set(public.values())
    code = ("import sys, dedup_cli, dedup_cli.cli.main; "
            "print(sorted(name for name in ('numpy', 'pyarrow', 'xxhash', 'tqdm', 's3fs', 'botocore', 'fsspec') "
            "if name in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            env={**os.environ, "PYTHONPATH": str(PACKAGE_DIR.parent)})
    assert loaded.stdout.strip() == "[]", f"importing the CLI loads {loaded.stdout.strip()}"


def test_the_compiled_kernel_records_the_digest_of_what_it_compiles() -> None:
    # numba invalidates a cached function when its own file changes, not when a function it calls (in another
    # file) does: kernel/compiled.py must change whenever those files do, so it records their digest.
    tree = ast.parse((PACKAGE_DIR / "kernel" / "compiled.py").read_text(encoding="utf-8"))
    recorded = next(node.value.value for node in tree.body if isinstance(node, ast.Assign)
                    and [target.id for target in node.targets if isinstance(target, ast.Name)] == ["KERNEL_SOURCES"]
                    and isinstance(node.value, ast.Constant))
    *names, digest = recorded.split()
    compiled_from = {item.target for item in _imports_of("kernel.compiled")} & {
        f"{PACKAGE}.{module}" for module in CONFINED["numba"]}
    assert sorted(f"{target.rsplit('.', 1)[1]}.py" for target in compiled_from) == sorted(names)
    content = b"".join((PACKAGE_DIR / "kernel" / name).read_bytes() for name in names)
    actual = "sha256:" + hashlib.sha256(content).hexdigest()[:16]
    assert digest == actual, f"kernel/compiled.py: set KERNEL_SOURCES to {' '.join([*names, actual])!r}"


def test_no_reference_to_files_outside_the_repository() -> None:
    repository = PACKAGE_DIR.parent
    texts = [*PACKAGE_DIR.rglob("*.py"), *(repository / "tests").rglob("*.py"), *(repository / "docs").glob("*.md"),
             repository / "README.md"]
    pattern = re.compile(r"\bSPEC\b|\bSTYLE\b|\.\./shared|/work/")
    offenders = [f"{path.relative_to(repository)}:{number}" for path in texts if path.exists()
                 for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
                 if pattern.search(line) and path.name != "test_architecture.py"]
    assert not offenders, f"references to files that are not in the repository: {offenders}"


# --- docs/architecture.md names what exists -----------------------------------------------------------------

ARCHITECTURE = PACKAGE_DIR.parent / "docs" / "architecture.md"
EVERY_PACKAGE = "every package's `__init__`"  # how the layer table names the package files of the foundations


def _section(text: str, heading: str) -> str:
    """The text of the section of ``text`` under ``## heading``, up to the next ``## ``."""
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def _package_folders(package_dir: Path) -> set[str]:
    """Every package of the package as a folder, ``"engine/dask/"``; the package itself not included."""
    return {init.parent.relative_to(package_dir).as_posix() + "/" for init in package_dir.rglob("__init__.py")
            if init.parent != package_dir}


def documented_folders(text: str) -> set[str]:
    """The folders the table under "The folders of `dedup_cli/`" has a row for."""
    return set(re.findall(r"^\| `([\w/]+/)` \|", _section(text, "The folders of `dedup_cli/`"), re.MULTILINE))


def documented_layers(text: str) -> list[tuple[int, int, str, list[list[str]]]]:
    """The rows of the table under "Layers": (tier, its last step, its name, the names of each step's modules), the
    words in parentheses left out; :data:`EVERY_PACKAGE` stays one name."""
    rows = []
    for match in re.finditer(r"^\| (\d+)\.0(?:–(\d+)\.(\d+))? \| ([^|]+) \| (.+) \|$", _section(text, "Layers"),
                             re.MULTILINE):
        tier, last_tier, last_step, name, cell = match.groups()
        assert last_tier in (None, tier), f"docs/architecture.md: layers {tier}.0–{last_tier}.{last_step} span tiers"
        while re.search(r"\([^()]*\)", cell):
            cell = re.sub(r"\s*\([^()]*\)", "", cell)
        # findall gives the phrase of EVERY_PACKAGE as "" (it has no group of its own).
        steps = [[name or EVERY_PACKAGE for name in re.findall(r"every package's `__init__`|`([^`]+)`", step)]
                 for step in cell.split("→")]
        rows.append((int(tier), int(last_step or 0), name.strip(), steps))
    return rows


def _resolve_documented(name: str, tier_modules: list[str], packages: set[str]) -> list[str]:
    """The modules of the tier a name of the layer table stands for: itself, or the one module of the tier it ends
    (``dask.cluster`` in the engines' row is ``engine.dask.cluster``); ``?name`` when none or several."""
    if name == EVERY_PACKAGE:
        return [module for module in tier_modules if module in packages]
    matches = [module for module in tier_modules if module == name or module.endswith("." + name)]
    exact = [module for module in matches if module == name]
    return exact or (matches if len(matches) == 1 else [f"?{name}"])


def test_the_document_names_every_package_and_only_packages() -> None:
    named = documented_folders(ARCHITECTURE.read_text(encoding="utf-8"))
    packages = _package_folders(PACKAGE_DIR)
    assert len(named) >= 10, "the folder table of docs/architecture.md was not read"
    assert not packages - named, f"packages without a row in docs/architecture.md's folder table: {packages - named}"
    assert not named - packages, f"docs/architecture.md's folder table names folders that are not packages: " \
                                 f"{named - packages}"


def test_the_documented_layers_are_the_enforced_ones() -> None:
    # docs/architecture.md says its layer table is the one this file enforces: the same tiers, steps and modules.
    documented = documented_layers(ARCHITECTURE.read_text(encoding="utf-8"))
    assert [row[0] for row in documented] == list(range(len(LAYERS))), \
        f"docs/architecture.md's layer table has tiers {[row[0] for row in documented]}, LAYERS {len(LAYERS)}"
    modules = _package_modules(PACKAGE_DIR)
    packages = {name for name, path in modules.items() if path.name == "__init__.py" and name != "__init__"}
    for (tier, last_step, name, steps), (title, enforced) in zip(documented, LAYERS, strict=True):
        tier_modules = [module for step in enforced for module in step]
        named = [sorted(module for name in step for module in _resolve_documented(name, tier_modules, packages))
                 for step in steps]
        assert named == [sorted(step) for step in enforced], (
            f"docs/architecture.md's layers {tier}.0–{tier}.{last_step} ({name}) list {named}; LAYERS has "
            f"{[sorted(step) for step in enforced]} ({title.split(':')[0]})")
        assert last_step == len(enforced) - 1, \
            f"docs/architecture.md numbers tier {tier} {tier}.0–{tier}.{last_step}; it has {len(enforced)} steps"


def _defines(path: Path, names: list[str]) -> bool:
    """Whether the module at ``path`` defines ``names[0]`` at its top level (a function, class, assignment or
    import), and each later name inside the class before it."""
    body: list[ast.stmt] = ast.parse(path.read_text(encoding="utf-8")).body
    for name in names:
        found = None
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
                found = node
            elif isinstance(node, ast.Assign) and name in {t.id for t in node.targets if isinstance(t, ast.Name)}:
                found = node
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
                found = node
            elif isinstance(node, (ast.Import, ast.ImportFrom)) and name in {
                    (alias.asname or alias.name).split(".")[0] for alias in node.names}:
                found = node
        if found is None:
            return False
        body = found.body if isinstance(found, ast.ClassDef) else []
    return True


def dangling_references(text: str, package_dir: Path) -> list[str]:
    """The references in ``text`` to files, folders and names of the package that do not exist.

    A path in backticks (``engine/stages/results.py``, ``tests/cli/``) must exist in the repository, in ``tests/``, in
    the package or in one of its packages (``dask/frames.py`` in an engine's context); a dotted name in backticks
    that starts with a module (``store.runs.write_task_part``, ``find_stages.score_in_chunks``, with or without
    ``dedup_cli.``) must name a module, or a name that module defines.
    """
    repository = package_dir.parent
    modules = _package_modules(package_dir)
    packages = [""] + sorted(folder.rstrip("/").replace("/", ".") + "." for folder in _package_folders(package_dir))
    roots = [repository, repository / "tests", package_dir,
             *(package_dir / folder for folder in _package_folders(package_dir))]
    dangling = []
    for reference in re.findall(r"`([^`\s]+)`", text):
        # Paths in lower case: ``dedup_cli/X/`` is a placeholder.
        if re.fullmatch(r"[a-z0-9_-]+(/[a-z0-9_-]+)*(\.py|/)", reference):
            if not any((root / reference).exists() for root in roots):
                dangling.append(reference)
            continue
        if not re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_]\w*)+", reference):
            continue
        parts = reference.removeprefix(f"{PACKAGE}.").split(".")
        for package in packages:
            dotted = [*package.rstrip(".").split("."), *parts] if package else parts
            cut = next((cut for cut in range(len(dotted), 0, -1) if ".".join(dotted[:cut]) in modules), 0)
            if cut > (len(package.rstrip(".").split(".")) if package else 0):
                if not _defines(modules[".".join(dotted[:cut])], dotted[cut:]) if dotted[cut:] else False:
                    dangling.append(reference)
                break
    return dangling


def test_the_architecture_document_names_only_what_exists() -> None:
    dangling = dangling_references(ARCHITECTURE.read_text(encoding="utf-8"), PACKAGE_DIR)
    assert not dangling, f"docs/architecture.md names files, folders or names that do not exist: {dangling}"


def test_the_documents_name_only_modules_that_exist() -> None:
    # Every dedup_cli.x.y in the manual names a module, or a name a module defines.
    repository = PACKAGE_DIR.parent
    texts = [*(repository / "docs").glob("*.md"), repository / "README.md"]
    dangling = [f"{path.name}: {reference}" for path in texts
                for reference in dangling_references(
                    " ".join(f"`{name}`" for name in re.findall(rf"\b{PACKAGE}(?:\.\w+)+", path.read_text("utf-8"))),
                    PACKAGE_DIR)]
    assert not dangling, f"the documents name modules or names that do not exist: {dangling}"


def test_the_document_names_the_largest_module() -> None:
    lengths = {path.relative_to(PACKAGE_DIR).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
               for path in PACKAGE_DIR.rglob("*.py")}
    longest = max(lengths.values())
    largest = sorted(name for name, length in lengths.items() if length == longest)  # ties: any of them
    named = re.search(r"the largest is `([\w/]+\.py)`", ARCHITECTURE.read_text(encoding="utf-8"))
    assert named is not None, "docs/architecture.md no longer names the largest module"
    assert named.group(1) in largest, (
        f"docs/architecture.md names {named.group(1)} the largest module; it is {' or '.join(largest)} "
        f"({longest} lines)")


def test_the_document_checks_catch_what_does_not_exist(tmp_path: Path) -> None:
    # A made-up package, module or name is caught, and the real ones pass.
    assert dangling_references("`store/runs.py` `store.runs.StoreRun.commit` `dask/ranges.py` `tests/cli/`",
                               PACKAGE_DIR) == []
    assert dangling_references("`dedup_cli.store.runs` `find_stages.score_in_chunks` `storage.urls`",
                               PACKAGE_DIR) == []
    made_up = "`made_up/` `store/rows.py` `store.runs.write_parts` `dedup_cli.store.runs.StoreRun.push`"
    assert dangling_references(made_up, PACKAGE_DIR) == [
        "made_up/", "store/rows.py", "store.runs.write_parts", "dedup_cli.store.runs.StoreRun.push"]
    # A package the folder table does not name, and a row for a folder that is not a package.
    package = tmp_path / PACKAGE
    for folder in ("", "text", "made_up"):
        (package / folder).mkdir(exist_ok=True)
        (package / folder / "__init__.py").write_text('"""A package."""\n')
    assert _package_folders(package) == {"text/", "made_up/"}
    text = ARCHITECTURE.read_text(encoding="utf-8")
    row = "| `inputs/` |"
    with_row = documented_folders(text.replace(row, "| `made_up/` | not a package |\n" + row, 1))
    assert with_row - _package_folders(PACKAGE_DIR) == {"made_up/"}
    # A module of the layer table that is not in its tier.
    layers = documented_layers(text.replace("`text.normalise` → ", "`text.normalise`, `text.tokenise` → ", 1))
    tier, _, _, steps = next(row for row in layers if row[2] == "text")
    assert steps[0] == ["text.normalise", "text.tokenise"]
    modules = [module for step in LAYERS[tier][1] for module in step]
    assert _resolve_documented("text.tokenise", modules, set()) == ["?text.tokenise"]


# --- the parser sees what the rules need -------------------------------------------------------------------


def test_rules_are_not_vacuous() -> None:
    # If parsing silently missed imports, every rule above would pass; these are known to exist.
    assert {item.target for item in _imports_of("cli.main")} >= {"click", f"{PACKAGE}.cli.sign"}
    assert {item.target for item in _imports_of("cli.common")} >= {"click", "tqdm"}
    assert f"{PACKAGE}.__init__" in {item.target for item in _imports_of("cli.find")}
    assert "pyarrow" in {item.target for item in _imports_of("store.format")}
    assert f"{PACKAGE}.estimates.guards" in {item.target for item in _imports_of("estimates.two_way")}
    assert f"{PACKAGE}.cli.main" in {item.target for item in _imports_of("__main__")}
    assert len({item.module for item in IMPORTS}) >= 60


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


def one_idea_names(document: str) -> set[str]:
    """The module names docs/architecture.md allows in several packages: the code spans of its paragraph
    "One name, one idea." after the words "one idea at each layer"."""
    paragraph = re.search(r"\*\*One name, one idea\.\*\*(.*?)(?:\n- |\n\n|\Z)", document, re.DOTALL)
    assert paragraph, "docs/architecture.md lacks its paragraph **One name, one idea.**"
    words = " ".join(paragraph.group(1).split())
    assert "one idea at each layer" in words, "docs/architecture.md: One name, one idea. names no shared names"
    return set(re.findall(r"`(\w+)`", words.split("one idea at each layer", 1)[1]))


def repeated_module_names(modules: dict[str, Path]) -> dict[str, list[str]]:
    """Module file names (not packages' ``__init__``) found in more than one package → the modules."""
    by_name: dict[str, list[str]] = {}
    for module, path in modules.items():
        if path.name != "__init__.py":
            by_name.setdefault(path.stem, []).append(module)
    return {name: sorted(found) for name, found in by_name.items() if len(found) > 1}


def test_no_module_name_is_two_ideas() -> None:
    allowed = one_idea_names(ARCHITECTURE.read_text(encoding="utf-8"))
    offenders = {name: modules for name, modules in repeated_module_names(_package_modules(PACKAGE_DIR)).items()
                 if name not in allowed}
    assert not offenders, (f"module names used in several packages: {offenders}; rename one to say what it is, or, "
                           "when it is one idea at each layer, say so in docs/architecture.md (One name, one idea)")


def class_names(modules: dict[str, Path]) -> dict[str, list[str]]:
    """Each public class name (not starting with ``_``) defined at the top of a module → the modules defining it."""
    found: dict[str, list[str]] = {}
    for module, path in modules.items():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                found.setdefault(node.name, []).append(module)
    return found


def documented_words(text: str) -> dict[str, str]:
    """The rows of the table under "Words": each word → its module as the table names it."""
    return dict(re.findall(r"^\| `(\w+)` \| `([\w/]+\.py)` \|", _section(text, "Words"), re.MULTILINE))


def test_one_word_for_each_idea() -> None:
    # No two classes of the package share a name (a Documents of one engine and of the other would be two ideas
    # under one word), and every class of engine/ is a word of docs/architecture.md, in its module.
    classes = class_names(_package_modules(PACKAGE_DIR))
    repeated = {name: modules for name, modules in classes.items() if len(modules) > 1}
    assert not repeated, f"classes of one name in several modules: {repeated}; name each for what it holds"
    words = documented_words(ARCHITECTURE.read_text(encoding="utf-8"))
    engine = {name: modules[0] for name, modules in classes.items() if modules[0].startswith("engine.")}
    assert len(words) >= 20, "the Words table of docs/architecture.md was not read"
    missing = sorted(set(engine) - set(words))
    assert not missing, f"classes of engine/ that docs/architecture.md's Words do not name: {missing}"
    misplaced = {name: words[name] for name in engine
                 if words[name] != "/".join(engine[name].split(".")) + ".py"}
    assert not misplaced, f"docs/architecture.md's Words name the wrong module: {misplaced}"
    unknown = sorted(set(words) - set(classes))
    assert not unknown, f"docs/architecture.md's Words name classes that do not exist: {unknown}"


def test_repeated_class_names_are_found(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "a").mkdir(parents=True)
    (package / "a" / "x.py").write_text("class Documents:\n    pass\n\n\nclass _Plan:\n    pass\n")
    (package / "y.py").write_text("class Documents:\n    pass\n\n\nclass _Plan:\n    pass\n")
    assert class_names(_package_modules(package)) == {"Documents": ["a.x", "y"]}


def test_repeated_module_names_are_found() -> None:
    modules = {"cli.writers": Path("cli/writers.py"), "corpus.writers": Path("corpus/writers.py"),
               "cli.find": Path("cli/find.py"), "api.find": Path("api/find.py"), "cli": Path("cli/__init__.py"),
               "api": Path("api/__init__.py"), "errors": Path("errors.py")}
    assert repeated_module_names(modules) == {"writers": ["cli.writers", "corpus.writers"],
                                              "find": ["api.find", "cli.find"]}
    document = "- **One name, one idea.** `a/x.py` and `b/x.py` differ. The rest are one idea at each layer: `find`.\n"
    assert one_idea_names(document) == {"find"}
