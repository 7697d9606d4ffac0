"""Text fit for a terminal: the one sanitizer for everything Pivotal prints to a person.

Plans, rationales, model names, reasons, step errors and ids come from agents and users. A
control character in them (ESC starting a CSI or OSC sequence, BEL, a C1 code) or a bidi
override (U+202A..U+202E, U+2066..U+2069) would otherwise be *interpreted* by the operator's
terminal: it could clear the screen, retitle the window, recolour or reorder what an approver
reads, so that the screen shows what the plan does not contain. ``printable`` shows each such
character escaped (``\\x1b``, ``\\u202e``) instead; ``safe_text`` makes a Rich ``Text`` of it
(never read as markup); ``SafeConsole`` is a Rich console that applies ``printable`` to every
piece of text it renders, as a last line of defence behind the views that already use
``safe_text``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

__all__ = ["SafeConsole", "printable", "safe_text"]

# Format characters a script needs (Persian, Indic scripts, emoji sequences): shown as they
# are. Every other format character (bidi overrides, isolates and marks, zero-width space,
# BOM, ...) is escaped.
_JOINERS = frozenset({"\u200c", "\u200d"})
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp", "Co", "Cn"})
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# a quick test: everything printable ASCII (and the newline) needs no look at categories
_PLAIN = re.compile(r"[\x20-\x7e\n]*")


def _unsafe(char: str) -> bool:
    return char not in _JOINERS and unicodedata.category(char) in _UNSAFE_CATEGORIES


def _escape(char: str) -> str:
    if char in _SHORT:
        return _SHORT[char]
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def printable(value: object, *, newlines: bool = False) -> str:
    """``value`` as text a terminal shows and never interprets: every control character
    (C0, DEL, C1), bidi control and other invisible format character, line or paragraph
    separator, surrogate, private-use or unassigned code point escaped as ``\\x1b``,
    ``\\u202e``, ``\\n``... A newline stays a newline only with ``newlines``; by default
    the text stays on one line (a table cell, a field, a log line)."""
    text = "" if value is None else str(value)
    if _PLAIN.fullmatch(text) and (newlines or "\n" not in text):
        return text
    return "".join(
        _escape(c) if (c != "\n" or not newlines) and (c == "\n" or _unsafe(c)) else c for c in text
    )


def safe_text(value: object, style: str | Style = "", *, newlines: bool = False) -> Text:
    """``printable(value)`` as a Rich ``Text``: shown as it is, never read as markup."""
    return Text(printable(value, newlines=newlines), style=style)


class SafeConsole(Console):
    """A Rich console whose every rendered text passes through ``printable``: a plain
    string printed or put in a table stays on one line; in what is rendered, only the
    layout's own line breaks are kept. Styles are the console's; only the text (user data)
    is escaped. Markup, highlighting and emoji codes are off by default."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("markup", False)
        kwargs.setdefault("highlight", False)
        kwargs.setdefault("emoji", False)
        super().__init__(*args, **kwargs)
        if kwargs.get("width") is None:
            # Rich fixes the width from COLUMNS once, when the console is made (at import,
            # for the CLI's); without one given, follow COLUMNS and the terminal as they are
            # at each print instead
            self._width = None

    def render_str(self, text: str, **options: Any) -> Text:
        """A string printed as it is (``print("...")``, a table's plain cell, a title): on
        one line, control characters escaped."""
        return super().render_str(printable(text), **options)

    def render(
        self, renderable: RenderableType, options: ConsoleOptions | None = None
    ) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if segment.control or _PLAIN.fullmatch(segment.text):
                yield segment
            else:
                yield Segment(printable(segment.text, newlines=True), segment.style)
