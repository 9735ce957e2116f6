"""Which signing kernel a run uses: numpy (always installed, the reference) or the compiled one (numba).

Both give byte-identical shingle counts and signatures. The compiled kernel (:mod:`dedup_cli.kernel.compiled`)
needs less CPU per document and per byte, but has a fixed cost the numpy one has not: importing numba and loading
the compiled code from numba's on-disk cache (:data:`LOAD_SECONDS` in each signing process: the planning process
pays it once when the choice is made before its workers fork, else each worker pays it, in parallel). Compiling
it the first time takes 8 s or more, and no run pays that: ``auto`` takes the compiled kernel only when a fresh
process can load it from the cache (:func:`dedup_cli.kernel.cache.cached`), and otherwise signs with numpy while
it is compiled in the background for later runs (:mod:`dedup_cli.kernel.background`).

When it is cached, ``auto`` chooses by measured cost: the compiled kernel when the CPU time it saves over the
run (:func:`saving_seconds`, fitted to signing workers; docs/signing.md), shared by the workers, exceeds the time
it takes to load: ``saving / workers > LOAD_SECONDS``. The run's tasks are told to :class:`KernelChoice` as they
are planned (file names, line offsets: no text), while the workers sign, until their saving settles it or they
end; a stream of unknown size (stdin) starts with numpy and switches once what it has given settles it. Either
way the signatures are the same. Nothing here imports numba; :func:`compiled_kernel` does, when chosen.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from dataclasses import dataclass, field
from types import ModuleType

from dedup_cli.errors import DedupError
from dedup_cli.kernel import cache
from dedup_cli.params import SignatureParams

COMPILED_MODULE = "dedup_cli.kernel.compiled"
# Importing numba, this package's compiled module and loading its code from numba's cache, in a process that has
# numpy and pyarrow already: the CPU a signing run spends on it, measured as the difference between runs with the
# kernel forced each way (0.32-0.40 s over eight corpora and k; docs/signing.md).
LOAD_SECONDS = 0.36

# Why a run signed with numpy (SignReport.kernel_reason): it was asked to, numba is missing, the kernel is not
# compiled yet (being compiled in the background) or failed to compile, the run was too small to repay loading
# it, or it signed integer sets (the compiled kernel signs text).
REQUESTED, NOT_INSTALLED, NOT_COMPILED, COMPILE_FAILED, SMALL_RUN, INTEGER_SETS = (
    "requested", "not installed", "not compiled", "compile failed", "small run", "integer sets")


def compiled_kernel_installed() -> bool:
    """Whether numba can be found, without importing it (a few file-system lookups)."""
    return importlib.util.find_spec("numba") is not None


def compiled_kernel_loaded() -> bool:
    """Whether this process has already paid for the compiled kernel."""
    return COMPILED_MODULE in sys.modules


def compiled_kernel() -> ModuleType:
    """The compiled kernel, imported and its code loaded (compiled, the first time) in this process, so that
    forked workers inherit it; a numba that is installed but cannot load becomes a one-line error."""
    loaded = compiled_kernel_loaded()
    try:
        module = importlib.import_module(COMPILED_MODULE)
        if not loaded:
            module.compile_kernel()  # load it here once, rather than in every worker
        return module
    except ImportError as error:
        raise DedupError(f"the compiled signing kernel cannot load ({error}); reinstall it with pip install "
                         "'dedup-cli[fast]', or sign with {kernel} numpy", options=True) from error


def numba_version() -> str:
    """The installed numba's version."""
    module = sys.modules.get("numba")
    if module is not None:
        return str(module.__version__)
    import importlib.metadata  # 20 ms: only for sign -v, when the workers loaded numba and this process did not

    return importlib.metadata.version("numba")


def saving_seconds(documents: int, text_bytes: int, params: SignatureParams | None = None) -> float:
    """CPU seconds the compiled kernel saves over the numpy kernel signing ``documents`` of ``text_bytes`` in all.

    A per-document part (numpy's sorting, densification and packing of each document, growing with k) and a
    per-byte part (tokens and shingles; for kperm, k hash functions of each shingle), measured in signing workers
    on this project's benchmark corpora of short (1.6 KB) and long (7.4 KB) English documents at k = 128 and 256
    (docs/signing.md) and rounded down, so that a run near the break-even keeps numpy, which is never slower there.
    The per-document part of word shingles with oph is what a run of 10^5 short documents (163 MB) on two quiet
    cores shows: the compiled kernel saved too little there to repay loading it.
    """
    params = params if params is not None else SignatureParams()
    scale = params.num_perm / 128
    if params.shingle_unit == "char":  # a shingle per character: several times the work per byte
        per_document, per_byte = 0.0, (70e-9 * scale if params.scheme == "kperm" else 35e-9)
    elif params.scheme == "kperm":
        per_document, per_byte = 2e-6 * scale, 11e-9 * scale
    else:
        per_document, per_byte = 1e-6 * scale, 3e-9
    return documents * per_document + text_bytes * per_byte


