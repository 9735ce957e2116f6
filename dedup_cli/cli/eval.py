"""``dedup eval``: how accurate find is on this store, from a sample of pairs re-read exactly."""

from __future__ import annotations

import json
from typing import Any

import click

from dedup_cli.cli.common import (
    ESTIMATOR_BITS,
    StageBars,
    echo_output,
    jobs_option,
    out_option,
    quiet_option,
    recall_option,
    reports_errors,
    say,
    warn,
)
from dedup_cli.cli.store_option import chosen_store, store_option
from dedup_cli.options.evaluating import MAX_SAMPLE, MIN_SAMPLE, EvalOptions
from dedup_cli.options.finding import FindOptions
from dedup_cli.options.vocabulary import MAX_SEED, default_store


@click.command("eval")
@click.argument("store", type=click.Path(path_type=str), required=False)
@store_option
@click.option("--threshold", "-t", type=click.FloatRange(0.0, 1.0, min_open=True), default=FindOptions.threshold,
              help="The R0 of the find to judge.")
@click.option("--bits", "-b", type=ESTIMATOR_BITS, default=FindOptions.bits,
              help="The b of the find to judge, or 1/2 (b = 1, 2, 4 and the stored bits are measured too).  "
                   "[default: all stored]")
@click.option("--sample", type=click.IntRange(MIN_SAMPLE, MAX_SAMPLE), default=EvalOptions.sample,
              help="Pairs to draw across the strata and re-read.")
@click.option("--seed", type=click.IntRange(0, MAX_SEED), default=EvalOptions.seed, help="Seed of the sample.")
@click.option("--truth", type=click.Path(dir_okay=False, path_type=str), default=EvalOptions.truth, metavar="FILE",
              help="Pairs with their exact resemblance (CSV, TSV or JSON Lines: id_a, id_b, resemblance): count "
                   "precision and recall against them instead of the sample.")
@click.option("--bands", type=click.IntRange(1), default=FindOptions.bands,
              help="LSH bands (default: chosen for --recall at R0, as find does).")
@click.option("--rows", type=click.IntRange(1), default=FindOptions.rows, help="Values per LSH band.")
@recall_option
@click.option("--plot", type=click.Path(dir_okay=False, path_type=str), default=None, metavar="FILE.png",
              help="Draw the report's pictures into FILE.png (needs the plot extra: pip install 'dedup-cli[plot]').")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              help="text: the summary on stderr only; json: also every number as one JSON object on stdout.")
@out_option
@jobs_option
@quiet_option
@reports_errors
def evaluate(store: str | None, store_named: str | None, sample: int, seed: int, truth: str | None,
             plot: str | None, fmt: str, out: str | None, quiet: bool, **given: Any) -> None:
    """Measure how accurate find is on this store, from a sample of pairs re-read exactly.

    Draws --sample pairs stratified by their estimate (candidates of every band of R̂, random pairs
    for the low end), re-reads them, and reports the bias, RMSE, variance and interval coverage of R̂
    for b = 1, 2, 4 and the stored bits, the measured S-curve, and find's precision and recall with
    and without exact checks, each with a 95 % interval (docs/evaluation.md).

    \b
    Example:
      dedup eval sigs.parquet --threshold 0.5 --bits 2 --plot eval.png
      dedup eval sigs.parquet --truth truth.tsv --format json > accuracy.json
    """
    import dedup_cli as api
    from dedup_cli.cli.eval_report import eval_record, eval_summary, eval_warnings
    from dedup_cli.cli.summaries import written

    options = EvalOptions(FindOptions(**given), sample=sample, seed=seed, truth=truth)
    if plot is not None:
        from dedup_cli.api.plot import require_matplotlib

        require_matplotlib()  # before the work, not after it
    with StageBars(quiet) as stages:
        result = api.evaluate(default_store(chosen_store(store, store_named)), options, stages)
        if plot is not None:
            stages.stage("drawing the plot", None)
            api.plot_evaluation(result, plot)
    if fmt == "json":
        echo_output(json.dumps(eval_record(result)), out)
    elif out is not None:  # the report itself, which stderr shows as the summary
        echo_output("\n".join(eval_summary(result) + [f"warning: {line}" for line in eval_warnings(result)]), out)
    if not quiet:
        report = "the report as JSON" if fmt == "json" else "the report"
        for line in eval_summary(result, written([("the pictures", plot), (report, out)])):
            say(line)
    for line in eval_warnings(result):  # with -q too: they change what the measures mean
        warn(line)
