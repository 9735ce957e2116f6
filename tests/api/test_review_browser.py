"""``review``'s page in a real browser (headless Chromium, over the DevTools protocol: tests/browser.py), checked for
what a person sees: the summary's numbers are find's, the filter and the orders work, a click on a group shows its
members and the changed words marked, the page asks for nothing over the network, raises no error and breaks no
rule of its own security policy, a document's ``<script>`` runs nothing, and the sample corpora's page paints fast.

Without a browser these tests are skipped, saying so; ``.ci/run`` installs Debian's ``chromium`` and sets
``DEDUP_REQUIRE_BROWSER``, under which a missing browser fails them instead.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser import Browser, chromium_path
from helpers import REPO, review_data

import dedup_cli as dedup
from dedup_cli.options.input_options import InputOptions

CHROMIUM = chromium_path()
if CHROMIUM is None:
    if os.environ.get("DEDUP_REQUIRE_BROWSER"):
        raise RuntimeError("DEDUP_REQUIRE_BROWSER is set but no chromium was found: install Debian's chromium "
                           "(apt-get install chromium) or name one in DEDUP_CHROMIUM")
    pytest.skip("no chromium on this machine (apt-get install chromium, or name one in DEDUP_CHROMIUM): the page is "
                "not opened in a browser", allow_module_level=True)

FIND = dedup.FindOptions(threshold=0.5, bits=2)
FIRST_PAINT_SECONDS = 3.0  # the page aims at 1 s (docs/commands.md gives what was measured); a shared CI machine
PAINTED = ("new Promise(done => { const seen = {}; new PerformanceObserver(list => { for (const entry of "
           "list.getEntries()) seen[entry.name] = entry.startTime; if ('first-contentful-paint' in seen) done(seen); "
           "}).observe({type: 'paint', buffered: true}); setTimeout(() => done(seen), 10000); })")
"""The page's first paint and first contentful paint, in milliseconds since it began to load (waited for)."""
ROWS = "[...document.querySelectorAll('#group-table tbody tr')]"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    assert CHROMIUM is not None
    with Browser(CHROMIUM) as opened:
        yield opened


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dedup.FindResult]:
    """The sample corpora's page, as ``make demo`` writes it, and the find it shows."""
    folder = tmp_path_factory.mktemp("demo")
    store = folder / "demo-sigs.parquet"
    dedup.sign([str(REPO / "sample_corpora")], store, dedup.SignOptions(input=InputOptions(exclude=("SOURCE",))))
    page = folder / "demo-review.html"
    report = dedup.review(store, page, dedup.ReviewOptions(FIND))
    return page, report.result


def test_the_page_paints_asks_for_nothing_and_says_what_find_says(browser: Browser,
                                                                 demo: tuple[Path, dedup.FindResult]) -> None:
    page, found = demo
    browser.open(page)
    painted = browser.evaluate(PAINTED)
    assert painted["first-contentful-paint"] / 1000 <= FIRST_PAINT_SECONDS, painted
    assert browser.requests() == [page.resolve().as_uri()]  # the file itself, and nothing else
    assert browser.problems() == []
    shown = browser.evaluate("Object.fromEntries([...document.querySelectorAll('dd[data-field]')]"
                             ".map(number => [number.dataset.field, number.innerText]))")
    assert (shown["documents"], shown["groups"], shown["dropped"], shown["pairs"]) == (
        f"{found.document_count:,}", f"{found.group_count:,}", f"{found.drop_count:,}", f"{found.pair_count:,}")
    assert found.verification is not None and shown["verified"] == f"{found.verification.checked:,}"
    assert browser.evaluate(f"{ROWS}.length") == found.group_count
    assert browser.evaluate("document.querySelectorAll('svg.chart').length") == 2


def _column(browser: Browser, index: int) -> list[str]:
    return browser.evaluate(f"{ROWS}.map(row => row.children[{index}].innerText)")


