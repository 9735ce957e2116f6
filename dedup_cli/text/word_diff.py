"""What differs between two texts, word by word, folded around the differences: what ``review`` shows of a member
beside its group's representative.

A text is cut into tokens (runs of word characters, runs of other non-space characters), each shown with the white
space after it; two texts are compared on their tokens alone, so that a line broken elsewhere is no difference.
The tokens found once in each text are matched first, in the longest chain that keeps their order in both (as
patience diff does); the stretches between them that differ are compared by :class:`difflib.SequenceMatcher`
(Ratcliff–Obershelp: the longest common run, then the same on either side of it), with its heuristic for popular
tokens: in a stretch of 200 tokens or more, one that makes up over 1 % of it ("the", a comma) starts no common run
but still extends one. Near-duplicates share many anchors, so their stretches are short and the comparison costs
about the length of the texts. It is bounded: only the first ``max_words`` tokens of each text are compared, and
the segments shown stop at
``max_characters``; a run of unchanged tokens longer than twice ``context`` (and :data:`FOLD_AT` more) is folded
into a count, so that a long text shows its differences and a little around each.

Plain Python on two texts at a time, no I/O: the caller chooses which texts and how much of them.
"""

from __future__ import annotations

import bisect
import difflib
import itertools
import re
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

TOKEN = re.compile(r"(\w+|[^\w\s]+)(\s*)")
"""A token (a run of word characters, or of other characters that are not white space) and the space after it."""

SAME, REMOVED, ADDED, FOLDED, CUT = 0, 1, 2, 3, 4
"""The kinds of segment: text of both, text of the first only, of the second only, a number of unchanged tokens
folded away, and a number of differences past the characters shown."""

CONTEXT_WORDS = 12
"""Unchanged tokens shown on each side of a difference."""

FOLD_AT = 8
"""A run of unchanged tokens is folded only when it hides at least this many of them."""

DIFF_WORDS = 10_000
"""The tokens of each text compared by default: about 0.06 s for two texts of prose this long; the comparison's
time grows faster than their length."""


@dataclass
class WordDiff:
    """The differences of a second text against a first, as segments to show in order.

    ``segments`` holds (kind, value): (SAME, text), (REMOVED, text of the first), (ADDED, text of the second),
    (FOLDED, unchanged tokens hidden), (CUT, differences not shown for want of room).
    """

    segments: list[tuple[int, str | int]] = field(default_factory=list)
    changes: int = 0  # runs of removed or added tokens (a replacement counts once)
    removed_words: int = 0
    added_words: int = 0
    compared: tuple[int, int] = (0, 0)  # tokens of each text compared
    truncated: bool = False  # a text had more than ``max_words`` tokens: its rest was not compared

    @property
    def identical(self) -> bool:
        """No difference among the tokens compared (white space aside)."""
        return self.changes == 0


class Tokens(NamedTuple):
    """A text's tokens: what is compared, what is shown (each with the space after it), and whether the text had
    more tokens than were taken."""

    keys: list[str]
    shown: list[str]
    cut: bool


def tokens(text: str, limit: int | None = None) -> Tokens:
    """The first ``limit`` tokens of ``text`` (all with None). Leading white space is dropped; the last token is
    shown with a space after it when the text ends without one."""
    if limit is not None and len(text) > 40 * limit:  # a long text is walked only as far as the limit
        found = [match.groups() for match in itertools.islice(TOKEN.finditer(text), limit + 1)]
    else:
        found = TOKEN.findall(text)
    cut = limit is not None and len(found) > limit
    if cut:
        found = found[:limit]
    shown = [token + space for token, space in found]
    if found and not found[-1][1]:  # in a diff, another text's tokens may follow the last one: keep them apart
        shown[-1] += " "
    return Tokens([token for token, _ in found], shown, cut)


