"""``review``'s page: one self-contained HTML file that opens from disk, offline, in any browser.

Everything is inline: the style, the script, the pictures (SVG), and the shown groups as one JSON document that the
script turns into the list of groups and, on a click, one group's members and differences. Nothing is fetched,
and a Content-Security-Policy says so to the browser: no source at all (``default-src 'none'``) but the page's own
style and script, named by their SHA-256, so that no other script can run even if one got into the markup.

A document is data, never markup: every text of the summary is escaped (:func:`html.escape`), and the JSON is
written with ``<``, ``>``, ``&`` and the two JavaScript line separators as ``\\uXXXX`` escapes, so that nothing in
it can end its ``<script>`` element or open a comment; the script puts every id and text into the page as text
(``textContent``), never as HTML.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from dedup_cli.api.review_groups import MemberView, ReviewedGroups, ShownGroup, Similarity
from dedup_cli.api.review_texts import TextView
from dedup_cli.engine.stages.results import FindResult
from dedup_cli.estimates.half_bit import is_half_bit
from dedup_cli.options.reviewing import ReviewOptions
from dedup_cli.options.vocabulary import band_bits_label, bits_label
from dedup_cli.version import __version__

ASSETS = Path(__file__).resolve().parent
"""Where the page's style sheet and script are (``review_page.css``, ``review_page.js``, package data)."""

JSON_ESCAPES = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026", 0x2028: "\\u2028", 0x2029: "\\u2029"}


@dataclass
class PageParts:
    """What the page is written from."""

    store: str
    result: FindResult
    options: ReviewOptions
    reviewed: ReviewedGroups
    texts: list[list[TextView]]
    s_curve: str  # SVG
    histogram: str  # SVG


def script_json(value: Any) -> str:
    """``value`` as JSON that is safe inside a ``<script>`` element: no ``<``, ``>`` or ``&`` (so no ``</script>``
    and no ``<!--``), no U+2028 or U+2029; a lone surrogate, which UTF-8 cannot hold, becomes ``?``."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.translate(JSON_ESCAPES).encode("utf-8", "replace").decode("utf-8")


def _digest(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


def _modified(nanoseconds: int | None) -> str | None:
    if not nanoseconds:
        return None
    return datetime.fromtimestamp(nanoseconds / 1e9, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _similarity(similarity: Similarity) -> dict[str, Any]:
    found: dict[str, Any] = {"kind": similarity.kind}
    for name in ("estimate", "ci_low", "ci_high", "exact"):
        value = getattr(similarity, name)
        if value is not None:
            found[name] = value
    if similarity.link is not None:
        found["link"] = list(similarity.link)
    return found


def _view(view: TextView) -> dict[str, Any]:
    found: dict[str, Any] = {"kind": view.kind}
    if view.kind == "text":
        found.update(text=view.text, left_out=view.left_out)
        if view.reason:
            found["reason"] = view.reason
    elif view.diff is not None:
        diff = view.diff
        found.update(segments=[list(segment) for segment in diff.segments], changes=diff.changes,
                     removed=diff.removed_words, added=diff.added_words, compared=list(diff.compared),
                     truncated=diff.truncated)
    elif view.reason:
        found["reason"] = view.reason
    return found


def _member(member: MemberView, view: TextView | None) -> dict[str, Any]:
    found: dict[str, Any] = {"id": member.id, "action": member.action, "shingles": member.shingles,
                             "bytes": member.size, "similarity": _similarity(member.similarity)}
    if member.store is not None:
        found["store"] = member.store
    if member.run is not None:
        found["run"] = member.run
    modified = _modified(member.modified_ns)
    if modified is not None:
        found["modified"] = modified
    if view is not None:
        found["view"] = _view(view)
    return found


def _group(group: ShownGroup, views: list[TextView]) -> dict[str, Any]:
    return {"number": group.number, "size": group.size, "weakest": group.weakest, "kept": group.representative,
            "sampled": group.sampled, "drop": group.dropped, "bytes": group.dropped_bytes, "why": group.keep_reason,
            "members": [_member(member, view) for member, view in zip(group.members, views, strict=True)],
            "listed": [_member(member, None) for member in group.listed], "unlisted": group.unlisted}


def page_data(parts: PageParts) -> dict[str, Any]:
    """The JSON document the page's script reads: the shown groups and what it needs to word them."""
    return {"threshold": parts.result.threshold, "text_limit": parts.options.text_limit,
            "groups": [_group(group, views) for group, views in zip(parts.reviewed.groups, parts.texts,
                                                                   strict=True)]}


def _number(name: str, value: str, field: str, note: str = "") -> str:
    shown = f'<span class="note">{html.escape(note)}</span>' if note else ""
    return (f'<div class="number"><dt>{html.escape(name)}</dt><dd data-field="{field}">{html.escape(value)}</dd>'
            f"{shown}</div>")