def test_the_filter_and_the_orders(browser: Browser, demo: tuple[Path, dedup.FindResult]) -> None:
    page, found = demo
    data = review_data(page.read_text("utf-8"))
    browser.open(page)
    browser.type_into("#filter", "ASV/ruth")
    expected = sorted((group for group in data["groups"]
                       if any("asv/ruth" in member["id"].lower() for member in group["members"] + group["listed"])),
                      key=lambda group: (-group["size"], group["number"]))
    assert expected and _column(browser, 0) == [str(group["number"]) for group in expected]
    assert browser.evaluate("document.getElementById('count').innerText") == \
        f"{len(expected)} of {found.group_count} groups shown"
    browser.type_into("#filter", "")
    browser.evaluate("(() => { const box = document.getElementById('sort'); box.value = 'weakest'; "
                     "box.dispatchEvent(new Event('change')); })()")
    weakest = [float(value) for value in _column(browser, 2)]
    assert len(weakest) == found.group_count and weakest == sorted(weakest)
    browser.evaluate("(() => { const box = document.getElementById('sort'); box.value = 'bytes'; "
                     "box.dispatchEvent(new Event('change')); })()")
    by_bytes = [group["bytes"] for group in sorted(data["groups"], key=lambda g: (-g["bytes"], g["number"]))]
    numbers = [int(value) for value in _column(browser, 0)]
    assert [next(g["bytes"] for g in data["groups"] if g["number"] == n) for n in numbers] == by_bytes


def test_a_click_shows_a_group_and_its_changed_words(browser: Browser, demo: tuple[Path, dedup.FindResult]) -> None:
    page, _ = demo
    data = review_data(page.read_text("utf-8"))
    group = next(group for group in data["groups"] if group["kept"] == "bible-editions/AKJV/jonah-01.txt")
    browser.open(page)
    browser.type_into("#filter", "AKJV/jonah-01")
    browser.click(f"#group-table tbody tr[data-group='{group['number']}'] button")
    assert browser.evaluate("location.hash") == f"#group-{group['number']}"
    heading = browser.evaluate("document.querySelector('#detail h3').innerText")
    assert heading.startswith(f"Group {group['number']}: {group['size']} members")
    blocks = browser.evaluate("[...document.querySelectorAll('#detail .member')].map(block => [block.dataset.id, "
                              "[...block.querySelectorAll('del')].map(e => e.textContent), "
                              "[...block.querySelectorAll('ins')].map(e => e.textContent)])")
    assert [identifier for identifier, _, _ in blocks] == [member["id"] for member in group["members"]]
    for (identifier, removed, added), member in zip(blocks, group["members"], strict=True):
        segments = member["view"].get("segments", [])
        assert removed == [value for kind, value in segments if kind == 1], identifier
        assert added == [value for kind, value in segments if kind == 2], identifier
    assert sum(len(added) for _, _, added in blocks) > 10
    marked = browser.evaluate("getComputedStyle(document.querySelector('#detail ins')).backgroundColor")
    assert marked not in ("rgba(0, 0, 0, 0)", "transparent")  # the added words stand out
    browser.click("#detail .toolbar button:nth-child(2)")  # side by side
    assert browser.evaluate("document.querySelectorAll('#detail .sides').length") == sum(
        1 for member in group["members"] if member["view"]["kind"] == "diff" and member["view"]["changes"])
    assert browser.problems() == [] and len(browser.requests()) == 1


def test_a_group_named_in_the_address_opens_with_the_page(browser: Browser,
                                                          demo: tuple[Path, dedup.FindResult]) -> None:
    page, _ = demo
    browser.open(page, "#group-3")
    assert browser.evaluate("document.querySelector('#detail h3').innerText").startswith("Group 3: ")


