"""Filtering a JSON array of records: the array again, without the elements dropped, in the input's own bytes.

Each element is read as ``sign`` read it (:func:`dedup_cli.inputs.json_arrays.element_document`) and dropped as a
line of JSON Lines is: by its id (``FILE:N`` without an id field), if its content hash is still the stored one. What
is kept is written as it was: the text before the first element, each kept element with the separator that came
before it (the first kept one without), and the text after the last element, so an array with nothing dropped is
copied byte for byte. An element that is not a record, and whatever follows the place where the array stops
parsing, is kept as it is. With ``annotate`` every object element gets the three ``dedup_*`` fields, added before
its closing brace.
"""

from __future__ import annotations

import json
from typing import Any, BinaryIO

import numpy as np

from dedup_cli.corpus.lines import ANNOTATION_FIELDS
from dedup_cli.corpus.record_decisions import Decisions, SourceOutcome
from dedup_cli.errors import InputError
from dedup_cli.inputs.json_arrays import Element, array_elements, array_text, element_document, text_bytes
from dedup_cli.inputs.locations import Source, location_path
from dedup_cli.inputs.report import ReadReport
from dedup_cli.options.checks import literal
from dedup_cli.options.input_options import InputOptions


def filter_array(data: bytes | bytearray, source: Source, options: InputOptions, decisions: Decisions, out: BinaryIO,
                 annotate: bool = False) -> SourceOutcome:
    """Write the JSON array ``data`` (the decompressed bytes of ``source``) to ``out`` without the elements to
    drop (see the module docstring)."""
    outcome = SourceOutcome()
    text = array_text(data)
    elements = [item for item in array_elements(text) if isinstance(item, Element)]
    if not elements:
        out.write(bytes(data))
        return outcome
    outcome.records = len(elements)
    documents = [element_document(element, text, source, options, 0, ReadReport()) for element in elements]
    repeated = np.zeros(len(elements), bool)
    if options.id_field is None:  # ids are FILE:N: match the numbers
        positions = np.full(len(elements), -1, np.int64)
        numbers, found = decisions.numbered(source.id, 1, elements[-1].number + 1)
        positions[numbers - 1] = found
    else:
        ids = [None if document is None else document.id for document in documents]
        repeated = decisions.repeated(ids, set(), location_path(source.path),
                                      [f"{source.display} element {element.number}" for element in elements], outcome)
        positions = decisions.lookup([None if skip else identifier for identifier, skip in
                                      zip(ids, repeated.tolist(), strict=True)])
    dropped = np.zeros(len(elements), bool)
    for index in np.flatnonzero(positions >= 0).tolist():
        document = documents[index]
        dropped[index] = decisions.settle(outcome, int(positions[index]),
                                          None if document is None else document.content_hash,
                                          f"{source.display} element {elements[index].number}")
    pieces = [text[:elements[0].start]]
    for index, element in enumerate(elements):
        written = text[element.start:element.end]
        if annotate:
            values = (None, False, None) if repeated[index] else decisions.annotation(int(positions[index]),
                                                                                     bool(dropped[index]))
            written = _annotated(element, written, values, source)
        elif dropped[index] or repeated[index]:
            continue
        if len(pieces) > 1:  # the separator before this element (with its comma)
            pieces.append(text[elements[index - 1].end:element.start])
        pieces.append(written)
    pieces.append(text[elements[-1].end:])
    out.write(text_bytes("".join(pieces)))
    return outcome


def _annotated(element: Element, written: str, values: tuple[Any, ...], source: Source) -> str:
    """An object element with the ``dedup_*`` fields added before its closing brace (others as they are)."""
    if not isinstance(element.value, dict):
        return written
    for name in ANNOTATION_FIELDS:
        if name in element.value:
            raise InputError(literal(f"{source.display} element {element.number} already has a field {name!r}; ")
                             + "{annotate} would add it again", options=True)
    fields = ", ".join(f"{json.dumps(name)}: {json.dumps(value, ensure_ascii=False)}"
                       for name, value in zip(ANNOTATION_FIELDS, values, strict=True))
    inner = written[:-1]
    body = inner.rstrip()  # the fields go after the last member, before the white space that ends the object
    return body + (", " if element.value else "") + fields + inner[len(body):] + "}"
