"""The word-level differences ``review`` shows: hand-made cases, the properties every diff must have (the segments
rebuild both texts, the opcodes turn one token list into the other), folding and the bounds on what is shown."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from dedup_cli.text.word_diff import (
    ADDED,
    CUT,
    FOLD_AT,
    FOLDED,
    REMOVED,
    SAME,
    diff_opcodes,
    excerpt,
    tokens,
    word_diff,
)


def _rebuilt(segments: list[tuple[int, str | int]], side: int) -> str:
    """The text of one side of unfolded, uncut segments: the first (SAME and REMOVED) or the second (SAME and
    ADDED)."""
    return "".join(str(value) for kind, value in segments if kind == SAME or kind == side)


def test_a_changed_word_is_removed_then_added_and_the_rest_is_the_same() -> None:
    diff = word_diff("the quick brown fox jumps", "the quick red fox jumps", context=2)
    assert diff.segments == [(SAME, "the quick "), (REMOVED, "brown "), (ADDED, "red "), (SAME, "fox jumps ")]
    assert (diff.changes, diff.removed_words, diff.added_words, diff.identical) == (1, 1, 1, False)


def test_punctuation_is_a_token_and_white_space_is_no_difference() -> None:
    diff = word_diff("Call me Ishmael. Some years ago", "Call me   Ishmael!\nSome years ago")
    assert [(kind, value) for kind, value in diff.segments if kind != SAME] == [(REMOVED, ". "), (ADDED, "!\n")]
    assert word_diff("a b\n c", "a  b c").identical


def test_long_unchanged_runs_are_folded_around_the_differences() -> None:
    words = [f"w{index}" for index in range(200)]
    changed = list(words)
    changed[100] = "CHANGED"
    diff = word_diff(" ".join(words), " ".join(changed), context=5)
    kinds = [kind for kind, _ in diff.segments]
    assert kinds == [FOLDED, SAME, REMOVED, ADDED, SAME, FOLDED]
    assert diff.segments[0] == (FOLDED, 95) and diff.segments[-1] == (FOLDED, 94)
    assert diff.segments[1] == (SAME, "w95 w96 w97 w98 w99 ")
    # Between two differences, a run that would hide fewer than FOLD_AT tokens is shown whole.
    for length, folded in ((2 * 5 + FOLD_AT - 1, False), (2 * 5 + FOLD_AT, True)):
        middle = " ".join(words[:length])
        between = word_diff(f"x {middle} x", f"y {middle} y", context=5)
        assert (FOLDED in [kind for kind, _ in between.segments]) == folded, length


def test_identical_texts_are_one_fold() -> None:
    text = " ".join(f"w{index}" for index in range(50))
    diff = word_diff(text, text)
    assert diff.identical and diff.segments == [(FOLDED, 50)]
    assert word_diff("a b", "a b").segments == [(SAME, "a b ")]
    assert word_diff("", "").segments == [] and word_diff("", "").identical


def test_what_is_shown_stops_at_the_characters_allowed() -> None:
    first = " ".join(f"word{index}" for index in range(2000))
    second = " ".join(f"word{index}" if index % 10 else f"other{index}" for index in range(2000))
    diff = word_diff(first, second, max_characters=500)
    shown = sum(len(value) for _, value in diff.segments if isinstance(value, str))
    assert shown <= 500
    assert diff.segments[-1][0] == CUT and 0 < int(diff.segments[-1][1]) < diff.changes
    assert diff.changes == 200


def test_only_the_first_words_are_compared() -> None:
    first = " ".join(["same"] * 50 + ["tail-a"] * 10)
    second = " ".join(["same"] * 50 + ["tail-b"] * 10)
    diff = word_diff(first, second, max_words=50)
    assert diff.identical and diff.truncated and diff.compared == (50, 50)
    found = tokens("a, b  c", limit=2)
    assert found.keys == ["a", ","] and found.shown == ["a", ", "] and found.cut
    long_text = "x " * 10_000  # walked only as far as the limit
    assert tokens(long_text, limit=3) == (["x", "x", "x"], ["x ", "x ", "x "], True)


def test_an_excerpt_ends_at_a_space_and_counts_what_it_left_out() -> None:
    text = "alpha beta gamma delta " * 20
    shown, left_out = excerpt(text, 50)
    assert len(shown) <= 50 and text.startswith(shown) and not shown.endswith("a b")
    assert len(shown) + left_out == len(text) and text[len(shown)] == " "
    assert excerpt("short", 50) == ("short", 0)


def _apply(first: list[str], second: list[str], opcodes: list[tuple[str, int, int, int, int]]) -> list[str]:
    rebuilt: list[str] = []
    a_next = b_next = 0
    for tag, a_start, a_end, b_start, b_end in opcodes:
        assert (a_start, b_start) == (a_next, b_next), "opcodes must follow each other"
        if tag == "equal":
            assert first[a_start:a_end] == second[b_start:b_end]
        rebuilt += second[b_start:b_end]
        a_next, b_next = a_end, b_end
    assert (a_next, b_next) == (len(first), len(second))
    return rebuilt


WORDS = st.lists(st.sampled_from(["a", "b", "c", "d", "e", "the", "x", "y", ",", "."]), max_size=60)


@given(first=WORDS, second=WORDS)
def test_the_opcodes_turn_the_first_into_the_second(first: list[str], second: list[str]) -> None:
    assert _apply(first, second, diff_opcodes(first, second)) == second


@given(first=WORDS, edits=st.lists(st.tuples(st.integers(0, 59), st.sampled_from(["z", "q", ""])), max_size=8))
def test_the_segments_rebuild_both_texts(first: list[str], edits: list[tuple[int, str]]) -> None:
    second = list(first)
    for place, word in edits:
        if place < len(second):
            second[place] = word
    second = [word for word in second if word]
    a, b = " ".join(first), " ".join(second)
    diff = word_diff(a, b, context=10**6)  # nothing folded, unless it is all the same
    assert diff.identical == (tokens(a).keys == tokens(b).keys)
    if diff.identical:
        assert {kind for kind, _ in diff.segments} <= {SAME, FOLDED}
        return
    assert tokens(_rebuilt(diff.segments, REMOVED)).keys == tokens(a).keys
    assert tokens(_rebuilt(diff.segments, ADDED)).keys == tokens(b).keys


def test_anchoring_keeps_a_long_near_duplicate_fast_and_small() -> None:
    rng = random.Random(3)
    first = [f"w{rng.randrange(5000)}" for _ in range(10_000)]
    second = [word if rng.random() > 0.02 else "CHANGED" for word in first]
    opcodes = diff_opcodes(first, second)
    assert _apply(first, second, opcodes) == second
    changed = sum(a_end - a_start for tag, a_start, a_end, _, _ in opcodes if tag != "equal")
    assert changed == sum(x != y for x, y in zip(first, second, strict=True))
