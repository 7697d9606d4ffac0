"""One canonical person: the one function that says whether two names are one person
(``principals.canonical_person``), and Unicode's data it stands on (``pivotal.people.skeleton``)."""

from __future__ import annotations

import unicodedata
from importlib import resources

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pivotal.people import skeleton
from pivotal.people.principals import canonical_person

ANN = "ann"

# "ann" as a person may be made to look, every spelling one person
SPELLINGS = {
    "plain": "ann",
    "capitals": "ANN",
    "mixed case": "Ann",
    "surrounding blanks": "  ann\t",
    "soft hyphen": "a\u00adnn",
    "left-to-right mark": "\u200eann",
    "right-to-left mark": "an\u200fn",
    "bidi embedding and pop": "\u202aann\u202c",
    "bidi isolate": "\u2066ann\u2069",
    "invisible separator": "an\u2063n",
    "invisible times": "a\u2062nn",
    "tag character": "ann\U000e0041",
    "language tag and cancel tag": "\U000e0001ann\U000e007f",
    "combining grapheme joiner": "an\u034fn",
    "variation selector": "a\ufe0fnn",
    "variation selector supplement": "an\U000e0100n",
    "Hangul filler": "ann\u3164",
    "halfwidth Hangul filler": "\uffa0ann",
    "Mongolian vowel separator": "a\u180enn",
    "zero width space": "a\u200bnn",
    "zero width joiner": "an\u200dn",
    "word joiner": "ann\u2060",
    "byte order mark": "\ufeffann",
    "Arabic letter mark": "a\u061cnn",
    "Cyrillic a": "\u0430nn",
    "Cyrillic capital A": "\u0410nn",
    "Greek alpha": "\u03b1nn",
    "fullwidth": "\uff41\uff4e\uff4e",
    "fullwidth capitals": "\uff21\uff2e\uff2e",
    "mathematical bold": "\U0001d41a\U0001d427\U0001d427",
    "a control character": "an\x07n",
    "everything at once": " \u200e\u0410\u00ad\uff4e\u2063\U000e0041n\u034f\u200f ",
}


@pytest.mark.parametrize("spelling", SPELLINGS.values(), ids=SPELLINGS.keys())
def test_every_spelling_of_ann_is_ann(spelling: str) -> None:
    assert canonical_person(spelling) == canonical_person(ANN) == ANN


@pytest.mark.parametrize("other", ["anna", "an", "bnn", "a nn", "ann2", "\u00e1nn"], ids=repr)
def test_other_names_stay_other_people(other: str) -> None:
    assert canonical_person(other) != canonical_person(ANN)


@pytest.mark.parametrize(
    "nothing",
    [
        "",
        "   ",
        "\u00ad",  # a soft hyphen
        "\u200e\u200f",
        "\u2063",
        "\U000e0041\U000e007f",
        "\u034f",
        "\ufe0f",
        "\u3164",
        "\t\u00ad \u200b\n",
    ],
    ids=repr,
)
def test_a_name_of_only_invisible_characters_is_no_one(nothing: str) -> None:
    assert canonical_person(nothing) == ""


def test_blanks_inside_a_name_count_once() -> None:
    assert canonical_person("Ann  Lee") == canonical_person("ann\u00a0lee")
    assert canonical_person("ann lee") != canonical_person("annlee")


@given(st.text())
def test_folding_twice_is_folding_once(name: str) -> None:
    once = canonical_person(name)
    assert canonical_person(once) == once


LOOK_ALIKES = sorted(skeleton.prototypes()) + sorted(skeleton.default_ignorable())[:200]


@given(st.lists(st.sampled_from(LOOK_ALIKES).map(chr) | st.characters(), max_size=12))
def test_folding_twice_is_folding_once_for_look_alikes(chars: list[str]) -> None:
    name = "".join(chars)
    once = canonical_person(name)
    assert canonical_person(once) == once


def test_every_single_character_folds_to_a_fixed_point() -> None:
    for cp in [*skeleton.prototypes(), *range(0x80)]:
        once = canonical_person(chr(cp))
        assert canonical_person(once) == once, hex(cp)


# -- the data: Unicode's, vendored, read once ------------------------------------------------


def test_the_vendored_files_say_their_version_and_terms() -> None:
    assert skeleton.version(skeleton.CONFUSABLES) == "17.0.0"
    assert skeleton.version(skeleton.DEFAULT_IGNORABLE) == "17.0.0"
    for name in (skeleton.CONFUSABLES, skeleton.DEFAULT_IGNORABLE):
        text = resources.files("pivotal").joinpath(skeleton.DATA, name).read_text("utf-8")
        head = text.splitlines()[:6]
        assert any("Unicode\u00ae, Inc." in line for line in head), name
        assert any("unicode.org/terms_of_use.html" in line for line in head), name


