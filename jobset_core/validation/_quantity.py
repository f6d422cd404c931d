"""Resource quantities as the API server reads them (``k8s.io/apimachinery/pkg/api/resource``).

A port of ``Quantity.UnmarshalJSON`` / ``ParseQuantity`` / ``parseQuantityString``, which are
more lenient than the regular expression quoted in their error message: surrounding spaces are
trimmed, a missing number is 0 (``"Ki"``, ``"-"`` and ``"."`` are zero), ``"1."`` is 1.
A JSON number is read as the text Go gives it after decoding (``1e16`` is
``10000000000000000``). :func:`quantity_error` gives the server's
error message, :func:`parse_quantity` the value.
"""

from __future__ import annotations

import math
from decimal import (
    MAX_EMAX,
    MIN_EMIN,
    ROUND_CEILING,
    ROUND_FLOOR,
    Context,
    Decimal,
    InvalidOperation,
)
from typing import Any, NamedTuple

__all__ = ["QUANTITY_FORMAT_ERROR", "parse_quantity", "quantity_error", "quantity_string"]

_SPLIT_RE = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
#: ``ErrFormatWrong``, ``ErrSuffix`` and ``ErrNumeric``.
QUANTITY_FORMAT_ERROR = f"quantities must match the regular expression '{_SPLIT_RE}'"
_SUFFIX_ERROR = "unable to parse quantity's suffix"
_NUMERIC_ERROR = "unable to parse numeric part of quantity"

_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_SUFFIX_CHARS = "eEinumkKMGTP"
_DIGITS = "0123456789"
#: What ``strings.TrimSpace`` can trim in ``Quantity.UnmarshalJSON``: it sees the JSON text
#: still escaped, and JSON encoders escape the ASCII control characters (``\t`` arrives as a
#: backslash and a ``t``), so Unicode White_Space without them is left.
_SPACE = (
    " \x85\xa0\u1680"
    + "".join(map(chr, range(0x2000, 0x200B)))
    + ("\u2028\u2029\u202f\u205f\u3000")
)
_MAX_INT64 = 2**63 - 1
_CONTEXT = Context(prec=60, Emax=MAX_EMAX, Emin=MIN_EMIN)


def _skip(text: str, pos: int, chars: str) -> int:
    while pos < len(text) and text[pos] in chars:
        pos += 1
    return pos


def _split(text: str) -> tuple[bool, str, str, str, str] | None:
    """``parseQuantityString``: sign, the numeric text, numerator, denominator, suffix."""
    positive, end = True, len(text)
    pos = 1 if text[:1] in ("+", "-") else 0
    positive = text[:1] != "-"
    pos = _skip(text, pos, "0")
    if pos >= end:
        return positive, "0", "0", "", ""
    start, pos = pos, _skip(text, pos, _DIGITS)
    if pos >= end:
        return positive, text, text[start:], "", ""
    num, denom = text[start:pos] or "0", ""
    if text[pos] == ".":
        start, pos = pos + 1, _skip(text, pos + 1, _DIGITS)
        denom = text[start:pos]
        if pos >= end:
            return positive, text, num, denom, ""
    value, suffix_start = text[:pos], pos
    pos = _skip(text, pos, _SUFFIX_CHARS)
    pos = _skip(text, pos + (text[pos : pos + 1] in ("+", "-") and pos < end), _DIGITS)
    if pos < end:
        return None
    return positive, value, num, denom, text[suffix_start:]


def _suffix(suffix: str) -> tuple[int, int] | None:
    """``suffixHandler.interpret``: (base, exponent)."""
    if suffix in _DECIMAL:
        return 10, _DECIMAL[suffix]
    if suffix in _BINARY:
        return 2, _BINARY[suffix]
    if len(suffix) > 1 and suffix[0] in "eE":
        digits = suffix[1:]
        body = digits[1:] if digits[:1] in "+-" else digits
        if body.isascii() and body.isdigit() and -(2**63) <= int(digits) <= _MAX_INT64:
            # Go keeps the exponent as an int32 (it wraps).
            exponent = (int(digits) + 2**31) % 2**32 - 2**31
            return 10, exponent
    return None


def _go_number(value: float) -> str:
    """The text Go gives a JSON number it has decoded and encodes again (the API server decodes
    an object before the webhook and the validation see it): an integer that fits an int64 as
    it is, anything else (``2.0`` too) as a float64 in ``encoding/json``'s shortest format."""
    if isinstance(value, int) and -(2**63) <= value < 2**63:
        return str(value)
    number = float(value)
    if not math.isfinite(number):
        return repr(number)  # not JSON at all: the request fails before any quantity is read
    size = abs(number)
    if size == 0 or 1e-6 <= size < 1e21:
        return format(Decimal(repr(number)).normalize(), "f")
    text = repr(number)  # Go writes "1e-7" where Python writes "1e-07"
    return text[:-2] + text[-1] if text[-4:-2] in ("e-", "e+") and text[-2] == "0" else text


