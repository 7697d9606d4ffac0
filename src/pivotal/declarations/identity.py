"""Arguments that name an entity (an order, a customer, a SKU, a currency, an e-mail
address) and the one spelling each has; arguments that move money.

An order written ``"4471 "``, in full-width digits or as ``"4471\\u200b"`` is the same order
to a person and to a lenient lookup, and three different strings to everything else. So an
argument that names an entity is declared as one (``order_id: OrderId``), and then:

- a plan must spell it canonically: any other spelling is refused with ``not_canonical``,
  whose message gives the spelling to use;
- every rule (``Agree``, ``FromFact``, the request's subject, the exposure counted across
  sagas) compares it by that canonical form, through ``comparable`` and nothing else.

The canonical form is Unicode compatibility normalisation (NFKC: full-width digits become
ASCII), with the decimal digits of every other script in ASCII too (a lenient provider
reads "c-\\u0661", an Arabic-Indic one, as "c-1"), without invisible format characters
(zero-width spaces and joiners, the byte order mark, soft hyphens, direction marks) or
surrounding whitespace, then folded to one case when the entity's ids ignore case
(currencies, e-mail addresses). Nothing else is guessed:
``"04471"`` and ``"4471"`` are two orders, and so are ``"4471"`` and ``"4.471e3"``.

    class Payment(BaseModel):
        order_id: OrderId
        amount: Annotated[Decimal, MONEY] = Field(gt=0, le=500)
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.fields import FieldInfo
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema

from pivotal.people.skeleton import ascii_digits

NOT_CANONICAL = "not_canonical"  # the pydantic error type the validator reports by its code

Fold = Literal["keep", "lower", "upper"]


def canonical_text(value: str, fold: Fold = "keep") -> str:
    """``value`` in its one spelling: NFKC, decimal digits of every script in ASCII, no
    format characters, no surrounding whitespace, folded to ``fold``'s case. Applying it
    twice changes nothing more."""
    text = ascii_digits(unicodedata.normalize("NFKC", value))
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Cf").strip()
    if fold == "lower":
        text = text.lower()
    elif fold == "upper":
        text = text.upper()
    return unicodedata.normalize("NFKC", text)


def _unprintable(text: str) -> str | None:
    """The first character no id may hold (control, line or paragraph separator,
    unassigned, private use, surrogate), or None."""
    for ch in text:
        if ch != " " and unicodedata.category(ch) in ("Cc", "Cs", "Co", "Cn", "Zl", "Zp"):
            return ch
    return None


# Kinds of entity that say what is moved or from where, never whom a request is for: a
# currency, a SKU or a warehouse is never the subject of a request, whatever a catalogue says.
NEVER_SUBJECTS = frozenset({"currency", "sku", "warehouse"})


@dataclass(frozen=True, slots=True)
class Identity:
    """Marks an argument that names an entity of ``kind``; use it in ``Annotated``.

    ``fold``: ids of this kind ignore case, and are written in ``"lower"`` or ``"upper"``
    case (``"keep"``: case matters). ``subject``: an entity of this kind can be what a
    request is about (an order, a customer); False for what is moved or from where (a
    product, a location). A kind in ``NEVER_SUBJECTS`` never is."""

    kind: str
    fold: Fold = "keep"
    subject: bool = True

    @property
    def names_subject(self) -> bool:
        """Whether an argument of this kind may be what a request is about."""
        return self.subject and self.kind.casefold() not in NEVER_SUBJECTS

    def canonical(self, value: str) -> str:
        return canonical_text(value, self.fold)

    def _check(self, value: Any) -> Any:
        if not isinstance(value, str):
            return value  # the type it is annotated with refuses it
        spelled = self.canonical(value)
        bad = _unprintable(spelled)
        if bad is not None:
            raise PydanticCustomError(
                "identity_character",
                "a {kind} id cannot hold the character {char} (U+{code})",
                {"kind": self.kind, "char": repr(bad), "code": f"{ord(bad):04X}"},
            )
        if spelled != value:
            raise PydanticCustomError(
                NOT_CANONICAL,
                "{given} is not how this {kind} is written: use {canonical}",
                {"kind": self.kind, "given": _quoted(value), "canonical": _quoted(spelled)},
            )
        return value

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_before_validator_function(self._check, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        found = handler(schema)
        case = {"keep": "", "lower": ", in lower case", "upper": ", in upper case"}[self.fold]
        article = "An" if self.kind[:1].lower() in "aeiou" else "A"
        note = f"{article} {self.kind} id, written exactly as the system of record spells it{case}."
        found["description"] = (
            f"{found['description']} {note}" if found.get("description") else note
        )
        return found


def _quoted(text: str) -> str:
    shown = text.encode("unicode_escape").decode("ascii") if not text.isprintable() else text
    return f"'{shown}'" if len(shown) <= 80 else f"'{shown[:79]}…'"


class ArgKind(StrEnum):
    """What an argument is, for the rules that bind arguments."""

    IDENTITY = "identity"
    MONEY = "money"


NEGATIVE_MONEY = "negative_money"  # the pydantic error type of an amount below 0


@dataclass(frozen=True, slots=True)
class Money:
    """Marks an argument that moves money; use it in ``Annotated`` (``MONEY``).

    An amount of money is at least 0: a negative one would be netted against what goes out
    (an "adjustment" of -300 beside a refund of 400 would count as 100, and nobody would be
    asked). A step whose amount may move value either way declares it ``SIGNED_MONEY``:
    then only what goes out (the amount above 0) is counted toward a threshold or a
    rollout, never netted against what comes back."""

    signed: bool = False

    def _check(self, value: Any) -> Any:
        number = finite_decimal(value)
        if not self.signed and number is not None and number < 0:
            raise PydanticCustomError(
                NEGATIVE_MONEY,
                "an amount of money cannot be below 0 (it is {given}): what goes back is "
                "its own step, never a negative amount",
                {"given": str(value)},
            )
        return value

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self._check, handler(source))


MONEY = Money()
SIGNED_MONEY = Money(signed=True)  # an amount that may be below 0: only what goes out counts

# Ready-made argument types for the entities most catalogues name. ``Field`` comes before
# ``Identity``: the spelling is checked first, and the constraints stay in the JSON Schema.
OrderId = Annotated[str, Field(min_length=1, max_length=64), Identity("order")]
CustomerId = Annotated[str, Field(min_length=1, max_length=64), Identity("customer")]
Sku = Annotated[str, Field(min_length=1, max_length=64), Identity("sku")]
Currency = Annotated[str, Field(pattern=r"^[A-Z]{3}$"), Identity("currency", fold="upper")]

# An address a message may be sent to: ASCII, no space, no control character, no comma,
# semicolon or angle bracket (nothing that could start another header or recipient).
EMAIL_PATTERN = (
    r"^[a-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@"
    r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)+$"
)
Email = Annotated[
    str, Field(max_length=254, pattern=EMAIL_PATTERN), Identity("email address", fold="lower")
]


def identity_of(info: FieldInfo | None) -> Identity | None:
    """The identity an argument's field is declared with, if any."""
    if info is None:
        return None
    return next((m for m in info.metadata if isinstance(m, Identity)), None)