def word_diff(first: str | Tokens, second: str | Tokens, max_words: int = DIFF_WORDS, context: int = CONTEXT_WORDS,
              max_characters: int | None = None) -> WordDiff:
    """The word-level differences of ``second`` against ``first`` (see the module docstring).

    Args:
        first, second: the texts (the representative and a member), or their :func:`tokens` (taken with the same
            ``max_words``), so that a text compared with many others is cut into tokens once.
        max_words: tokens of each text compared.
        context: unchanged tokens kept on each side of a difference.
        max_characters: the most characters the segments' texts may add up to (None: no bound); past it, one
            (CUT, differences left) segment ends them.
    """
    first_keys, first_shown, first_cut = first if isinstance(first, Tokens) else tokens(first, max_words)
    second_keys, second_shown, second_cut = second if isinstance(second, Tokens) else tokens(second, max_words)
    diff = WordDiff(compared=(len(first_keys), len(second_keys)), truncated=first_cut or second_cut)
    opcodes = diff_opcodes(first_keys, second_keys)
    changed = [code for code in opcodes if code[0] != "equal"]
    diff.changes = len(changed)
    diff.removed_words = sum(code[2] - code[1] for code in changed)
    diff.added_words = sum(code[4] - code[3] for code in changed)
    room = max_characters if max_characters is not None else -1
    shown_changes = 0
    for index, (tag, a_start, a_end, b_start, b_end) in enumerate(opcodes):
        pieces: list[tuple[int, str | int]]
        if tag == "equal":
            pieces = _unchanged(second_shown[b_start:b_end], context, index == 0, index == len(opcodes) - 1)
        else:
            pieces = [(REMOVED, "".join(first_shown[a_start:a_end])), (ADDED, "".join(second_shown[b_start:b_end]))]
            pieces = [piece for piece in pieces if piece[1]]
        for kind, value in pieces:
            if isinstance(value, str) and room >= 0:
                if len(value) > room:
                    if kind == SAME and room > 0:  # the beginning of a run of context still fits
                        diff.segments.append((SAME, value[:room]))
                    diff.segments.append((CUT, diff.changes - shown_changes))
                    return diff
                room -= len(value)
            diff.segments.append((kind, value))
        shown_changes += tag != "equal"
    return diff


Opcode = tuple[str, int, int, int, int]


def diff_opcodes(first: list[str], second: list[str]) -> list[Opcode]:
    """How to turn ``first`` into ``second``, as :meth:`difflib.SequenceMatcher.get_opcodes` says it (runs of
    ``equal``, ``delete``, ``insert``, ``replace``; adjacent equal runs joined).

    Anchored first, as patience diff is: the tokens found exactly once in each sequence are matched in the longest
    run that keeps their order in both (a longest increasing subsequence), and only the stretches between two
    anchors that differ go to :class:`difflib.SequenceMatcher`. Two near-duplicates share many such tokens, so
    their stretches are short, and comparing them costs about their length rather than its square.
    """
    opcodes: list[Opcode] = []
    equal_from = (0, 0)  # where the current run of equal tokens began
    at_a, at_b = _anchors(first, second)
    # The stretches before each anchor and after the last: most are empty (two anchors in a row); only the others
    # are looked at, and of those only the ones that differ end the run of equal tokens.
    a_starts, b_starts = np.concatenate([[0], at_a + 1]), np.concatenate([[0], at_b + 1])
    a_ends, b_ends = np.append(at_a, len(first)), np.append(at_b, len(second))
    for stretch in np.flatnonzero((a_ends > a_starts) | (b_ends > b_starts)).tolist():
        a_start, a_end = int(a_starts[stretch]), int(a_ends[stretch])
        b_start, b_end = int(b_starts[stretch]), int(b_ends[stretch])
        if first[a_start:a_end] == second[b_start:b_end]:
            continue
        _add(opcodes, ("equal", *_run(equal_from, (a_start, b_start))))
        if a_start == a_end or b_start == b_end:
            _add(opcodes, ("insert" if a_start == a_end else "delete", a_start, a_end, b_start, b_end))
        else:
            matcher = difflib.SequenceMatcher(None, first[a_start:a_end], second[b_start:b_end])
            for tag, i, j, k, m in matcher.get_opcodes():
                _add(opcodes, (tag, a_start + i, a_start + j, b_start + k, b_start + m))
        equal_from = (a_end, b_end)
    _add(opcodes, ("equal", *_run(equal_from, (len(first), len(second)))))
    return opcodes


