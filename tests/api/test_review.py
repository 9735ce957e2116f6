"""``dedup.review``: the page says what find found (the same numbers), shows the groups asked for, reads only their
texts, from every kind of input, says in place why a text is missing, treats every document as data, and stays
within its size bounds."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import REPO, page_scripts, review_data

import dedup_cli as dedup
from dedup_cli.api import review_texts
from dedup_cli.errors import OptionError
from dedup_cli.options.input_options import InputOptions

BIBLE = REPO / "sample_corpora" / "bible-editions"
FIND = dedup.FindOptions(threshold=0.5, bits=2)
WORDS = [f"word{index}" for index in range(200)]


def _text(replaced: dict[int, str]) -> str:
    return " ".join(replaced.get(index, word) for index, word in enumerate(WORDS))


@pytest.fixture(scope="module")
def bible(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dedup.ReviewReport]:
    """The bible editions' store, and its review page at the defaults."""
    folder = tmp_path_factory.mktemp("bible")
    store = folder / "sigs.parquet"
    dedup.sign([str(BIBLE)], store, dedup.SignOptions(input=InputOptions(exclude=("SOURCE",))))
    page = folder / "review.html"
    return store, page, dedup.review(store, page, dedup.ReviewOptions(FIND))


def _numbers(page: str) -> dict[str, str]:
    return dict(re.findall(r'<dd data-field="([\w-]+)">([^<]*)</dd>', page))


def test_the_summary_numbers_are_finds(bible: tuple[Path, Path, dedup.ReviewReport]) -> None:
    store, path, report = bible
    page = path.read_text("utf-8")
    found = dedup.find(store, FIND)
    numbers = _numbers(page)
    assert numbers["documents"] == f"{found.document_count:,}" == "48"
    assert numbers["groups"] == str(found.group_count) == "9" and report.groups == 9
    assert numbers["dropped"] == str(found.drop_count) == "28" == str(report.dropped)
    assert numbers["pairs"] == str(found.pair_count) and numbers["candidates"] == str(found.candidates)
    assert found.verification is not None and numbers["verified"] == str(found.verification.checked)
    # the bytes to drop are the store's sizes of the dropped members, files here
    dropped = [member.id for member in found.members() if member.action == "drop"]
    assert report.dropped_bytes == sum((BIBLE / name).stat().st_size for name in dropped)
    data = review_data(page)
    by_size = sorted(found.groups(), key=lambda group: (-len(group.ids), group.number))
    assert [group["number"] for group in data["groups"]] == [group.number for group in by_size]
    for group, expected in zip(sorted(data["groups"], key=lambda g: g["number"]), found.groups(), strict=True):
        assert group["kept"] == expected.representative and group["size"] == len(expected.ids)
        assert {member["id"] for member in group["members"]} == set(expected.ids)
        assert group["members"][0]["id"] == expected.representative and group["members"][0]["action"] == "keep"
        assert group["why"] == "keep first: the first member in id order"
    assert "<svg" in page and "35×3 bands on 16 bits" in page and "R0 = 0.5" in page


def test_each_member_says_how_alike_it_is_and_how_find_knows(bible: tuple[Path, Path, dedup.ReviewReport]) -> None:
    store, path, _ = bible
    found = dedup.find(store, FIND)
    pairs = {frozenset((pair.id_a, pair.id_b)): pair for pair in found.pairs()}
    data = review_data(path.read_text("utf-8"))
    kinds = set()
    for group in data["groups"]:
        for member in group["members"][1:]:
            similarity = member["similarity"]
            kinds.add(similarity["kind"])
            pair = pairs.get(frozenset((member["id"], group["kept"])))
            if pair is not None:  # an accepted pair: find's own numbers
                assert similarity["kind"] == "accepted" and similarity["estimate"] == pair.estimate
                assert (similarity["ci_low"], similarity["ci_high"]) == (pair.ci_low, pair.ci_high)
                assert similarity.get("exact") == pair.exact
            else:  # scored from the signatures, with its interval, and the link that holds it in the group
                assert similarity["kind"] == "scored"
                assert similarity["ci_low"] <= similarity["estimate"] <= similarity["ci_high"]
                other, value = similarity["link"]
                assert frozenset((member["id"], other)) in pairs and value >= 0.5
    assert kinds == {"accepted", "scored"}


