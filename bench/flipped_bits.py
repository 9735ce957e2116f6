"""Flip one random bit of a store's part at a time and read it as dedup does: refused, or the same values?

Usage: python bench/flipped_bits.py PART [--flips 4000] [--seed 1]

Each flip is written to a copy of the part, which is opened and read whole through the store's reader
(:class:`dedup_cli.store.snapshot.StorePart`: columns checked, page checksums verified). Counts, by where the bit
fell (a dictionary page's column chunk bytes, a data page's, the footer, the opening magic bytes): refused with a
``StoreError``, read with every value as before, or read with other values (which must never happen).
"""

from __future__ import annotations

import argparse
import collections
import random
import shutil
import tempfile
from pathlib import Path

import pyarrow.parquet as pq

from dedup_cli.errors import StoreError
from dedup_cli.store.snapshot import open_part


def regions(path: Path) -> tuple[int, list[tuple[int, int, int]]]:
    """Where the footer starts, and (start, first data page, end) of every column chunk."""
    metadata = pq.ParquetFile(path).metadata
    data = path.read_bytes()
    chunks = []
    for group in range(metadata.num_row_groups):
        for number in range(metadata.num_columns):
            column = metadata.row_group(group).column(number)
            start = column.dictionary_page_offset if column.has_dictionary_page else column.data_page_offset
            chunks.append((start, column.data_page_offset, start + column.total_compressed_size))
    return len(data) - 8 - int.from_bytes(data[-8:-4], "little"), chunks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", type=Path)
    parser.add_argument("--flips", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=1)
    options = parser.parse_args()
    memory = Path("/dev/shm")  # each flip is a whole copy of the part: in memory where there is a place for it
    with tempfile.TemporaryDirectory(dir=memory if memory.is_dir() else None) as scratch:
        folder = Path(scratch)
        shutil.copy(options.part, folder / "clean.parquet")
        expected = open_part(folder, "clean.parquet").read().replace_schema_metadata(None)
        data = (folder / "clean.parquet").read_bytes()
        footer, chunks = regions(folder / "clean.parquet")

        def region(position: int) -> str:
            if position < 4:
                return "magic bytes"
            if position >= footer:
                return "footer"
            for start, data_page, end in chunks:
                if start <= position < end:
                    return "dictionary pages" if position < data_page else "data pages"
            return "between chunks"

        rng = random.Random(options.seed)
        counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
        for _ in range(options.flips):
            position = rng.randrange(len(data))
            changed = bytearray(data)
            changed[position] ^= 1 << rng.randrange(8)
            (folder / "part.parquet").write_bytes(changed)
            try:
                table = open_part(folder, "part.parquet").read().replace_schema_metadata(None)
                outcome = "same values" if table.equals(expected) else "OTHER VALUES"
            except StoreError:
                outcome = "refused"
            counts[region(position)][outcome] += 1
    print(f"{options.part}: {len(data)} bytes, {options.flips} flips (seed {options.seed})\n")
    print("| where | flips | refused | same values | other values |\n|---|---|---|---|---|")
    for where, outcome in sorted(counts.items()):
        print(f"| {where} | {sum(outcome.values())} | {outcome['refused']} | {outcome['same values']} | "
              f"{outcome['OTHER VALUES']} |")


if __name__ == "__main__":
    main()