def test_a_documents_script_runs_nothing_and_shows_as_text(browser: Browser, tmp_path: Path) -> None:
    attack = ("<script>window.pwned = 1</script><img src=x onerror=\"window.pwned = 2\"> </textarea> <!-- "
              "</script><script>window.pwned = 3</script> \" ' <style>body{display:none}</style> ")
    words = " ".join(f"word{index}" for index in range(150))
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text(attack + words)
    evil = "<img src=x onerror=window.pwned=4><script>window.pwned=5.txt"  # kept: it sorts first
    (corpus / evil).write_text(attack + words.replace("word9 ", "<b>bold</b> "))
    store = tmp_path / "sigs.parquet"
    dedup.sign([str(corpus)], store)
    page = tmp_path / "review.html"
    dedup.review(store, page, dedup.ReviewOptions(dedup.FindOptions(threshold=0.5)))
    browser.open(page)
    browser.click("#group-table tbody tr button")
    assert browser.evaluate("typeof window.pwned") == "undefined"
    assert browser.evaluate("document.querySelectorAll('img, b, #detail script, #detail style').length") == 0
    text = browser.evaluate("document.getElementById('detail').innerText")
    assert "<script>window.pwned = 1</script>" in text and f"Kept: {evil}." in text
    assert browser.evaluate("[...document.querySelectorAll('#detail del, #detail ins')].map(e => e.textContent)") \
        == ["<b>bold</b> ", "word9 "]
    assert browser.evaluate("getComputedStyle(document.body).display") == "block"
    assert browser.problems() == [] and browser.requests() == [page.resolve().as_uri()]


def test_the_policy_stops_a_script_that_got_into_the_markup(browser: Browser, tmp_path: Path,
                                                           demo: tuple[Path, dedup.FindResult]) -> None:
    # Were escaping ever to fail, the page's Content-Security-Policy still runs no script but its own.
    page, _ = demo
    tampered = tmp_path / "tampered.html"
    tampered.write_text(page.read_text("utf-8").replace("<h1>", "<script>window.pwned = 1</script><h1>", 1))
    browser.open(tampered)
    assert browser.evaluate("typeof window.pwned") == "undefined"
    assert any("Content Security Policy" in problem for problem in browser.problems())
    assert browser.evaluate(f"{ROWS}.length") > 0  # its own script still ran


def test_the_screenshot_of_the_demo_shows_a_group(browser: Browser, demo: tuple[Path, dedup.FindResult],
                                                  tmp_path: Path) -> None:
    page, _ = demo
    browser.open(page, "#group-1")
    picture = browser.screenshot()
    assert picture[:8] == b"\x89PNG\r\n\x1a\n" and len(picture) > 20_000
    width, height = int.from_bytes(picture[16:20], "big"), int.from_bytes(picture[20:24], "big")
    assert (width, height) == (browser.width, browser.height)


def measured(browser: Browser, page: Path) -> dict[str, Any]:
    """First paint and load of ``page``, in milliseconds (for docs/commands.md)."""
    browser.open(page)
    painted = browser.evaluate(PAINTED)
    load = browser.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd")
    return {"first-contentful-paint": painted.get("first-contentful-paint"), "load": load,
            "bytes": page.stat().st_size, "rows": browser.evaluate(f"{ROWS}.length")}


def screenshot(browser: Browser, page: str, out: Path) -> None:
    """A picture of ``page`` (a path, with ``#group-N`` to open a group) as a person first sees it, in 256 colours
    (what docs/review-sample-corpora.png is)."""
    import io

    from PIL import Image

    path, _, fragment = page.partition("#")
    browser.open(Path(path), f"#{fragment}" if fragment else "")
    browser.evaluate(PAINTED)
    with Image.open(io.BytesIO(browser.screenshot())) as image:
        image.convert("RGB").quantize(colors=256, method=Image.Quantize.FASTOCTREE).save(out, optimize=True)


if __name__ == "__main__":
    # PYTHONPATH=tests python tests/api/test_review_browser.py PAGE.html...: what each page costs to open;
    # PYTHONPATH=tests python tests/api/test_review_browser.py --screenshot OUT.png PAGE.html#group-N: its picture
    # (docs/review-sample-corpora.png: make demo's page, #group-1, in a window of 1280 × 1400).
    import sys

    assert CHROMIUM is not None
    if sys.argv[1] == "--screenshot":
        with Browser(CHROMIUM, width=1280, height=1400) as opened:
            screenshot(opened, sys.argv[3], Path(sys.argv[2]))
    else:
        with Browser(CHROMIUM) as opened:
            for name in sys.argv[1:]:
                print(name, json.dumps(measured(opened, Path(name))))