def size_text(count: int) -> str:
    """Bytes as people read them: 812 B, 3.4 kB, 12.5 MB, 1.20 GB."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= size:
            return f"{count / size:.3g} {unit}" if unit == "GB" else f"{count / size:.1f} {unit}"
    return f"{count} B"


def _summary(parts: PageParts) -> str:
    result, reviewed, options = parts.result, parts.reviewed, parts.options
    verified = result.verification.checked if result.verification is not None else 0
    unsized = f"{reviewed.unsized:,} of unknown size" if reviewed.unsized else ""
    numbers = [
        _number("documents", f"{result.document_count:,}", "documents", f"{result.eligible:,} with a shingle"),
        _number("groups", f"{result.group_count:,}", "groups"),
        _number("documents to drop", f"{reviewed.dropped:,}", "dropped"),
        _number("bytes to drop", size_text(reviewed.dropped_bytes), "dropped-bytes", unsized),
        _number("pairs reported", f"{result.pair_count:,}", "pairs", f"R̂ ≥ {result.threshold:g}"),
        _number("candidates", f"{result.candidates:,}", "candidates"),
        _number("pairs checked exactly", f"{verified:,}", "verified"),
        _number("find took", f"{result.seconds:.2f} s", "seconds"),
    ]
    find = options.find
    banding = result.banding
    how = ("every pair compared" if banding is None else
           f"{banding.bands}×{banding.rows} bands on {band_bits_label(banding.band_bits)} (recall "
           f"{banding.recall_at(result.threshold):.3f} at R0)")
    used = [f"threshold R0 = {result.threshold:g}", f"b = {bits_label(result.bits)}", f"group {find.group}",
            f"keep {find.keep if find.keep_field is None else 'field ' + repr(find.keep_field)}",
            f"verify {find.verify}", f"recall {find.recall:g}", how, f"estimator: {result.estimator}"]
    if is_half_bit(result.bits):
        used[1] = "b = 1/2 (XOR bits)"
    if find.against is not None:
        used.append(f"against {find.against}" + (" (only across)" if find.only_across else ""))
    if find.new_since is not None:
        used.append(f"new since run {find.new_since}")
    others = reviewed.group_count - reviewed.largest
    sampled = len(reviewed.groups) - reviewed.largest
    which = (f"all {reviewed.group_count:,} groups" if reviewed.largest >= reviewed.group_count else
             f"the {reviewed.largest:,} largest of the {reviewed.group_count:,} groups and a random sample of "
             f"{sampled:,} of the other {others:,} (seed {options.seed})")
    shown = (f"Shown: {which}; in each, up to {options.members} members with their text, at most "
             f"{options.text_limit:,} characters of each.")
    return (f'<section id="summary"><h1>dedup review</h1><p class="lead">Store <code>{html.escape(parts.store)}'
            f"</code> · dedup {html.escape(__version__)}</p><dl class=\"numbers\">{''.join(numbers)}</dl>"
            f'<p class="used">{html.escape("; ".join(used))}</p><p class="shown">{html.escape(shown)}</p>'
            f'<div class="charts">{parts.s_curve}{parts.histogram}</div></section>')


GROUPS_SECTION = """<section id="groups"><h2>Groups</h2>
<div class="controls"><label>Filter by id <input id="filter" type="search" placeholder="part of an id"
autocomplete="off"></label> <label>Sort by <select id="sort"><option value="size">size, largest first</option>
<option value="weakest">weakest link, weakest first</option><option value="bytes">bytes to drop, most first</option>
<option value="number">group number</option></select></label> <span id="count" role="status"></span></div>
<div class="panes"><div class="list"><table id="group-table"><thead><tr><th>group</th><th>size</th>
<th>weakest link</th><th>to drop</th><th>bytes to drop</th><th>kept</th></tr></thead><tbody></tbody></table></div>
<div id="detail" class="detail" aria-live="polite"><p class="hint">Choose a group to see its members, which one is
kept and why, and how each differs from it.</p></div></div>
<noscript><p>The list of groups and their texts needs JavaScript, which this browser has turned off.</p></noscript>
</section>"""


def review_page(parts: PageParts) -> str:
    """The whole page, as text."""
    style = (ASSETS / "review_page.css").read_text(encoding="utf-8")
    script = (ASSETS / "review_page.js").read_text(encoding="utf-8")
    policy = (f"default-src 'none'; style-src '{_digest(style)}'; script-src '{_digest(script)}'; "
              "img-src 'none'; base-uri 'none'; form-action 'none'")
    return ("<!DOCTYPE html>\n"
            f'<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>dedup review of {html.escape(parts.store)}</title><style>{style}</style></head><body>"
            f"{_summary(parts)}{GROUPS_SECTION}"
            f'<script type="application/json" id="review-data">{script_json(page_data(parts))}</script>'
            f"<script>{script}</script></body></html>\n")
