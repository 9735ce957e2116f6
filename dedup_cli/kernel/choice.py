"""Which signing kernel a run uses: numpy (always installed, the reference) or the compiled one (numba).

Both give byte-identical shingle counts and signatures. The compiled kernel (:mod:`dedup_cli.kernel.compiled`)
signs prose 1.5-3 times faster per core, but has a fixed cost the numpy one has not: importing numba and loading
the compiled code from numba's on-disk cache take 0.35-0.5 s per process (compiling it the very first time,
about 10 s). ``auto`` therefore takes it only for runs large enough to win that back
(:data:`COMPILED_MIN_BYTES` per worker: the code is loaded once, before the workers start, and each worker
saves its share), or when this process has loaded it already. A run that does not know its size in
advance (stdin) starts with numpy and switches once it has seen enough bytes (:class:`KernelChoice`): the
signatures are the same either way. Nothing here imports numba; :func:`compiled_kernel` does, when chosen.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from dataclasses import dataclass, field
from types import ModuleType

from dedup_cli.errors import DedupError

COMPILED_MODULE = "dedup_cli.kernel.compiled"
# Break-even of the compiled kernel per worker: its fixed 0.35 s (importing numba 0.16 s, loading the cached code
# 0.15 s; bench/RESULTS-sign.md) against the CPU it saves per MB (word 5-shingles, oph, k = 128 or 256:
# numpy 45-52 MB/s, numba 145-165 MB/s per core on the benchmark corpus, so 13-15 ms/MB): about 24 MB a worker.
COMPILED_MIN_BYTES = 24 << 20

# Why a run signed with numpy (SignReport.kernel_reason): it was asked to, numba is missing, the run was small,
# or it signed integer sets (the compiled kernel signs text).
REQUESTED, NOT_INSTALLED, SMALL_RUN, INTEGER_SETS = "requested", "not installed", "small run", "integer sets"


def compiled_kernel_installed() -> bool:
    """Whether numba can be found, without importing it (a few file-system lookups)."""
    return importlib.util.find_spec("numba") is not None


def compiled_kernel_loaded() -> bool:
    """Whether this process has already paid for the compiled kernel."""
    return COMPILED_MODULE in sys.modules


def compiled_kernel() -> ModuleType:
    """Import the compiled kernel; a numba that is installed but cannot load becomes a one-line error."""
    try:
        return importlib.import_module(COMPILED_MODULE)
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


def choose_kernel(expected_bytes: int | None, requested: str = "auto", workers: int = 1) -> tuple[str, str]:
    """The kernel to sign ``expected_bytes`` of input with, and why numpy when it is numpy.

    Args:
        expected_bytes: the bytes the run will sign (its inputs' size on disk), or None when unknown (a
            stream: numpy until :class:`KernelChoice` has seen enough).
        requested: ``"auto"`` (the compiled kernel when installed and the run is at least
            :data:`COMPILED_MIN_BYTES` per worker, or it is loaded already), ``"numpy"`` or ``"numba"`` (the
            options checked that numba is installed).
        workers: the processes that will sign in parallel.

    Returns:
        (``"numpy"`` or ``"numba"``, ``""`` for numba, else :data:`REQUESTED`, :data:`NOT_INSTALLED` or
        :data:`SMALL_RUN`).
    """
    if requested == "numba":
        return "numba", ""
    if requested == "numpy":
        return "numpy", REQUESTED
    if requested != "auto":
        raise ValueError(f"unknown kernel {requested!r}")
    if not compiled_kernel_installed():
        return "numpy", NOT_INSTALLED
    if compiled_kernel_loaded() or (expected_bytes or 0) >= COMPILED_MIN_BYTES * max(1, workers):
        return "numba", ""
    return "numpy", SMALL_RUN


@dataclass
class KernelChoice:
    """The kernel of each batch of one run: chosen once from the run's size when it is known (``run_bytes``),
    else numpy until the bytes seen reach :data:`COMPILED_MIN_BYTES` per worker, then the compiled kernel if
    ``auto`` allows it. Switching mid-run is safe because both kernels give the same bytes.
    """

    requested: str = "auto"
    run_bytes: int | None = None
    workers: int = 1
    bytes_seen: int = 0
    used: list[str] = field(default_factory=list)  # the kernels that ran, in the order they were first used
    reason: str = ""  # why numpy, when numpy ran (choose_kernel)

    def __post_init__(self) -> None:
        self.fixed = None if self.run_bytes is None else choose_kernel(self.run_bytes, self.requested, self.workers)

    @property
    def planned(self) -> str:
        """The kernel the run starts with."""
        return (self.fixed or choose_kernel(None, self.requested))[0]

    def kernel_for(self, batch_bytes: int) -> str:
        """The kernel for the next batch of ``batch_bytes``; counts them."""
        self.bytes_seen += batch_bytes
        kernel, reason = self.fixed or choose_kernel(self.bytes_seen, self.requested, self.workers)
        if kernel not in self.used:
            self.used.append(kernel)
        if kernel == "numpy":
            self.reason = reason
        return kernel
