"""What ``review`` shows of a ``find``: which groups, how many of their members, and how much of each text."""

from __future__ import annotations

from dataclasses import dataclass

from dedup_cli.options.checks import at_least, in_range, set_fields
from dedup_cli.options.finding import FindOptions
from dedup_cli.options.vocabulary import MAX_SEED

MIN_TEXT_LIMIT = 200  # characters: a sentence or two around a difference


@dataclass(frozen=True)
class ReviewOptions:
    """What ``review`` shows of the groups of a ``find``, in one HTML page.

    Attributes:
        find: the ``find`` whose groups are reviewed (every option of ``find``: threshold, b, grouping, keep policy,
            exact checks, banding, engine); its ``jobs`` are also the processes that compare the shown texts (0:
            one per core).
        groups: the N largest groups shown (ties by group number).
        sample: a random sample of M of the other groups shown beside them (uniform, without replacement).
        seed: the sample's seed: the same seed gives the same page.
        members: members of each shown group shown with their text, the representative and the others least
            similar to it first; the rest of the group is listed by id.
        text_limit: characters of each shown member's text: of the representative's beginning, and of each other
            member's differences from it with the unchanged words around them.
    """

    find: FindOptions = FindOptions()
    groups: int = 100
    sample: int = 100
    seed: int = 1
    members: int = 10
    text_limit: int = 5000

    def __post_init__(self) -> None:
        set_fields(self, groups=at_least("groups", self.groups, 0), sample=at_least("sample", self.sample, 0),
                   seed=in_range("seed", self.seed, 0, MAX_SEED, "2^63 − 1"),
                   members=at_least("members", self.members, 1),
                   text_limit=at_least("text_limit", self.text_limit, MIN_TEXT_LIMIT))
