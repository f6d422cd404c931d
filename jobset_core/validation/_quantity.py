"""Resource quantities as the API server reads them (``k8s.io/apimachinery/pkg/api/resource``).

A port of ``Quantity.UnmarshalJSON`` / ``ParseQuantity`` / ``parseQuantityString``, which are
more lenient than the regular expression quoted in their error message: surrounding spaces are
trimmed, a missing number is 0 (``"Ki"``, ``"-"`` and ``"."`` are zero), ``"1."`` is 1.
A JSON number is read from its text like a string. :func:`quantity_error` gives the server's
error message, :func:`parse_quantity` the value.
"""

from __future__ import annotations

from decimal import MAX_EMAX, MIN_EMIN, Context, Decimal, InvalidOperation
from typing import Any

__all__ = ["QUANTITY_FORMAT_ERROR", "parse_quantity", "quantity_error"]

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


def _parse(value: Any) -> tuple[Decimal | None, str]:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None, QUANTITY_FORMAT_ERROR
    text = value if isinstance(value, str) else repr(value)
    text = text.strip(_SPACE)
    if not text:
        return None, QUANTITY_FORMAT_ERROR
    split = _split(text)
    if split is None:
        return None, QUANTITY_FORMAT_ERROR
    positive, numeric, num, denom, suffix = split
    interpreted = _suffix(suffix)
    if interpreted is None:
        return None, _SUFFIX_ERROR
    base, exponent = interpreted
    if not _fast_path(base, exponent, num, denom):
        # Go parses the numeric text itself here, and fails where it has no digit.
        try:
            Decimal(numeric)
        except InvalidOperation:
            return None, _NUMERIC_ERROR
    amount = Decimal(f"{num}.{denom}" if denom else num)
    if base == 2:
        amount = _CONTEXT.multiply(amount, _CONTEXT.power(2, exponent))
    else:
        amount = amount.scaleb(exponent, _CONTEXT)
    return (amount if positive else -amount), ""


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
