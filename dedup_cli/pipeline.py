"""Library entry points: ``sign`` a corpus into a store, ``find`` duplicate pairs and groups in a store.

They take plain arguments and an optional progress callback, so they are usable without the CLI::

    from dedup_cli import pipeline
    pipeline.sign(["corpus/"], "sigs.parquet", SignatureParams())
    result = pipeline.find("sigs.parquet", threshold=0.5, bits=2)
"""

from __future__ import annotations

from dedup_cli.finding import DENSE_R, FindResult, find
from dedup_cli.signing import SignReport, sign, sign_batch, sign_set_batch

__all__ = ["DENSE_R", "FindResult", "SignReport", "find", "sign", "sign_batch", "sign_set_batch"]
