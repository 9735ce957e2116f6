"""The texts ``review`` shows: each shown member read again from where it was signed, and compared word by word with
its group's representative.

Only the members shown with their text are read (each file once, as ``filter`` and the exact checks read them:
files, JSON Lines, CSV, TSV, Parquet, object storage), so the work is proportional to the page, not to the store.
A member whose stored content hash is the representative's holds the same bytes and is not read again; one that
cannot be read (gone, changed since it was signed, read from stdin, unreadable now) says why in its place. Each
text adds at most ``text_limit`` characters to the page, and the page holds at most :data:`PAGE_CHARACTERS` in all:
past that, members are shown without their text, with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from dedup_cli.api.review_groups import MemberView, ShownGroup
from dedup_cli.forked import forked_map, useful_workers
from dedup_cli.inputs.reread import reread_each
from dedup_cli.text.word_diff import DIFF_WORDS, Tokens, WordDiff, excerpt, tokens, word_diff

PAGE_CHARACTERS = 16_000_000
"""The most characters of text one page holds, whatever the options: with the markup around them, a page of
20 MB at most, which a browser opens in a few seconds."""


@dataclass
class TextView:
    """What the page shows of one member's text."""

    kind: str  # "text" (its beginning), "diff" (against the representative), "same-bytes", "unread", "left-out"
    text: str = ""  # with "text": its beginning
    left_out: int = 0  # with "text": characters not shown
    diff: WordDiff | None = None
    reason: str = ""  # with "unread" and "left-out": why no text is shown

    @property
    def characters(self) -> int:
        """The characters of text this view puts on the page."""
        if self.diff is not None:
            return sum(len(value) for _, value in self.diff.segments if isinstance(value, str))
        return len(self.text)


COMPARED_MEMBERS = 64
"""The fewest members with text worth a worker process of their own: a comparison takes 0.5 ms (300 words) to
10 ms (10,000 words), forking a worker a few milliseconds."""


def review_texts(groups: list[ShownGroup], text_limit: int, max_words: int = DIFF_WORDS,
                 page_characters: int | None = None, jobs: int = 1) -> list[list[TextView]]:
    """For each group, a :class:`TextView` per member shown with its text (``group.members``, in order); the page
    holds at most ``page_characters`` of text (None: :data:`PAGE_CHARACTERS`). The texts are read here, then
    compared group by group in up to ``jobs`` forked worker processes (the same views whatever the number)."""
    page_characters = PAGE_CHARACTERS if page_characters is None else page_characters
    reading: list[MemberView] = []
    for group in groups:
        representative = group.members[0]
        reading.append(representative)
        reading += [member for member in group.members[1:] if not _same_bytes(member, representative)]
    read = reread_each([member.location for member in reading],
                       [member.content_hash or 0 for member in reading] if all(
                           member.content_hash is not None for member in reading) else None, keep_going=True)
    texts = {id(member): found for member, found in zip(reading, read, strict=True)}

    def compared(group: ShownGroup) -> list[TextView]:
        first, why = texts[id(group.members[0])]
        first_tokens = None if first is None or len(group.members) < 2 else tokens(first, max_words)  # once a group
        return [_view(member, group.members[0], first, first_tokens, why, texts.get(id(member)), text_limit,
                      max_words) for member in group.members]

    workers = useful_workers(jobs, len(reading), COMPARED_MEMBERS)
    views = list(forked_map(compared, groups, workers, "comparing the shown texts"))
    room = page_characters
    for shown in views:
        for index, view in enumerate(shown):
            if view.characters > room:
                shown[index] = TextView("left-out", reason=f"not shown: the page holds {page_characters:,} "
                                                           "characters of text at most; show fewer groups or members, "
                                                           "or less of each")
            room -= shown[index].characters
    return views


def _same_bytes(member: MemberView, representative: MemberView) -> bool:
    return member is not representative and member.content_hash is not None and \
        member.content_hash == representative.content_hash


def _view(member: MemberView, representative: MemberView, first: str | None, first_tokens: Tokens | None,
          first_why: str | None, found: tuple[str | None, str | None] | None, text_limit: int,
          max_words: int) -> TextView:
    """One member's view: the representative's beginning, or a member's differences from it."""
    if member is representative:
        if first is None:
            return TextView("unread", reason=first_why or "")
        shown, left_out = excerpt(first, text_limit)
        return TextView("text", shown, left_out)
    if _same_bytes(member, representative):
        return TextView("same-bytes")
    assert found is not None
    text, why = found
    if text is None:
        return TextView("unread", reason=why or "")
    if first_tokens is None:  # nothing to compare with: the member's own beginning
        shown, left_out = excerpt(text, text_limit)
        return TextView("text", shown, left_out, reason="the kept member's text could not be read, so this is this "
                                                        "member's own beginning")
    return TextView("diff", diff=word_diff(first_tokens, text, max_words=max_words, max_characters=text_limit))