def test_the_default_ignorable_code_points_are_all_there() -> None:
    ignorable = skeleton.default_ignorable()
    assert len(ignorable) == 4174  # the file's own "Total code points"
    wanted = [0x00AD, 0x034F, 0x061C, 0x115F, 0x180E, 0x200B, 0x200E, 0x200F, 0x202A]
    wanted += [0x202E, 0x2061, 0x2063, 0x2064, 0x2066, 0x2069, 0x3164, 0xFE00, 0xFE0F]
    wanted += [0xFEFF, 0xFFA0, 0x1BCA0, 0x1D173, 0xE0000, 0xE0001, 0xE0041, 0xE007F]
    wanted += [0xE0100, 0xE01EF, 0xE0FFF]
    assert [hex(c) for c in wanted if c not in ignorable] == []
    for visible in "a A1 -_\t\n":
        assert ord(visible) not in ignorable
    assert 0xFFF9 not in ignorable  # interlinear annotations are shown
    assert 0x0600 not in ignorable  # a prepended concatenation mark is shown


def test_the_default_ignorable_code_points_agree_with_the_python_database() -> None:
    """Every format character Python knows is default-ignorable but for the exceptions
    Unicode's derivation names; so is every variation selector."""
    ignorable = skeleton.default_ignorable()
    shown = {*range(0xFFF9, 0xFFFC), *range(0x13430, 0x13441)}
    prepended = {*range(0x0600, 0x0606), 0x06DD, 0x070F, 0x0890, 0x0891, 0x08E2}
    prepended |= {0x110BD, 0x110CD}
    for cp in range(0x110000):
        if unicodedata.category(chr(cp)) == "Cf" and not chr(cp).isspace():
            assert cp in ignorable or cp in shown | prepended, hex(cp)
    selectors = [*range(0x180B, 0x180E), 0x180F, *range(0xFE00, 0xFE10)]
    assert all(cp in ignorable for cp in [*selectors, *range(0xE0100, 0xE01F0)])


def test_the_confusables_are_read_in_full() -> None:
    found = skeleton.prototypes()
    assert len(found) == 6565  # the file's own "total"
    assert found[0x0430] == "a"  # CYRILLIC SMALL LETTER A
    assert found[0x0031] == "l"  # DIGIT ONE
    assert found[0x006D] == "rn"  # LATIN SMALL LETTER M
    assert 0x0061 not in found  # a prototype is not mapped further


def test_the_data_is_read_once() -> None:
    assert skeleton.default_ignorable() is skeleton.default_ignorable()
    assert skeleton.prototypes() is skeleton.prototypes()


def test_the_skeleton_is_uts39s() -> None:
    assert skeleton.skeleton("p\u0430y\u00adpal") == skeleton.skeleton("paypal")
    assert skeleton.skeleton("\u0440\u0430\u0443\u0440\u0430l") == skeleton.skeleton("paypal")
    assert skeleton.skeleton("paypal") != skeleton.skeleton("paypa1x")
    assert skeleton.skeleton("\u00e9") == unicodedata.normalize("NFD", "\u00e9")


def numbered(*lines: str) -> list[tuple[int, str]]:
    return list(enumerate(lines, 1))


def test_the_parsers_read_ranges_and_sequences() -> None:
    got = skeleton.parse_ignorable(
        iter(
            numbered(
                "00AD ; Default_Ignorable_Code_Point", "2060..2062 ; Default_Ignorable_Code_Point"
            )
        ),
        "t",
    )
    assert got == frozenset({0xAD, 0x2060, 0x2061, 0x2062})
    assert skeleton.parse_prototypes(iter(numbered("0430;0061", "006D;0072 006E")), "t") == {
        0x430: "a",
        0x6D: "rn",
    }


@pytest.mark.parametrize(
    "line",
    [
        "00AD ; White_Space",
        "ZZZZ ; Default_Ignorable_Code_Point",
        "2062..2060 ; Default_Ignorable_Code_Point",
        "110000 ; Default_Ignorable_Code_Point",
    ],
)
def test_a_bad_ignorable_line_is_refused(line: str) -> None:
    with pytest.raises(skeleton.UnicodeDataError, match="t:1"):
        skeleton.parse_ignorable(iter(numbered(line)), "t")


@pytest.mark.parametrize(
    "lines", [("0430",), ("0430;",), ("0430;00G1",), ("0430;0061", "0430;0062")]
)
def test_a_bad_confusables_line_is_refused(lines: tuple[str, ...]) -> None:
    with pytest.raises(skeleton.UnicodeDataError, match="t:"):
        skeleton.parse_prototypes(iter(numbered(*lines)), "t")