class _Parsed(NamedTuple):
    text: str
    num: str
    denom: str
    suffix: str
    base: int
    exponent: int
    value: Decimal


def _read(value: Any) -> _Parsed | str:
    """The parts Go reads from a quantity, or its error message."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return QUANTITY_FORMAT_ERROR
    text = value.strip(_SPACE) if isinstance(value, str) else _go_number(value)
    if not text:
        return QUANTITY_FORMAT_ERROR
    split = _split(text)
    if split is None:
        return QUANTITY_FORMAT_ERROR
    positive, numeric, num, denom, suffix = split
    interpreted = _suffix(suffix)
    if interpreted is None:
        return _SUFFIX_ERROR
    base, exponent = interpreted
    if not _fast_path(base, exponent, num, denom):
        # Go parses the numeric text itself here, and fails where it has no digit.
        try:
            Decimal(numeric)
        except InvalidOperation:
            return _NUMERIC_ERROR
    amount = Decimal(f"{num}.{denom}" if denom else num)
    if base == 2:
        amount = _CONTEXT.multiply(amount, _CONTEXT.power(2, exponent))
    else:
        amount = amount.scaleb(exponent, _CONTEXT)
    return _Parsed(text, num, denom, suffix, base, exponent, amount if positive else -amount)


def _parse(value: Any) -> tuple[Decimal | None, str]:
    parsed = _read(value)
    return (None, parsed) if isinstance(parsed, str) else (parsed.value, "")


def _fast_path(base: int, exponent: int, num: str, denom: str) -> bool:
    # ParseQuantity's int64 path: enough precision and a scale of at least nano.
    if base == 10:
        precision, scale = 18 - len(num) - len(denom), exponent
    elif exponent >= 0 and not denom:
        precision, scale = 15 - len(num) - int(exponent * 3 / 10) - 1, 0
    else:
        precision, scale = -1, 0
    return precision >= 0 and scale - len(denom) >= -9


def quantity_error(value: Any) -> str:
    """The API server's error for a quantity (a string or JSON number), ``""`` if valid."""
    return _parse(value)[1]


def parse_quantity(value: Any) -> Decimal | None:
    """The value of a quantity (``"500m"``, ``"1Gi"``, ``2``); ``None`` if malformed."""
    return _parse(value)[0]


_SI_SUFFIXES = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_BINARY_SUFFIXES = {0: "", 10: "Ki", 20: "Mi", 30: "Gi", 40: "Ti", 50: "Pi", 60: "Ei"}


def quantity_string(value: Any) -> str | None:
    """``Quantity.String()`` of what the API server parses from ``value``: the spelling as
    written when Go keeps it (a canonical-looking int64 value), else the canonical form
    (``"1000m"`` is ``"1"``, ``"1024Ki"`` is ``"1Mi"``); ``None`` if malformed."""
    parsed = _read(value)
    if isinstance(parsed, str):
        return None
    if parsed.text == "0" or parsed.value == 0:
        return "0"
    kept = _kept_spelling(parsed)
    if kept is not None:
        return kept
    binary = parsed.base == 2
    if binary and (abs(parsed.value) < 1024 or parsed.value != parsed.value.to_integral_value()):
        binary = False  # CanonicalizeBytes shows these as DecimalSI
    if binary:
        mantissa, power = int(parsed.value), 0
        while mantissa % 1024 == 0:
            mantissa, power = mantissa // 1024, power + 10
        return f"{mantissa}{_BINARY_SUFFIXES.get(power, '')}"
    # Round up to nano as ParseQuantity does, then a mantissa with an exponent of 3s.
    nanos = int(
        (parsed.value * 10**9).to_integral_value(
            rounding=ROUND_CEILING if parsed.value > 0 else ROUND_FLOOR
        )
    )
    mantissa, exponent = nanos, -9
    while mantissa % 10 == 0:
        mantissa, exponent = mantissa // 10, exponent + 1
    shift = exponent % 3
    mantissa, exponent = mantissa * 10**shift, exponent - shift
    if parsed.base == 10 and parsed.suffix[:1] in ("e", "E"):
        return f"{mantissa}" + (f"e{exponent}" if exponent else "")
    return f"{mantissa}{_SI_SUFFIXES.get(exponent, f'e{exponent}')}"


def _kept_spelling(parsed: _Parsed) -> str | None:
    """ParseQuantity keeps the text (``Quantity.s``) on its int64 path when it is canonical."""
    if not _fast_path(parsed.base, parsed.exponent, parsed.num, parsed.denom):
        return None
    digits = int(parsed.num + parsed.denom)
    if parsed.base == 2:
        if not -(2**63) <= digits * 2**parsed.exponent < 2**63:
            return None
        return parsed.text if parsed.exponent % 10 == 0 and digits & 7 else None
    scale = parsed.exponent - len(parsed.denom)
    shifted = parsed.num + parsed.denom
    keep = scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0"
    return parsed.text if keep else None
