"""How ``sign`` and ``filter`` find and read their inputs."""

from __future__ import annotations

from dataclasses import dataclass

from dedup_cli.errors import OptionError
from dedup_cli.options.checks import at_least, choice, in_range, set_fields
from dedup_cli.options.vocabulary import INPUT_FORMATS, MAX_SET_UNIVERSE


@dataclass(frozen=True)
class InputOptions:
    """How to find and read inputs; the defaults read files and directories as plain text.

    Attributes:
        input_format: one of :data:`INPUT_FORMATS`.
        id_field, text_field: the JSON Lines and JSON array keys, or CSV, TSV and Parquet columns, of the id (None:
            ``FILE:LINE``, ``FILE:N`` for the N-th record of a CSV or TSV file or element of a JSON array,
            ``FILE:ROW`` for Parquet) and of the text.
        id_column, text_column: the same for Parquet; each defaults to its ``*_field`` (and each ``*_field`` to it),
            so that one name serves every format (two different names: ``*_column`` for Parquet, ``*_field`` for
            the others).
        files_from: a file listing inputs, one a line (``-``: stdin); ``null_separated``: NUL-separated.
        include, exclude: glob patterns for files found in directories or listed by ``files_from``.
        max_document_bytes: skip (and report) documents larger than this; None for no limit.
        universe: with ``input_format="sets"``, the universe D the integer elements lie in, [0, D).
        id_root: the directory file ids are relative to (None: the store's, else the inputs' deepest
            common directory).
    """

    input_format: str = "auto"
    id_field: str | None = None
    text_field: str = "text"
    id_column: str | None = None
    text_column: str = "text"
    files_from: str | None = None
    null_separated: bool = False
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    max_document_bytes: int | None = None
    universe: int | None = None
    id_root: str | None = None

    def __post_init__(self) -> None:
        set_fields(self, include=tuple(self.include), exclude=tuple(self.exclude))
        # One option names the id (and one the text) in every format; the Parquet spelling is its alias.
        if self.id_column is None or self.id_field is None:
            set_fields(self, id_field=self.id_field or self.id_column, id_column=self.id_column or self.id_field)
        if self.text_column == "text" or self.text_field == "text":
            text = self.text_field if self.text_field != "text" else self.text_column
            set_fields(self, text_field=text, text_column=text)
        choice("input_format", self.input_format, INPUT_FORMATS,
                "unknown input format {value}; choose one of {choices}")
        if self.input_format == "sets":
            if self.universe is None:
                raise OptionError("universe", None, "{input_format} sets needs {universe} D, the number of possible "
                                  "elements")
            if self.text_field != "text" or self.text_column != "text":
                raise OptionError("text_field", self.text_field, "{text_field} and {text_column} do not apply to "
                                  "{input_format} sets; a set line holds an id and its elements")
            set_fields(self, universe=in_range("universe", self.universe, 2, MAX_SET_UNIVERSE, "2^62"))
        elif self.universe is not None:
            raise OptionError("universe", self.universe, "{universe} applies only to {input_format} sets; text "
                              "shingles are hashed into 2^64")
        if self.max_document_bytes is not None:
            set_fields(self, max_document_bytes=at_least("max_document_bytes", self.max_document_bytes, 1))
        if not self.text_field or not self.text_column:
            raise OptionError("text_field", self.text_field, "{text_field} and {text_column} must name a field; the "
                              "default is text")
        if self.id_field is not None and self.input_format not in ("auto", "jsonl", "json", "csv", "tsv", "parquet"):
            raise OptionError("id_field", self.id_field, f"{{id_field}} applies to records (JSON Lines, JSON arrays, "
                              f"CSV, TSV, Parquet), not {{input_format}} {self.input_format}")
        if self.null_separated and self.files_from is None:
            raise OptionError("null_separated", True, "{null_separated} applies to {files_from}; add {files_from} "
                              "FILE (or -)")
