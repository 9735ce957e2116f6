"""Where ``sign`` and ``find`` run: the local engine, or the Dask engine on a cluster."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from dedup_cli.errors import OptionError
from dedup_cli.options.checks import at_least, choice, literal, set_fields
from dedup_cli.options.vocabulary import ENGINES, SCHEDULER_VARIABLE

# What Dask's ``parse_bytes`` reads as a memory limit, less its rarer spellings: 2GiB, 1.5GB, 500MB, 4e9.
_MEMORY_LIMIT = re.compile(r"\d+(\.\d+)?(e\d+)?\s*([kKMGTP]i?B|B)?")


@dataclass(frozen=True)
class EngineOptions:
    """Where ``sign`` and ``find`` run: this machine, or a Dask cluster (the ``dask`` extra).

    Attributes:
        name: ``local`` or ``dask``.
        scheduler: the address of a running Dask scheduler (``tcp://host:8786``); None: ``$DEDUP_SCHEDULER``,
            else a local cluster of ``workers`` processes.
        workers: worker processes of the local cluster (0: one per core).
        memory_limit: memory of each local worker before it spills to disk, e.g. ``2GiB`` (``auto``: the
            machine's memory shared among the workers).
    """

    name: str = "local"
    scheduler: str | None = None
    workers: int = 0
    memory_limit: str = "auto"

    def __post_init__(self) -> None:
        choice("engine", self.name, ENGINES, "{{engine}} {value}: choose {either}")
        set_fields(self, workers=at_least("workers", self.workers, 0))
        if self.memory_limit != "auto" and not _MEMORY_LIMIT.fullmatch(str(self.memory_limit)):
            raise OptionError("memory_limit", self.memory_limit, f"{{memory_limit}} {literal(repr(self.memory_limit))}"
                              " is not an amount of memory; write e.g. 2GiB, 1.5GB or auto")
        given = [name for name, default in (("scheduler", None), ("workers", 0), ("memory_limit", "auto"))
                 if getattr(self, name) != default]
        if self.name == "local" and given:
            raise OptionError(given[0], getattr(self, given[0]), f"{{{given[0]}}} applies to {{engine}} dask")
        if self.scheduler is not None and len(given) > 1:
            raise OptionError(given[1], getattr(self, given[1]), f"{{{given[1]}}} sets up a local cluster; the "
                              "cluster at {scheduler} has its own workers")

    @property
    def cluster_workers(self) -> int:
        """The local cluster's worker processes: ``workers``, or one per core when it is 0."""
        return self.workers or os.cpu_count() or 1

    def scheduler_address(self) -> str | None:
        """The scheduler to connect to: ``scheduler``, else ``$DEDUP_SCHEDULER``; None for a local cluster."""
        return self.scheduler or os.environ.get(SCHEDULER_VARIABLE) or None
