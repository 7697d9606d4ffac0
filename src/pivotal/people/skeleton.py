"""Unicode's published data for telling look-alike text apart, and the skeleton of UTS #39.

Two files of Unicode's are kept beside this module, in ``unidata/``, trimmed to what is used
here and with Unicode's own header (version, date, copyright, terms of use) at their top:

- ``confusables.txt`` (UTS #39, Unicode Security Mechanisms): for each character that looks
  like another, the prototype it is drawn as (Cyrillic "\\u0430" is Latin "a", the digit
  "1" is "l");
- ``default_ignorable.txt`` (the Default_Ignorable_Code_Point section of the Unicode
  Character Database's DerivedCoreProperties.txt): the code points a renderer shows as
  nothing when it cannot show them otherwise (a soft hyphen, a direction mark, a tag
  character, a variation selector, a Hangul filler, ...).

They are read once, on first use, and kept (``default_ignorable``, ``prototypes``).
``skeleton`` is the function UTS #39 defines on them: two strings that look alike have the
same skeleton. Comparing people's names builds on it (``principals.canonical_person``).
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Iterator, Mapping
from importlib import resources

DATA = "unidata"
CONFUSABLES = "confusables.txt"
DEFAULT_IGNORABLE = "default_ignorable.txt"
PROPERTY = "Default_Ignorable_Code_Point"


class UnicodeDataError(ValueError):
    """A vendored data file is not as expected (a line that does not parse)."""


def _lines(name: str) -> Iterator[tuple[int, str]]:
    """The data lines of the vendored file ``name`` (numbered from 1), without comments."""
    text = resources.files("pivotal").joinpath(DATA, name).read_text(encoding="utf-8")
    for number, line in enumerate(text.splitlines(), 1):
        data = line.split("#", 1)[0].strip()
        if data:
            yield number, data


def version(name: str) -> str:
    """The Unicode version a vendored file states in its header (``# Version: 17.0.0``, or
    the version in its first line's file name)."""
    text = resources.files("pivotal").joinpath(DATA, name).read_text(encoding="utf-8")
    header = [line for line in text.splitlines() if line.startswith("#")]
    for line in header:
        if line.startswith("# Version:"):
            return line.removeprefix("# Version:").strip()
    first = header[0].removeprefix("#").strip() if header else ""
    stem = first.removesuffix(".txt")
    if "-" in stem:
        return stem.rsplit("-", 1)[1]
    raise UnicodeDataError(f"{name}: no version in its header")


def _code_point(field: str, where: str) -> int:
    try:
        value = int(field, 16)
    except ValueError:
        raise UnicodeDataError(f"{where}: {field!r} is not a code point") from None
    if not 0 <= value <= 0x10FFFF:
        raise UnicodeDataError(f"{where}: {field!r} is not a code point")
    return value


def parse_ignorable(lines: Iterator[tuple[int, str]], name: str) -> frozenset[int]:
    """The code points of ``XXXX[..YYYY] ; Default_Ignorable_Code_Point`` lines."""
    found: set[int] = set()
    for number, data in lines:
        where = f"{name}:{number}"
        span, _, prop = (part.strip() for part in data.partition(";"))
        if prop != PROPERTY:
            raise UnicodeDataError(f"{where}: expected {PROPERTY}, found {prop!r}")
        first, _, last = span.partition("..")
        low = _code_point(first, where)
        high = _code_point(last, where) if last else low
        if high < low:
            raise UnicodeDataError(f"{where}: the range {span} runs backwards")
        found.update(range(low, high + 1))
    return frozenset(found)


def parse_prototypes(lines: Iterator[tuple[int, str]], name: str) -> dict[int, str]:
    """``{source: prototype}`` of ``XXXX;YYYY ZZZZ`` lines (one source code point, the
    code points of its prototype)."""
    found: dict[int, str] = {}
    for number, data in lines:
        where = f"{name}:{number}"
        source, sep, target = data.partition(";")
        points = target.split()
        if not sep or not points or ";" in target:
            raise UnicodeDataError(f"{where}: expected 'source;prototype', found {data!r}")
        key = _code_point(source.strip(), where)
        if key in found:
            raise UnicodeDataError(f"{where}: {source.strip()} is mapped twice")
        found[key] = "".join(chr(_code_point(p, where)) for p in points)
    return found


@functools.cache
def default_ignorable() -> frozenset[int]:
    """Every code point with Unicode's Default_Ignorable_Code_Point property."""
    return parse_ignorable(_lines(DEFAULT_IGNORABLE), DEFAULT_IGNORABLE)


@functools.cache
def prototypes() -> Mapping[int, str]:
    """``{code point: its prototype}`` from UTS #39's confusables."""
    return parse_prototypes(_lines(CONFUSABLES), CONFUSABLES)


@functools.cache
def _table() -> dict[int, str | None]:
    """What ``str.translate`` does in one pass: each default-ignorable code point removed,
    each confusable replaced by its prototype."""
    table: dict[int, str | None] = dict(prototypes())
    table.update(dict.fromkeys(default_ignorable()))
    return table


def skeleton(text: str) -> str:
    """UTS #39's skeleton of ``text``: NFD, default-ignorable code points removed, each
    character replaced by its prototype, NFD again. Text that looks alike has one
    skeleton ("p\\u0430y\\u00ad" and "pay" do); a skeleton is for comparing, not showing."""
    return unicodedata.normalize("NFD", unicodedata.normalize("NFD", text).translate(_table()))


def ascii_digits(text: str) -> str:
    """``text`` with each decimal digit of another script (Arabic-Indic "\\u0661", Devanagari
    "\\u0967", ...) written as the ASCII digit of its value: "c-\\u0661" is "c-1"."""
    if text.isascii():
        return text
    return "".join(
        str(unicodedata.decimal(ch)) if unicodedata.category(ch) == "Nd" else ch for ch in text
    )
