"""The checks every option goes through, each raising an :class:`~dedup_cli.errors.OptionError` that names it."""

from __future__ import annotations

import operator
from typing import Any

from dedup_cli.errors import OptionError
from dedup_cli.options.vocabulary import (
    CHAR_TOKENISATION,
    HALF_BIT,
    MAX_NUM_PERM,
    MAX_SEED,
    MAX_STORED_BITS,
    SHINGLE_UNITS,
    SIGNATURE_SCHEMES,
    TEXT_UNIVERSE,
    WORD_TOKENISATIONS,
)


def literal(value: object) -> str:
    """``str(value)`` escaped for an :class:`OptionError` template (braces doubled)."""
    return str(value).replace("{", "{{").replace("}", "}}")


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` and ``noun`` in agreement: ``1 document``, ``4496 documents``; ``plural`` when adding an ``s``
    does not make it (``1 copy``, ``2 copies``)."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def whole_number(name: str, value: Any) -> int:
    try:
        return operator.index(value)
    except TypeError:
        raise OptionError(name, value, f"{{{name}}} {literal(repr(value))} must be a whole number") from None


def in_range(name: str, value: Any, low: int, high: int, high_text: str | None = None) -> int:
    number = whole_number(name, value)
    if not low <= number <= high:
        raise OptionError(name, value, f"{{{name}}} {number} is out of range; use {low} to {high_text or high}")
    return number


def estimator_bits(value: Any, name: str = "bits") -> float:
    """b for an estimator: a whole number 1..64, or b = 1/2 (:data:`HALF_BIT`) written ``1/2``, ``0.5`` or 0.5."""
    if isinstance(value, str) and value.strip() in ("1/2", "0.5", ".5"):
        return HALF_BIT
    if isinstance(value, float) and value == HALF_BIT:
        return HALF_BIT
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise OptionError(name, value, f"{{{name}}} {value}: use a whole number 1 to {MAX_STORED_BITS}, "
                              "or 1/2") from None
    return in_range(name, value, 1, MAX_STORED_BITS)


def at_least(name: str, value: Any, low: int) -> int:
    number = whole_number(name, value)
    if number < low:
        raise OptionError(name, value, f"{{{name}}} {number} must be at least {low}")
    return number


def choice(name: str, value: Any, choices: tuple[str, ...], template: str) -> None:
    if value not in choices:
        raise OptionError(name, value, template.format(value=literal(repr(value)), choices=", ".join(choices),
                                                       either=" or ".join(choices)))


def threshold_value(value: Any) -> float:
    threshold = float(value)
    if not 0.0 < threshold <= 1.0:
        raise OptionError("threshold", value, f"{{threshold}} {threshold:g} must be in (0, 1]")
    return threshold


def open_fraction(name: str, value: Any, example: str) -> float:
    fraction = float(value)
    if not 0.0 < fraction < 1.0:
        raise OptionError(name, value, f"{{{name}}} {fraction:g} must lie strictly between 0 and 1, e.g. {example}")
    return fraction


def set_fields(options: Any, **values: Any) -> None:
    """Store normalised values in a frozen dataclass (from ``__post_init__``)."""
    for name, value in values.items():
        object.__setattr__(options, name, value)


def check_signature(num_perm: Any, bits: Any, seed: Any, shingle_size: Any, shingle_unit: str, scheme: str,
                    universe: Any, input_kind: str) -> None:
    """The rules every signature's parameters obey (``SignatureParams`` and :class:`SignOptions` apply them)."""
    in_range("num_perm", num_perm, 1, MAX_NUM_PERM)
    in_range("bits", bits, 1, MAX_STORED_BITS)
    in_range("seed", seed, 0, MAX_SEED, "2^63 − 1")
    at_least("shingle_size", shingle_size, 1)
    choice("input_kind", input_kind, ("text", "sets"), "input kind {value}: choose {either}")
    if input_kind == "text":
        choice("shingle_unit", shingle_unit, SHINGLE_UNITS, "{{shingle_unit}} {value}: choose {either}")
    choice("scheme", scheme, SIGNATURE_SCHEMES, "{{scheme}} {value}: choose {either}")
    if input_kind == "sets" and scheme != "kperm":
        raise OptionError("scheme", scheme, f"{{scheme}} {literal(scheme)} is for text input; integer sets are signed "
                          "with k permutations of their universe, so use {scheme} kperm")
    in_range("universe", universe, 2, TEXT_UNIVERSE, "2^64")


def check_tokenisation(tokenisation: Any, shingle_unit: str, input_kind: str) -> None:
    """How tokens are found must suit the unit: one of the word tokenisations for words, ``code-points`` for
    characters, ``none`` for integer sets."""
    if input_kind == "sets":
        allowed: tuple[str, ...] = ("none",)
    elif shingle_unit == "char":
        allowed = (CHAR_TOKENISATION,)
    else:
        allowed = WORD_TOKENISATIONS
    choice("tokenisation", tokenisation, allowed, f"{{{{tokenisation}}}} {{value}}: {literal(shingle_unit)} "
           "shingles take {either}")


def check_bits(bits: float, stored_bits: float, stored_in: str | None = None) -> None:
    """``bits`` (b, for the estimator) must not exceed the stored bits B: those of the store ``stored_in``,
    or (``stored_in`` None, for ``plan``) the option ``stored_bits``. A store of XOR bits (B = 1/2) answers only
    b = 1/2."""
    if bits <= stored_bits:
        return
    if stored_bits == HALF_BIT and stored_in is None:
        raise OptionError("bits", bits, f"{{bits}} {bits}: {{stored_bits}} 1/2 keeps only XOR bits, which answer "
                          "{bits} 1/2 alone; use {bits} 1/2, or whole {stored_bits}")
    if stored_bits == HALF_BIT:
        raise OptionError("bits", bits, f"{{bits}} {bits}: {literal(stored_in)} holds only XOR bits (signed with "
                          "{bits} 1/2), which answer {bits} 1/2 alone; use {bits} 1/2, or sign again with whole bits "
                          "into a new store")
    if stored_in is None:
        raise OptionError("bits", bits, f"{{bits}} {bits} exceeds {{stored_bits}} {stored_bits}; use {{bits}} 1 to "
                          f"{stored_bits}, or sign with {{bits}} {bits} or more")
    raise OptionError("bits", bits, f"{{bits}} {bits} exceeds the {stored_bits} bits stored in {literal(stored_in)}; "
                      f"use {{bits}} 1 to {stored_bits}, or re-sign with {{bits}} {bits} or more into a new store")


def check_half_bit_pairs(bits: float, stored_bits: float, num_perm: int, stored_in: str | None = None) -> None:
    """b = 1/2 XORs the lowest bits of two permutations (Li & König 2010, Sec. 5.3), so it needs k ≥ 2 values: a
    store signed with ``--num-perm 1`` (which ``sign`` accepts: every other estimator is defined for k = 1) holds
    none to pair. A store of XOR bits holds them paired already. ``stored_in``: the store, or None (``plan``)."""
    if bits != HALF_BIT or stored_bits == HALF_BIT or num_perm >= 2:
        return
    whole = f"use {{bits}} 1 to {stored_bits}"
    if stored_in is None:
        raise OptionError("bits", "1/2", f"{{bits}} 1/2 XORs the values of two permutations; {{num_perm}} {num_perm} "
                          f"gives one; {whole}, or {{num_perm}} 2 or more")
    raise OptionError("bits", "1/2", f"{{bits}} 1/2 XORs the values of two permutations; in {literal(stored_in)}, "
                      f"signed with {{num_perm}} {num_perm}, a document has one; {whole}, or sign again with "
                      "{num_perm} 2 or more")


def check_three_way_bits(bits: float, name: str = "ways") -> None:
    """Three-way estimates need b ≥ 2: of three one-bit values, either all agree or exactly one pair does (and
    b = 1/2, XOR bits of one-bit values, has no 3-way form at all)."""
    if bits == HALF_BIT:
        what, other = ("{ways} 3", "{ways} 2") if name == "ways" else ("a 3-way estimate", "two documents")
        raise OptionError("bits", "1/2", f"{what} has no b = 1/2 form (XOR bits estimate pairs only); use {{bits}} "
                          f"2 or more, or {other}")
    if bits < 2:
        what = "{ways} 3 needs" if name == "ways" else "3-way estimation needs"
        raise OptionError("bits", bits, f"{what} {{bits}} 2 or more; 1-bit values carry no 3-way information")


def check_banding(bands: int | None, rows: int | None, num_perm: int) -> None:
    """``bands`` × ``rows`` (either may be None: as many as k allows) must fit in the k = ``num_perm`` values."""
    if bands is None and rows is None:
        return
    if rows is None:
        assert bands is not None
        rows, option, name = num_perm // bands, f"{{bands}} {bands}", "bands"
    elif bands is None:
        bands, option, name = num_perm // rows, f"{{rows}} {rows}", "rows"
    else:
        option, name = f"{{bands}} {bands} × {{rows}} {rows}", "bands"
    if bands < 1 or rows < 1 or bands * rows > num_perm:
        raise OptionError(name, bands if name == "bands" else rows,
                          f"{option} needs {max(bands, 1) * max(rows, 1)} values but signatures hold {num_perm} "
                          f"({{num_perm}}); choose bands × rows ≤ {num_perm}")


def banding_values(options: Any) -> None:
    for name in ("bands", "rows"):
        value = getattr(options, name)
        if value is not None:
            set_fields(options, **{name: at_least(name, value, 1)})


def text_option_for_sets(name: str, value: object) -> OptionError:
    """The error for a text option (``shingle_size``, ``shingle_unit``, ``scheme``) given with integer sets."""
    return OptionError(name, value, f"{{{name}}} applies to text; integer sets are not shingled and are signed with "
                       "k permutations of their universe; leave it out")


_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "kib": 1 << 10, "mib": 1 << 20,
          "gib": 1 << 30, "tib": 1 << 40}


def memory_bytes(text: str) -> int | None:
    """Bytes of an amount of memory written like ``512MiB``, ``1.5GB`` or ``1000000`` (None when it is not one)."""
    import re

    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?(?:e\d+)?)\s*([kKmMgGtT]?i?[bB])?\s*", text)
    if match is None:
        return None
    unit = (match.group(2) or "").lower()
    if unit not in _UNITS:
        return None
    return int(float(match.group(1)) * _UNITS[unit])
