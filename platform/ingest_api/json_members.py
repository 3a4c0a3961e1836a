"""The embedded-JSON ``key`` and ``value`` of every record of a REST Proxy v2 JSON produce document, as
their compact JSON texts, found in the document's bytes with numpy: no Python object per record.

REST Proxy's JSON embedded format stores a record's ``key`` and ``value`` (any JSON: number, string,
object, array, true/false) as their JSON text; lakelog stores the compact text orjson writes for the
parsed value (the per-record validator's ``orjson.dumps``), so ``{"value": {"a": 1}}`` stores
``{"a":1}`` and ``{"value": 1}`` stores ``1``, and a JSON consumer reads back numbers as numbers.

:func:`member_texts` locates each record's members by the document's structure: which bytes lie in
strings (unescaped quotes, :func:`structure`), the bracket depth outside strings (a record is an object at
depth 3 of ``{"records": [...]}``), the member names at that depth, and each member's value up to the next
``,`` or ``}`` of its record. The value's bytes, without whitespace outside strings, are the compact text
orjson would write when:

- no string in it holds an escape (orjson rewrites ``\\u00e9`` as ``é``, ``\\/`` as ``/``) or a raw
  control byte (not JSON);
- every number in it is written as orjson writes it: an integer without a sign on 0 and up to 19 digits,
  or a decimal without exponent of at most 15 significant digits (``1.0``, ``-2.5``, ``0.0001``; not
  ``1.50``, ``1e5``, ``1E-7`` or ``0.00001``), which a float64 reproduces digit for digit.

Anything else (and a document the walk does not understand: a record that is not an object, a member named
twice, a name with an escape) gives None, and the caller decodes those records with the per-record validator.
The one form taken here that the validator writes otherwise: an object nested in a value that names a member
twice is stored as sent (orjson keeps the last).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_WHITESPACE = np.zeros(256, bool)
_WHITESPACE[[9, 10, 13, 32]] = True
_BRACKET = np.zeros(256, np.int8)  # +1 opens, -1 closes an object or array
_BRACKET[[ord("{"), ord("[")]] = 1
_BRACKET[[ord("}"), ord("]")]] = -1
_NUMBER_BYTE = np.zeros(256, bool)
_NUMBER_BYTE[np.frombuffer(b"-+.eE0123456789", np.uint8)] = True
_NUMBER_START = np.zeros(256, bool)
_NUMBER_START[np.frombuffer(b"-0123456789", np.uint8)] = True
_QUOTE, _BACKSLASH, _COMMA, _COLON = ord('"'), ord("\\"), ord(","), ord(":")
_OPEN, _CLOSE = ord("{"), ord("}")
#: numbers orjson writes as they are: integers (not -0) of up to 19 digits (negative ones from int64's
#: minimum on, :data:`_INT64_MIN`), decimals without exponent whose integer part has up to 15 digits, whose fraction is 0 or
#: ends in a non-zero digit, and, below 1, has at most three zeros after the point (orjson writes 0.00001
#: as 1e-5)
_CANONICAL_NUMBER = (r"^(-?(0|[1-9][0-9]{0,18})|-?[1-9][0-9]{0,14}\.(0|[0-9]*[1-9])"
                     r"|-?0\.(0|0{0,3}[1-9][0-9]*))$")
_INT64_MIN = str(-(2**63))
#: a float64 reproduces every decimal of this many significant digits
_FLOAT_DIGITS = 15
#: the depth of a record's members in ``{"records": [{...}]}``
_RECORD_DEPTH = 3


@dataclass(frozen=True)
class Structure:
    """Where the strings and brackets of a JSON text are.

    Attributes:
        outside: bool per byte, True outside every string (an opening quote counts as inside, a closing
            one as outside).
        depth: int32 per byte, the bracket depth after the byte (brackets outside strings only).
        quotes: int64 positions of the unescaped quotes, in order: openers at even, closers at odd indices.
    """

    outside: np.ndarray
    depth: np.ndarray
    quotes: np.ndarray


def structure(text: np.ndarray) -> Structure:
    """The :class:`Structure` of ``text`` (uint8, a JSON text that starts outside any string).

    A quote is escaped when an odd number of backslashes precedes it. Memory: a few times ``len(text)``
    (the caller passes chunks of about a MiB).
    """
    quotes = np.flatnonzero(text == _QUOTE)
    backslash = text == _BACKSLASH
    if len(quotes) and backslash.any():
        index = np.arange(len(text), dtype=np.int32)
        run = index - np.maximum.accumulate(np.where(backslash, -1, index))  # backslashes ending at each byte
        before = run[np.maximum(quotes - 1, 0)] * (quotes > 0)
        quotes = quotes[before % 2 == 0]
    toggles = np.zeros(len(text), np.uint8)
    toggles[quotes] = 1
    outside = np.bitwise_xor.accumulate(toggles) == 0
    del toggles
    depth = np.cumsum(_BRACKET[text] * outside, dtype=np.int32)
    return Structure(outside=outside, depth=depth, quotes=quotes)


def depth_summary(text: np.ndarray) -> tuple[int, int, bool]:
    """``(lowest, last, outside)`` of ``text`` (uint8, a JSON text that starts outside any string): the lowest
    bracket depth after any byte (0 when no bracket lowers it below the start), the depth after the last byte,
    and whether the last byte is outside every string: what :func:`structure` says of the text's end, for a
    fraction of its work.

    Without a backslash every quote toggles, so only the brackets (a few per record) are looked at: one is
    outside the strings when an even number of quotes precede it. With one, :func:`structure` decides.
    """
    if (text == _BACKSLASH).any():
        shape = structure(text)
        return min(0, int(shape.depth.min())), int(shape.depth[-1]), bool(shape.outside[-1])
    quotes = np.flatnonzero(text == _QUOTE)
    brackets = np.flatnonzero(_BRACKET[text])
    brackets = brackets[np.searchsorted(quotes, brackets) % 2 == 0]
    if not len(brackets):
        return 0, 0, len(quotes) % 2 == 0
    depth = np.cumsum(_BRACKET[text[brackets]], dtype=np.int32)
    return min(0, int(depth.min())), int(depth[-1]), len(quotes) % 2 == 0


def members_only(document: bytes, allowed: frozenset[bytes], *, depth: int = 3, shape: Structure | None = None) -> bool:
    """Whether every member name of the objects at nesting ``depth`` of ``document`` (a JSON text; 3: the
    records of ``{"records": [{...}, ...]}``) is one of ``allowed``: pyarrow's JSON reader ignores members
    its schema does not name, where REST Proxy refuses an unknown field (Jackson's
    ``FAIL_ON_UNKNOWN_PROPERTIES``). Names with escapes count as unknown (the validator decides).
    ``shape``: the document's :func:`structure`, when the caller has it. Memory: a few times ``len(document)``."""
    text = np.frombuffer(document, np.uint8)
    shape = shape or structure(text)
    opens, closes = shape.quotes[0::2], shape.quotes[1::2]
    if len(opens) != len(closes):
        return False
    at_depth = shape.depth[opens] == depth  # a string directly inside an object of that depth
    opens, closes = opens[at_depth], closes[at_depth]
    if not len(opens):
        return True
    solid = np.flatnonzero(~_WHITESPACE[text])  # the first byte after each string that is not whitespace
    after = solid[np.minimum(np.searchsorted(solid, closes + 1), len(solid) - 1)]
    is_name = text[after] == ord(":")
    starts, lengths = opens[is_name] + 1, (closes - opens - 1)[is_name]
    known = np.zeros(len(starts), bool)
    for name in allowed:  # a handful of names: compare each against the names of its length, in columns
        same = np.flatnonzero(lengths == len(name))
        if len(same):
            window = text[starts[same, None] + np.arange(len(name))]
            known[same[(window == np.frombuffer(name, np.uint8)).all(axis=1)]] = True
    return bool(known.all())