def _run(start: tuple[int, int], end: tuple[int, int]) -> tuple[int, int, int, int]:
    """The positions of an equal run from ``start`` to ``end`` (a, b each), as an opcode holds them."""
    return start[0], end[0], start[1], end[1]


def _add(opcodes: list[Opcode], opcode: Opcode) -> None:
    """Append ``opcode``, joined to the last one when both are ``equal``; an empty one is dropped."""
    tag, a_start, a_end, b_start, b_end = opcode
    if a_start == a_end and b_start == b_end:
        return
    if tag == "equal" and opcodes and opcodes[-1][0] == "equal":
        opcodes[-1] = ("equal", opcodes[-1][1], a_end, opcodes[-1][3], b_end)
        return
    opcodes.append(opcode)


def _anchors(first: list[str], second: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Positions i (int64[m], ascending) and j (int64[m], ascending) of tokens found once in each sequence with
    first[i] == second[j]: the longest such chain (patience sorting, O(m log m), when their order differs)."""
    if not first or not second:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    number = {token: index for index, token in enumerate(dict.fromkeys(first + second))}
    a = np.array([number[token] for token in first], np.int64)
    b = np.array([number[token] for token in second], np.int64)
    once = (np.bincount(a, minlength=len(number)) == 1) & (np.bincount(b, minlength=len(number)) == 1)
    at_a = np.flatnonzero(once[a])
    where_b = np.zeros(len(number), np.int64)
    where_b[b] = np.arange(b.size)  # the place in ``second`` of each token found there once
    at_b = where_b[a[at_a]]
    if at_b.size > 1 and bool((np.diff(at_b) < 0).any()):  # moved text: keep the longest chain in order
        chain = _longest_increasing(at_b.tolist())
        at_a, at_b = at_a[chain], at_b[chain]
    return at_a, at_b


def _longest_increasing(values: list[int]) -> list[int]:
    """The positions of a longest strictly increasing subsequence of ``values`` (piles of patience sorting)."""
    tops: list[int] = []  # the smallest value ending a chain of each length
    ends: list[int] = []  # which position ends it
    before = [-1] * len(values)
    for index, value in enumerate(values):
        length = bisect.bisect_left(tops, value)
        if length == len(tops):
            tops.append(value)
            ends.append(index)
        else:
            tops[length], ends[length] = value, index
        before[index] = ends[length - 1] if length else -1
    chain = []
    index = ends[-1] if ends else -1
    while index >= 0:
        chain.append(index)
        index = before[index]
    return chain[::-1]


def _unchanged(shown: list[str], context: int, first: bool, last: bool) -> list[tuple[int, str | int]]:
    """A run of unchanged tokens: whole, or its ends (none before the first difference's context, none after
    the last's) around a fold."""
    keep_before = 0 if first else context  # the end of the previous difference's context
    keep_after = 0 if last else context  # the start of the next difference's context
    hidden = len(shown) - keep_before - keep_after
    if hidden < FOLD_AT or (first and last):
        if first and last and len(shown) >= FOLD_AT:  # no difference at all: one fold says how much is the same
            return [(FOLDED, len(shown))]
        return [(SAME, "".join(shown))] if shown else []
    pieces: list[tuple[int, str | int]] = []
    if keep_before:
        pieces.append((SAME, "".join(shown[:keep_before])))
    pieces.append((FOLDED, hidden))
    if keep_after:
        pieces.append((SAME, "".join(shown[len(shown) - keep_after:])))
    return pieces


def excerpt(text: str, max_characters: int) -> tuple[str, int]:
    """The beginning of ``text`` up to ``max_characters``, cut at a space where one is near, and how many
    characters were left out."""
    if len(text) <= max_characters:
        return text, 0
    cut = text.rfind(" ", max(0, max_characters - 80), max_characters)
    end = cut if cut > 0 else max_characters
    return text[:end], len(text) - end
