"""``dedup plan``: what a threshold, b, k and the stored bits promise and cost, before any work."""

from __future__ import annotations

import json
from typing import Any

import click

from dedup_cli.cli.common import ESTIMATOR_BITS, echo_output, jobs_option, out_option, reports_errors
from dedup_cli.options.planning import PlanOptions
from dedup_cli.options.vocabulary import MAX_NUM_PERM, SIGNATURE_SCHEMES


@click.command()
@click.option("--threshold", "-t", type=click.FloatRange(0.0, 1.0, min_open=True), default=PlanOptions.threshold,
              help="The resemblance R0 find will use.")
@click.option("--bits", "-b", type=ESTIMATOR_BITS, default=PlanOptions.bits,
              help="Bits for the estimator, or 1/2 (XOR bits of pairs of permutations).")
@click.option("--num-perm", "-k", type=click.IntRange(1, MAX_NUM_PERM), default=PlanOptions.num_perm,
              help="Values per signature (k).")
@click.option("--stored-bits", type=ESTIMATOR_BITS, default=PlanOptions.stored_bits,
              help="Bits the store keeps (sign --bits); band keys use them.  1/2: a store of XOR bits.")
@click.option("--recall", type=click.FloatRange(0.0, 1.0, min_open=True, max_open=True), default=PlanOptions.recall,
              help="Recall of banding to reach at R0.")
@click.option("--docs", type=click.IntRange(2), default=PlanOptions.docs,
              help="Corpus size: estimate candidate pairs and find's memory.")
@click.option("--bands", type=click.IntRange(1), default=PlanOptions.bands, help="Override the chosen bands.")
@click.option("--rows", type=click.IntRange(1), default=PlanOptions.rows, help="Override the chosen rows per band.")
@click.option("--scheme", type=click.Choice(SIGNATURE_SCHEMES), default=PlanOptions.scheme,
              help="How the store is signed (sign --scheme): oph, one permutation hashing, densified; kperm, k hash "
                   "functions.")
@click.option("--shingles", type=click.IntRange(1), default=PlanOptions.shingles, metavar="F",
              help="Plan for documents of F shingles (find takes its store's shortest): with oph, fewer than about k "
                   "make the estimate noisier and the S-curve flatter.  [default: long documents]")
@jobs_option
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", help="Output format.")
@out_option
@reports_errors
def plan(fmt: str, out: str | None, **given: Any) -> None:
    """Explain banding, accuracy, storage and memory for a threshold before any work.

    \b
    Example:
      dedup plan --threshold 0.5 --bits 2
      dedup plan --threshold 0.8 --bits 1 --num-perm 128 --docs 1000000 --jobs 4
      dedup plan --threshold 0.8 --bits 2 --shingles 20
    """
    import dedup_cli as api
    from dedup_cli.cli.plan_report import plan_record, render_plan

    made = api.plan(PlanOptions(**given))
    echo_output(json.dumps(plan_record(made)) if fmt == "json" else render_plan(made), out)