def compiled_kernel_state(requested: str = "auto") -> tuple[str, str]:
    """Whether ``requested`` allows the compiled kernel before any size is known: (``"numba"``, ``""``) when it
    may run (loaded already, or in numba's cache, or asked for), else (``"numpy"``, the reason)."""
    if requested == "numba":
        return "numba", ""
    if requested == "numpy":
        return "numpy", REQUESTED
    if requested != "auto":
        raise ValueError(f"unknown kernel {requested!r}")
    if not compiled_kernel_installed():
        return "numpy", NOT_INSTALLED
    if compiled_kernel_loaded() or cache.cached():
        return "numba", ""
    return "numpy", COMPILE_FAILED if cache.failure() is not None else NOT_COMPILED


def choose_kernel(documents: int | None, text_bytes: int | None, requested: str = "auto", workers: int = 1,
                  params: SignatureParams | None = None) -> tuple[str, str]:
    """The kernel to sign ``documents`` of ``text_bytes`` with, and why numpy when it is numpy.

    Args:
        documents, text_bytes: what the run will sign (None when unknown: a stream, numpy until
            :class:`KernelChoice` has seen enough).
        requested: ``"auto"`` (the compiled kernel when it is loaded already, or cached and the run repays
            loading it), ``"numpy"`` or ``"numba"`` (the options checked that numba is installed).
        workers: the processes that will sign in parallel.
        params: the signature parameters (default: the defaults), which set the saving.

    Returns:
        (``"numpy"`` or ``"numba"``, ``""`` for numba, else :data:`REQUESTED`, :data:`NOT_INSTALLED`,
        :data:`NOT_COMPILED`, :data:`COMPILE_FAILED` or :data:`SMALL_RUN`).
    """
    kernel, reason = compiled_kernel_state(requested)
    if kernel == "numpy" or requested == "numba" or compiled_kernel_loaded():
        return kernel, reason
    if repays_loading(documents or 0, text_bytes or 0, workers, params):
        return "numba", ""
    return "numpy", SMALL_RUN


def repays_loading(documents: int, text_bytes: int, workers: int, params: SignatureParams | None = None) -> bool:
    """Whether signing ``documents`` of ``text_bytes`` on ``workers`` is faster with the compiled kernel, loading
    it included: its saving per worker exceeds :data:`LOAD_SECONDS`."""
    return saving_seconds(documents, text_bytes, params) / max(1, workers) > LOAD_SECONDS


@dataclass
class KernelChoice:
    """The kernel of each task of one run.

    Made before the run with what is allowed (:func:`compiled_kernel_state`); then told what the tasks hold as
    they are planned (:meth:`see`). ``auto`` takes the compiled kernel as soon as what was seen repays loading it
    (:func:`repays_loading`), and otherwise keeps numpy: decided once (:meth:`decide`) when the planner has seen
    every task or enough of them, or switching mid-run for a stream of unknown size. Switching is safe because
    both kernels give the same bytes.
    """

    requested: str = "auto"
    workers: int = 1
    params: SignatureParams | None = None
    documents_seen: int = 0
    bytes_seen: int = 0
    used: list[str] = field(default_factory=list)  # the kernels that ran, in the order they were first used
    reason: str = ""  # why numpy, when numpy ran
    decided: str | None = None  # the kernel of every task, once decided

    def __post_init__(self) -> None:
        self.allowed, self.blocked = compiled_kernel_state(self.requested)
        if self.allowed == "numpy" or self.requested == "numba" or compiled_kernel_loaded():
            self.decided = self.allowed

    def see(self, documents: int, text_bytes: int, coming_bytes: int = 0) -> None:
        """Count a task planned ahead; decides for the compiled kernel once the tasks seen repay loading it, or as
        soon as their bytes and ``coming_bytes`` (the rest of a file the task is cut from, its documents not
        counted yet: a lower bound of the saving) do."""
        self.documents_seen += documents
        self.bytes_seen += text_bytes
        if self.decided is None and repays_loading(self.documents_seen, self.bytes_seen + coming_bytes, self.workers,
                                                   self.params):
            self.decided = "numba"

    def decide(self) -> str:
        """Settle the kernel with what was seen (numpy, unless it repays loading the compiled one)."""
        if self.decided is None:
            self.decided = "numba" if repays_loading(self.documents_seen, self.bytes_seen, self.workers,
                                                     self.params) else "numpy"
        return self.decided

    @property
    def planned(self) -> str:
        """The kernel the run starts with."""
        return self.decided or "numpy"

    def kernel_for(self, documents: int, text_bytes: int, ahead: bool = False) -> str:
        """The kernel of the next task (``documents`` of ``text_bytes``); counts it unless it was seen ``ahead``.
        Undecided (a stream), numpy until the tasks so far repay loading the compiled kernel."""
        if not ahead:
            self.see(documents, text_bytes)
        kernel = self.decided or "numpy"
        if kernel not in self.used:
            self.used.append(kernel)
        if kernel == "numpy":
            self.reason = self.blocked or SMALL_RUN
        return kernel