def test_a_group_shows_its_texts_and_their_word_differences(bible: tuple[Path, Path, dedup.ReviewReport]) -> None:
    _, path, _ = bible
    data = review_data(path.read_text("utf-8"))
    group = next(group for group in data["groups"] if group["kept"] == "AKJV/jonah-01.txt")
    first = group["members"][0]["view"]
    assert first["kind"] == "text" and first["text"].startswith((BIBLE / "AKJV/jonah-01.txt").read_text()[:200])
    kjv = next(member for member in group["members"] if member["id"] == "KJV/jonah-01.txt")["view"]
    assert kjv["kind"] == "diff" and kjv["changes"] > 0
    removed = " ".join(value for kind, value in kjv["segments"] if kind == 1)
    added = " ".join(value for kind, value in kjv["segments"] if kind == 2)
    assert removed and added and "[0, " not in removed  # texts, not lists
    assert sum(len(value) for _, value in kjv["segments"] if isinstance(value, str)) <= data["text_limit"]


def test_the_largest_groups_and_a_seeded_sample_of_the_others(tmp_path: Path,
                                                              bible: tuple[Path, Path, dedup.ReviewReport]) -> None:
    store, _, _ = bible
    pages = []
    for seed in (1, 1, 2):
        page = tmp_path / f"review-{seed}.html"
        report = dedup.review(store, page, dedup.ReviewOptions(FIND, groups=2, sample=3, seed=seed, members=2))
        assert (report.shown, report.largest) == (5, 2)
        pages.append(review_data(page.read_text("utf-8")))
    first, again, other = pages
    assert first == again  # the same seed, the same page data
    assert [group["sampled"] for group in first["groups"]] == [False, False, True, True, True]
    assert [group["size"] for group in first["groups"][:2]] == [5, 5]
    assert first["groups"][2:] != other["groups"][2:]
    for group in first["groups"]:
        assert len(group["members"]) == 2 and len(group["members"]) + len(group["listed"]) == group["size"]
        assert all("view" not in member for member in group["listed"])


def test_only_the_shown_members_texts_are_read(bible: tuple[Path, Path, dedup.ReviewReport], tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    store, _, _ = bible
    asked: list[str] = []
    reread = review_texts.reread_each

    def counting(locations: list[str], *arguments: Any, **options: Any) -> Any:
        asked.extend(locations)
        return reread(locations, *arguments, **options)

    monkeypatch.setattr(review_texts, "reread_each", counting)
    dedup.review(store, tmp_path / "one.html", dedup.ReviewOptions(FIND, groups=1, sample=0, members=3))
    assert len(asked) == 3 and all("jonah-01.txt" in location for location in asked)


def test_documents_are_data_never_markup_or_script(tmp_path: Path) -> None:
    hostile = ('He said "stop" & left. <script>window.pwned = 1</script> </textarea> <!-- a comment --> '
               "</script><script>alert('x')</script> <img src=x onerror=alert(1)> \u2028 'quoted' ")
    corpus = tmp_path / 'corpus <i>"&'
    corpus.mkdir()
    (corpus / "base.txt").write_text(hostile + _text({}))
    (corpus / "evil <script>.txt").write_text(hostile + _text({5: "</script>", 50: "<!--"}))
    store = tmp_path / "s <b>.parquet"
    dedup.sign([str(corpus)], store)
    page_path = tmp_path / "review.html"
    dedup.review(store, page_path, dedup.ReviewOptions(dedup.FindOptions(threshold=0.5)))
    page = page_path.read_text("utf-8")
    scripts = page_scripts(page)
    assert [attributes.get("id") for attributes, _ in scripts] == ["review-data", None]  # the page's two alone
    assert page.count("</script") == 2 and "<!--" not in page and "<img" not in page and "<i>" not in page
    assert "\u2028" not in page
    data = review_data(page)
    [group] = data["groups"]
    assert {member["id"] for member in group["members"]} == {"base.txt", "evil <script>.txt"}
    assert group["members"][0]["view"]["text"] == hostile + _text({})  # the same characters, parsed back
    diff = group["members"][1]["view"]
    assert [value for kind, value in diff["segments"] if kind == 2] == ["</script> ", "<!-- "]
    assert f"<code>{str(store).replace('<', '&lt;').replace('>', '&gt;')}</code>" in page


def test_the_policy_names_the_pages_own_script_and_style_alone(bible: tuple[Path, Path, dedup.ReviewReport]) -> None:
    _, path, _ = bible
    page = path.read_text("utf-8")
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)
    assert policy is not None
    rules = dict(rule.strip().split(" ", 1) for rule in policy.group(1).split(";"))
    [(_, script)] = [(attributes, text) for attributes, text in page_scripts(page) if "type" not in attributes]
    style = re.search(r"<style>(.*?)</style>", page, re.DOTALL)
    assert style is not None

    def digest(text: str) -> str:
        return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"

    assert rules == {"default-src": "'none'", "style-src": digest(style.group(1)), "script-src": digest(script),
                     "img-src": "'none'", "base-uri": "'none'", "form-action": "'none'"}
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "") and "https://" not in page