def member_texts(document: bytes, n: int, *, names: tuple[str, ...] = ("key", "value"),
                 members: frozenset[bytes] | None = None) -> list[pa.Array] | None:
    """The compact JSON texts of the members ``names`` of the ``n`` records of ``document``, one binary
    array per name (null where a record lacks the member or it is ``null``), or None (module doc).

    Args:
        document: ``{"records": [...]}`` that pyarrow's JSON reader parsed into ``n`` records (so it is valid
            JSON and each record an object).
        n: its number of records.
        names: the members. Default: key and value.
        members: when given, None also when a record has a member outside it (:func:`members_only`).
    """
    text = np.frombuffer(document, np.uint8)
    shape = structure(text)
    if members is not None and not members_only(document, members, shape=shape):
        return None
    outside, depth = shape.outside, shape.depth
    if (text[~outside] < 32).any():  # a raw control byte in a string: not JSON, the validator says so
        return None
    index = np.arange(len(text), dtype=np.int32)
    solid = ~(_WHITESPACE[text] & outside)  # bytes the compact text keeps
    last_solid = np.maximum.accumulate(np.where(solid, index, -1))  # at or before each byte
    next_solid = np.minimum.accumulate(np.where(solid, index, len(text))[::-1])[::-1]  # at or after
    del index
    records = np.flatnonzero((text == _OPEN) & outside & (depth == _RECORD_DEPTH))
    if len(records) != n:
        return None
    openers, closers = shape.quotes[0::2], shape.quotes[1::2]
    level = depth[openers] == _RECORD_DEPTH
    openers, closers = openers[level], closers[level]
    before = text[last_solid[openers - 1]]
    is_name = (before == _OPEN) | (before == _COMMA)
    openers, closers = openers[is_name], closers[is_name]
    escapes = np.concatenate(([0], np.cumsum(text == _BACKSLASH, dtype=np.int32)))  # backslashes before each byte
    if (escapes[closers] - escapes[openers]).any():
        return None  # a name written with an escape: the validator reads it
    # a member's value: from the first byte after its ':' to the last before the record's next ',' or '}'
    ends = np.flatnonzero(outside & (((text == _COMMA) & (depth == _RECORD_DEPTH))
                                     | ((text == _CLOSE) & (depth == _RECORD_DEPTH - 1))))
    kept = np.concatenate(([0], np.cumsum(solid, dtype=np.int32)))  # kept bytes before each byte
    numbers = _number_runs(text, outside)
    out = []
    for name in names:
        word = np.frombuffer(name.encode(), np.uint8)
        named = np.flatnonzero(closers - openers - 1 == len(word))
        for j, byte in enumerate(word):
            named = named[text[openers[named] + 1 + j] == byte]
        colons = next_solid[closers[named] + 1]
        if (text[colons] != _COLON).any():
            return None
        starts = next_solid[colons + 1]
        stops = last_solid[ends[np.searchsorted(ends, starts)] - 1] + 1
        owner = np.searchsorted(records, starts, side="right") - 1
        if len(np.unique(owner)) != len(owner):
            return None  # a record names the member twice: the validator keeps the last
        if (escapes[stops] - escapes[starts]).any():
            return None  # an escape in a string: orjson would rewrite it
        if not _canonical_numbers(text, numbers, starts, stops):
            return None
        lengths = kept[stops] - kept[starts]
        null = (lengths == 4) & (text[starts] == ord("n"))
        out.append(_gather(text, solid, n, owner[~null], starts[~null], stops[~null], lengths[~null]))
    return out