def kind_of(info: FieldInfo | None) -> ArgKind | None:
    """Whether an argument names an entity, moves money, or neither (None)."""
    if info is None:
        return None
    for meta in info.metadata:
        if isinstance(meta, Identity):
            return ArgKind.IDENTITY
        if isinstance(meta, Money):
            return ArgKind.MONEY
    return None


def field_of(model: type[BaseModel] | None, name: str) -> FieldInfo | None:
    if model is None:
        return None
    return model.model_fields.get(name)


_NUMBERS = (int, float, Decimal)


def _numeric(info: FieldInfo | None) -> bool:
    annotation = info.annotation if info is not None else None
    return (
        isinstance(annotation, type)
        and issubclass(annotation, _NUMBERS)
        and not issubclass(annotation, bool)
    )


def comparable(value: object, info: FieldInfo | None = None) -> object:
    """What two values of an argument are compared by, everywhere: an entity's id by its
    canonical spelling; an argument of a number type by its value ("180" and 180.00 are
    one amount); text exactly ("04471" is not "4471"); anything else exactly, numbers by
    value."""
    identity = identity_of(info)
    if identity is not None:
        return ("id", identity.canonical(value)) if isinstance(value, str) else ("raw", value)
    if _numeric(info) or (not isinstance(value, str) and isinstance(value, _NUMBERS)):
        number = finite_decimal(value)
        if number is not None:
            return ("number", number)
    if isinstance(value, str):
        return ("text", value)
    return ("raw", _hashable(value))


def same(a: object, b: object, info: FieldInfo | None = None) -> bool:
    """Whether ``a`` and ``b`` are one value of the argument ``info`` describes."""
    return comparable(a, info) == comparable(b, info)


def finite_decimal(value: object) -> Decimal | None:
    """A number as a finite decimal, else None (text that is no number, a bool, None)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
        return None
    try:
        number = Decimal(str(value))
    except ArithmeticError:  # InvalidOperation, or another a context traps
        return None
    return number if number.is_finite() else None


def _hashable(value: object) -> object:
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _hashable(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(_hashable(v) for v in value)
    return value