def test_a_member_that_cannot_be_read_says_why_in_its_place(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name, replaced in (("a.txt", {}), ("b.txt", {3: "x"}), ("c.txt", {9: "y"}), ("d.txt", {20: "z"})):
        (corpus / name).write_text(_text(replaced))
    store = tmp_path / "sigs.parquet"
    dedup.sign([str(corpus)], store)
    (corpus / "b.txt").unlink()
    (corpus / "c.txt").write_text(_text({9: "changed"}))
    page = tmp_path / "review.html"
    report = dedup.review(store, page, dedup.ReviewOptions(dedup.FindOptions(threshold=0.5)))
    [group] = review_data(page.read_text("utf-8"))["groups"]
    views = {member["id"]: (member["action"], member["view"]) for member in group["members"]}
    assert views["a.txt"][1]["kind"] == "text" and views["d.txt"][1]["kind"] == "diff"
    for name in ("b.txt", "c.txt"):
        action, view = views[name]
        assert action == "gone" and view["kind"] == "unread", views
    assert "gone" in views["b.txt"][1]["reason"] and "changed since it was signed" in views["c.txt"][1]["reason"]
    assert report.unread == 2


def _records(tmp_path: Path) -> dict[str, str]:
    return {"one": _text({}), "two": _text({7: "changed"}), "three": _text({150: "other", 151: "words"})}


@pytest.mark.parametrize("kind", ["jsonl", "csv", "tsv", "parquet"])
def test_texts_are_read_again_from_records(tmp_path: Path, kind: str) -> None:
    texts = _records(tmp_path)
    path = tmp_path / f"records.{kind}"
    if kind == "jsonl":
        path.write_text("".join(json.dumps({"id": key, "text": text}) + "\n" for key, text in texts.items()))
    elif kind == "parquet":
        pq.write_table(pa.table({"id": list(texts), "text": list(texts.values())}), path)
    else:
        separator = "," if kind == "csv" else "\t"
        path.write_text("id" + separator + "text\n" + "".join(f"{key}{separator}{text}\n"
                                                              for key, text in texts.items()))
    store = tmp_path / "sigs.parquet"
    dedup.sign([str(path)], store, dedup.SignOptions(input=InputOptions(id_field="id", text_field="text")))
    page = tmp_path / "review.html"
    dedup.review(store, page, dedup.ReviewOptions(dedup.FindOptions(threshold=0.5)))
    [group] = review_data(page.read_text("utf-8"))["groups"]
    members = {member["id"]: member["view"] for member in group["members"]}
    assert members["one"] == {"kind": "text", "text": texts["one"], "left_out": 0}
    changed = [value for kind, value in members["two"]["segments"] if kind in (1, 2)]
    assert changed == ["word7 ", "changed "]


def test_the_page_stays_within_its_bounds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(5)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for family in range(12):
        base = [f"v{value}" for value in rng.integers(0, 10**6, 3000)]
        for member in range(4):
            words = [word if rng.random() > 0.02 else "EDIT" for word in base]
            (corpus / f"f{family:02d}-{member}.txt").write_text(" ".join(words))
    store = tmp_path / "sigs.parquet"
    dedup.sign([str(corpus)], store)
    page = tmp_path / "review.html"
    report = dedup.review(store, page, dedup.ReviewOptions(dedup.FindOptions(threshold=0.5), text_limit=1000))
    assert report.groups == 12 and report.members == 48
    data = review_data(page.read_text("utf-8"))
    for group in data["groups"]:
        for member in group["members"]:
            view = member["view"]
            shown = view.get("text", "") + "".join(value for _, value in view.get("segments", []) if
                                                   isinstance(value, str))
            assert len(shown) <= 1000
    assert report.page_bytes < 48 * 1000 * 1.2 + 60_000  # the texts, their escapes, and the page around them
    # Past the page's budget of characters, members are shown without their text, and say why.
    monkeypatch.setattr(review_texts, "PAGE_CHARACTERS", 5000)
    report = dedup.review(store, page, dedup.ReviewOptions(dedup.FindOptions(threshold=0.5), text_limit=1000))
    views = [member["view"] for group in review_data(page.read_text("utf-8"))["groups"] for member in group["members"]]
    assert 3 <= sum(view["kind"] != "left-out" for view in views) <= 6
    assert "the page holds 5,000 characters of text at most" in views[-1]["reason"]


def test_the_kept_member_is_explained_by_the_rule_that_kept_it(tmp_path: Path,
                                                               bible: tuple[Path, Path, dedup.ReviewReport]) -> None:
    store, _, _ = bible
    page = tmp_path / "longest.html"
    dedup.review(store, page, dedup.ReviewOptions(dedup.FindOptions(threshold=0.5, bits=2, keep="longest")))
    for group in review_data(page.read_text("utf-8"))["groups"]:
        kept = group["members"][0]
        assert kept["action"] == "keep" and kept["id"] == group["kept"]
        assert group["why"] == (f"keep longest: the member with the most shingles ({kept['shingles']:,}); ties go "
                                "to the smallest id")
        assert all(member["shingles"] <= kept["shingles"] for member in group["members"] + group["listed"])


def test_a_directory_is_refused_and_a_failed_run_leaves_the_page(tmp_path: Path,
                                                                 bible: tuple[Path, Path, dedup.ReviewReport]) -> None:
    store, _, _ = bible
    with pytest.raises(OptionError, match="is a directory; name the page's file"):
        dedup.review(store, tmp_path, dedup.ReviewOptions(FIND))
    page = tmp_path / "review.html"
    page.write_text("the page before")
    with pytest.raises(OptionError, match="bits 17 exceeds"):  # a default store keeps 16 bits
        dedup.review(store, page, dedup.ReviewOptions(dedup.FindOptions(bits=17)))
    assert page.read_text() == "the page before"
    dedup.review(store, page, dedup.ReviewOptions(FIND))
    assert page.read_text("utf-8").startswith("<!DOCTYPE html>") and not list(tmp_path.glob("*.tmp*"))


def test_when_the_kept_text_cannot_be_read_the_others_show_their_own(bible: tuple[Path, Path, dedup.ReviewReport],
                                                                     tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    store, _, _ = bible
    reread = review_texts.reread_each

    def failing(locations: list[str], *arguments: Any, **options: Any) -> Any:
        found = reread(locations, *arguments, **options)
        return [(None, "cannot re-read it now: Permission denied") if location.endswith("AKJV/jonah-01.txt")
                else result for location, result in zip(locations, found, strict=True)]

    monkeypatch.setattr(review_texts, "reread_each", failing)
    page = tmp_path / "review.html"
    report = dedup.review(store, page, dedup.ReviewOptions(FIND, groups=1, sample=0, members=3))
    [group] = review_data(page.read_text("utf-8"))["groups"]
    kept, *others = group["members"]
    assert kept["view"] == {"kind": "unread", "reason": "cannot re-read it now: Permission denied"}
    for member in others:
        assert member["view"]["kind"] == "text" and "could not be read" in member["view"]["reason"]
        assert member["view"]["text"] == (BIBLE / member["id"]).read_text("utf-8")
    assert report.unread == 1