def _number_runs(text: np.ndarray, outside: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(starts, stops)`` of the numbers outside strings (runs of number bytes that start with ``-`` or
    a digit; the ``e`` of ``true`` starts none)."""
    byte = _NUMBER_BYTE[text] & outside
    edges = np.diff(byte.view(np.int8), prepend=np.int8(0), append=np.int8(0))
    starts, stops = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    real = _NUMBER_START[text[starts]]
    return starts[real], stops[real]


def _canonical_numbers(text: np.ndarray, numbers: tuple[np.ndarray, np.ndarray], starts: np.ndarray,
                       stops: np.ndarray) -> bool:
    """Whether every number inside the spans ``[starts, stops)`` is written as orjson writes it (module doc)."""
    first, last = numbers
    if not len(first) or not len(starts):
        return True
    span = np.searchsorted(starts, first, side="right") - 1
    inside = (span >= 0) & (first < stops[np.maximum(span, 0)])
    first, last = first[inside], last[inside]
    if not len(first):
        return True
    offsets = np.empty(2 * len(first), np.int32)
    offsets[0::2], offsets[1::2] = first, last
    data = pa.py_buffer(text)
    # each number as a string viewing the text: [first, last) as offsets of every other slot
    runs = pa.StringArray.from_buffers(2 * len(first) - 1, pa.py_buffer(offsets), data).take(
        pa.array(np.arange(0, 2 * len(first), 2)))
    if not pc.all(pc.match_substring_regex(runs, _CANONICAL_NUMBER)).as_py() or pc.any(pc.equal(runs, "-0")).as_py():
        return False
    longest = runs.filter(pc.equal(pc.utf8_length(runs), len(_INT64_MIN)))  # same length: compared as text
    if len(longest) and pc.any(pc.and_(pc.starts_with(longest, "-"), pc.greater(longest, _INT64_MIN))).as_py():
        return False  # below int64: orjson refuses it, the validator answers
    decimals = runs.filter(pc.match_substring(runs, "."))
    if not len(decimals):
        return True
    digits = pc.utf8_trim(pc.replace_substring_regex(decimals, r"[-.]", ""), "0")  # the significant ones
    return pc.max(pc.utf8_length(digits)).as_py() <= _FLOAT_DIGITS


def _gather(text: np.ndarray, solid: np.ndarray, n: int, owner: np.ndarray, starts: np.ndarray,
            stops: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """A binary array of ``n`` rows: row ``owner[i]`` holds the kept bytes of ``text[starts[i]:stops[i]]``,
    the others null."""
    marks = np.zeros(len(text) + 1, np.int8)  # spans are disjoint and never touch: +1 at starts, -1 at stops
    marks[starts], marks[stops] = 1, -1
    data = text[(np.cumsum(marks[:-1], dtype=np.int8) > 0) & solid]
    sizes = np.zeros(n, np.int32)
    sizes[owner] = lengths
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(sizes, out=offsets[1:])
    valid = np.zeros(n, bool)
    valid[owner] = True
    nulls = n - len(owner)
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    return pa.BinaryArray.from_buffers(pa.binary(), n, [bitmap, pa.py_buffer(offsets), pa.py_buffer(data)],
                                       null_count=nulls)
