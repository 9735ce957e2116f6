"""``dedup review``: one HTML page of what find grouped, to look at before deleting anything."""

from __future__ import annotations

from typing import Any

import click

from dedup_cli.cli.common import (
    StageBars,
    engine_of,
    engine_options,
    find_options,
    flag,
    quiet_option,
    reports_errors,
    say,
    tuning_options,
    warn,
)
from dedup_cli.cli.pandas_hidden import pandas_hidden
from dedup_cli.cli.store_option import chosen_store, store_option
from dedup_cli.options.finding import FindOptions
from dedup_cli.options.reviewing import MIN_TEXT_LIMIT, ReviewOptions
from dedup_cli.options.vocabulary import MAX_SEED, default_store


@click.command()
@click.argument("store", type=click.Path(path_type=str), required=False)
@store_option
@click.option("-o", "--out", type=click.Path(dir_okay=False, path_type=str, allow_dash=True), required=True,
              metavar="FILE.html",
              help="The page to write (replaced atomically; a device or FIFO is written in place; - for stdout).")
@find_options
@click.option("--groups", "largest", type=click.IntRange(0), default=ReviewOptions.groups, metavar="N",
              help="Show the N largest groups.")
@click.option("--sample", type=click.IntRange(0), default=ReviewOptions.sample, metavar="M",
              help="Also show a random sample of M of the other groups.")
@click.option("--seed", type=click.IntRange(0, MAX_SEED), default=ReviewOptions.seed, help="Seed of the sample.")
@click.option("--members", type=click.IntRange(1), default=ReviewOptions.members, metavar="N",
              help="Members of each group shown with their text: the kept one, then the least similar to it; the "
                   "others are listed by id.")
@click.option("--text-limit", type=click.IntRange(MIN_TEXT_LIMIT), default=ReviewOptions.text_limit,
              metavar="CHARS",
              help="Characters of each shown text: the kept member's beginning, and each other member's differences "
                   "from it with the words around them.")
@tuning_options
@quiet_option
@engine_options
@reports_errors
def review(store: str | None, store_named: str | None, out: str, group_method: str, largest: int, sample: int,
           seed: int, members: int, text_limit: int, quiet: bool, **given: Any) -> None:
    """Write one HTML page of what find grouped: texts, differences, what is kept and why.

    The page opens offline from disk (everything inline): the summary, the banding's S-curve and the
    estimates at the top, then the N largest groups and a random sample of the others, filterable and
    sortable; a click on a group shows its members, the kept one and the rule that kept it, each member's
    estimate against it with its interval (and the exact value when checked), and a word-level diff.
    Takes every option of find. STORE (or --store) defaults to $DEDUP_STORE, else ./dedup.parquet.

    \b
    Example:
      dedup review -o review.html --threshold 0.5 --bits 2
      dedup review sigs.parquet -o review.html --keep longest --groups 50 --sample 200
    """
    import dedup_cli as api
    from dedup_cli.cli.summaries import find_summary, find_warnings, review_summary, stdin_warning

    options = ReviewOptions(FindOptions(group=group_method, engine=engine_of(given), **given), groups=largest,
                            sample=sample, seed=seed, members=members, text_limit=text_limit)
    path = default_store(chosen_store(store, store_named))
    with StageBars(quiet) as stages:
        with pandas_hidden():  # as in the core install, on either engine (dedup_cli.cli.pandas_hidden)
            report = api.review(path, out, options, stages)
    unverified = stdin_warning(report.result)
    if unverified is not None:
        warn(unverified)
    if not quiet:
        say(find_summary(path, report.result))
        say(review_summary(report))
    for line in find_warnings(report.result, flag):  # with -q too: they change what the page means
        warn(line)
