"""Shared fixtures: paths to the bundled corpora and small hand-made corpora."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import settings

# Property tests are deterministic (the same examples on every run and machine) and have no per-example
# deadline: CI machines are shared, and a slow example is not a failure.
settings.register_profile("deterministic", derandomize=True, deadline=None)
settings.load_profile("deterministic")

REPO = Path(__file__).resolve().parent.parent
SAMPLE_CORPORA = REPO / "sample_corpora"


@pytest.fixture
def bible_dir() -> Path:
    return SAMPLE_CORPORA / "bible-editions"


@pytest.fixture
def small_corpus(tmp_path: Path) -> Path:
    """Three near-identical documents, one unrelated, one empty, one too short to shingle, one binary."""
    base = " ".join(f"word{i}" for i in range(200))
    corpus = tmp_path / "corpus"
    (corpus / "sub").mkdir(parents=True)
    (corpus / "a.txt").write_text(base)
    (corpus / "b.txt").write_text(base.replace("word10 ", "changed "))
    (corpus / "sub" / "c.txt").write_text(base + " extra words at the end")
    (corpus / "unrelated.txt").write_text(" ".join(f"other{i}" for i in range(200)))
    (corpus / "empty.txt").write_text("")
    (corpus / "short.txt").write_text("too short")
    (corpus / "image.bin").write_bytes(b"\x89PNG\x00\x00binary")
    return corpus
