"""The catalogue: the steps that exist, defined in code."""

from __future__ import annotations

import difflib
import functools
import inspect
import math
import os
import typing
import warnings
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Generic, Literal, TypedDict, TypeVar, Unpack, overload

from pydantic import BaseModel

from pivotal.declarations.exposure import Moves
from pivotal.declarations.identity import ArgKind, identity_of, kind_of
from pivotal.declarations.plan import DEFAULT_LIMITS, PlanLimits
from pivotal.declarations.plan_errors import ErrorCode
from pivotal.declarations.retry import NO_RETRY, RetryPolicy, RetryPredicate
from pivotal.errors import CatalogueError
from pivotal.jsontext import encoder
from pivotal.kinds import KIND_ORDER as KIND_ORDER
from pivotal.kinds import KIND_TEXT as KIND_TEXT
from pivotal.kinds import StepKind as StepKind
from pivotal.records import quick_init
from pivotal.sagas.outbox import check_message
from pivotal.sagas.progress import check as check_progress

if TYPE_CHECKING:
    from pivotal.declarations.plan import Provenance
    from pivotal.declarations.policy import ApprovalPolicy, Rollout
    from pivotal.declarations.rules import PlanRule


class ProgressReporter(typing.Protocol):
    """Keeps one call's progress reports (``pivotal.sagas.progress.Reporter``)."""

    def __call__(
        self, message: str, done: float | None, total: float | None
    ) -> Awaitable[None]: ...


@quick_init
@dataclass(frozen=True, slots=True)
class StepContext:
    """What an action, undo or lookup is told about the call it serves."""

    saga_id: str
    index: int
    step: str
    key: str  # idempotency key of this call: "{saga}:{index}" or "{saga}:{index}:undo"
    action_key: str  # the forward action's key (an undo finds the effect with it)
    attempt: int
    provenance: Provenance | None = None
    traceparent: str | None = None  # W3C trace context of this call: pass it on to join
    outbox: list[dict[str, Any]] = field(default_factory=list, compare=False, repr=False)
    # keeps this call's progress reports (``progress``); None: nobody keeps them
    reporter: ProgressReporter | None = field(default=None, compare=False, repr=False)

    async def progress(
        self, message: str = "", *, done: float | None = None, total: float | None = None
    ) -> None:
        """Say how far long work got, e.g. ``await ctx.progress("copying", done=40,
        total=100)``: operators see it live, with how long the call has run, its attempt and
        the worker holding the saga's lease. A report also renews the lease. Kept at most
        once a second; ``ProgressError`` says why a report cannot be kept, and ``LeaseLost``
        that another process took the saga over (stop: this call's outcome will not be
        recorded). A report the ledger could not keep is dropped, the call goes on."""
        if self.reporter is not None:
            await self.reporter(message, done, total)
        else:
            check_progress(message, done, total)

    def publish(self, type: str, data: Mapping[str, Any]) -> None:
        """Announce something to the rest of the company (a CRM, an email service, the agent
        that asked). The message is committed with this call's outcome, in the same
        transaction, and only if the call succeeds; a relay delivers it at least once.
        ``data`` must be JSON of at most 20 KB; ``MessageError`` says why it is not.

        It belongs to this call: when the call's reply is lost (an exception after the
        effect, or the process dies) and the success is then found by ``lookup``, there is
        no call whose messages could be committed. What a success must always announce is
        declared on the step instead, ``announce=fn`` (see ``Announce``)."""
        self.outbox.append(check_message(type, data))


class NothingToUndo(str):
    """What an undo returns when it found no effect to reverse (its note says why); such an
    undo is recorded, and counted, as a no-op."""

    __slots__ = ()


class Partial(str):
    """What an undo returns when it could not restore what was there: compensation is
    semantic (a release after the units were re-sold, a refund of less than was charged).
    Its note says what was and was not reversed, e.g. ``Partial("refunded 150 of 180: 30
    was already paid out")``. Such an undo is settled (not retried, not dead-lettered) and
    recorded as ``undo_partial``; the saga still ends compensated, its reason naming it."""

    __slots__ = ()


Action = Callable[[Any, StepContext], Awaitable[Any]]
Undo = Callable[[Any, Any, StepContext], Awaitable[str | None]]
"""``undo(args, result, ctx)``; it may return a note on what it did, kept on its event."""
Lookup = Callable[[Any, StepContext], Awaitable[Any]]
Precondition = Callable[[Any], "str | None"]
Announcement = tuple[str, Mapping[str, Any]]
"""One message a step announces: its type and its data (JSON, at most 20 KB)."""
Announce = Callable[[Any, Any], Sequence[Announcement]]
"""``announce(args, result)``: the messages a step's success announces, derived from its
arguments and its result as recorded (JSON data). Side-effect free and deterministic: it runs
however the success was established (the action returned, a lookup found the effect after a
lost reply or a crash, a settling repeat) and its messages are committed with the success."""

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


class StepOptions(TypedDict, total=False):
    """What may be said of any step when it is declared (each checked by a type checker)."""

    name: str  # default: the action's name
    description: str  # default: the action's docstring
    args: type[BaseModel]  # default: the action's first parameter's annotation
    lookup: Lookup
    precondition: Precondition
    announce: Announce
    retry: RetryPolicy
    timeout: float
    lookup_lag: float
    repeatable: bool
    repeat_before_undo: bool
    retryable: bool
    retry_on: RetryPredicate
    no_effect_on: tuple[type[BaseException], ...]
    strict: bool
    moves: Moves  # the value it moves: money, its currency, for which subject


class UndoOptions(StepOptions, total=False):
    """What may also be said of a compensable step: how its undo is retried, and whether
    its effect is a hold that lapses on its own (``lapses_after`` seconds)."""

    undo_retry: RetryPolicy
    dead_letter_retry: RetryPolicy
    lapses_after: float | None  # None: its effect stays until it is undone


A = TypeVar("A", bound=BaseModel)
R = TypeVar("R")

ActionOf = Callable[[A, StepContext], Awaitable[R]]
"""An action taking the argument model ``A`` and returning ``R``."""
UndoOf = Callable[[A, Any, StepContext], Awaitable[str | None]]
"""An undo of an action taking ``A``: ``undo(args, result, ctx)``. ``result`` is the action's
result as recorded (JSON data), or ``None`` when its outcome is unknown."""


def action_key(saga_id: str, index: int) -> str:
    return f"{saga_id}:{index}"


def undo_key(saga_id: str, index: int) -> str:
    return f"{saga_id}:{index}:undo"


@dataclass(frozen=True, slots=True)
class Step:
    """One catalogue entry.

    ``action(args, ctx)`` performs the effect and returns a JSON-able result (or a pydantic
    model). ``undo(args, result, ctx)`` reverses it; ``result`` is ``None`` when the action's
    outcome is unknown, so an undo must find the effect by ``ctx.action_key`` and treat
    "not found" as already undone. ``lookup(args, ctx)`` returns the recorded result of the
    effect made with ``ctx.key``, or ``None`` when there is none. ``precondition(args)`` is
    side-effect free and returns a reason when it does not hold. ``announce(args, result)``
    returns the messages the step's success announces, ``[(type, data), ...]``: they are
    committed with the success however it was established (see ``Announce``); messages
    published with ``ctx.publish`` exist only when the action itself returned.

    An exception from the action means "outcome unknown" unless it is ``Permanent``, an
    ``Abort``, or one of ``no_effect_on`` (exceptions the action raises only when it
    certainly took no effect); transient errors are retried with the same key.

    Every call is bounded: by ``timeout``, else by the catalogue's ``default_timeout``. A
    call cut off by its timeout (or by the loss of the lease) is abandoned, and may still
    land: until its start plus the timeout plus the catalogue's ``doubt_grace`` has passed
    nothing concludes it took no effect, and nothing calls the step again. An SDK call run
    in a thread (``asyncio.to_thread``) cannot be stopped by the timeout: give the SDK a
    timeout of its own shorter than the step's, or a longer ``doubt_grace``.
    """

    name: str
    description: str
    kind: StepKind
    args_model: type[BaseModel]
    action: Action
    undo: Undo | None = None
    lookup: Lookup | None = None
    precondition: Precondition | None = None
    announce: Announce | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    undo_retry: RetryPolicy = field(default_factory=lambda: RetryPolicy(max_attempts=5))
    dead_letter_retry: RetryPolicy = field(
        default_factory=lambda: RetryPolicy(max_attempts=8, base_delay=60.0, max_delay=3600.0)
    )
    timeout: float | None = None  # None: the catalogue's default_timeout
    # seconds the lookup may lag behind the provider's writes: its "not found" counts only
    # that long after the attempt asked about can no longer land
    lookup_lag: float = 0.0
    # whether the action may be called again with its key while an earlier attempt may have
    # taken effect (the provider deduplicates by key); False: it is called again only once
    # its lookup found no effect after no attempt could land any more
    repeatable: bool = True
    # a compensable step whose outcome stayed unknown is undone by its key (its undo finds
    # the effect, or treats "not found" as done); True: it is first repeated once with its
    # key, so that the undo gets the result (only when its provider replays by key and its
    # undo needs the result: a repeat can make the very effect it then reverses)
    repeat_before_undo: bool = False
    retryable: bool = True
    retry_on: RetryPredicate | None = None
    no_effect_on: tuple[type[BaseException], ...] = ()
    strict: bool = True  # no coercion of arguments: true is not 1, "180" is not 180
    # a compensable step whose effect is a hold the provider lets lapse on its own (a card
    # authorisation, a stock reservation with an expiry): seconds after it is made; see
    # ``pivotal.declarations.holds``
    lapses_after: float | None = None
    # the value it moves (``exposure.Moves``): which argument is money, in which currency,
    # for which subject (the order, the customer); counted by the policies and the rollout,
    # and reserved in the ledger with the saga
    moves: Moves | None = None

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("_", "").isalnum():
            raise CatalogueError(f"step name {self.name!r} must be a non-empty identifier")
        if not (isinstance(self.args_model, type) and issubclass(self.args_model, BaseModel)):
            raise CatalogueError(f"step {self.name!r}: arguments must be a pydantic model")
        if self.kind is StepKind.COMPENSABLE and self.undo is None:
            raise CatalogueError(f"compensable step {self.name!r} has no undo")
        if self.kind is not StepKind.COMPENSABLE and self.undo is not None:
            raise CatalogueError(
                f"{self.kind.value} step {self.name!r} cannot have an undo: only compensable "
                "steps are undone"
            )
        if self.timeout is not None and self.timeout <= 0:
            raise CatalogueError(f"step {self.name!r}: timeout must be positive")
        if self.repeat_before_undo and (
            self.kind is not StepKind.COMPENSABLE or not self.repeatable
        ):
            raise CatalogueError(
                f"step {self.name!r}: repeat_before_undo is for a compensable step whose "
                "provider replays by key (repeatable)"
            )
        if self.lookup_lag < 0:
            raise CatalogueError(f"step {self.name!r}: lookup_lag must be 0 or more")
        if self.lapses_after is not None:
            self._check_lapse(self.lapses_after)
        if self.moves is not None:
            if not isinstance(self.moves, Moves):
                raise CatalogueError(f"step {self.name!r}: moves must be a Moves(...)")
            self.moves.check(self.name, self.args_model)
        if self.announce is not None and not callable(self.announce):
            raise CatalogueError(
                f"step {self.name!r}: announce must be a function (args, result) returning "
                "[(type, data), ...]"
            )

    def _check_lapse(self, lapses_after: float) -> None:
        if self.kind is not StepKind.COMPENSABLE:
            raise CatalogueError(
                f"{self.kind.value} step {self.name!r} cannot lapse: only a compensable "
                "step's effect is a hold (lapses_after)"
            )
        if (
            isinstance(lapses_after, bool)
            or not isinstance(lapses_after, int | float)
            or not 0 < lapses_after < math.inf
        ):
            raise CatalogueError(
                f"step {self.name!r}: lapses_after must be a positive, finite number of "
                f"seconds, not {lapses_after!r}"
            )

    @property
    def policy(self) -> RetryPolicy:
        """The retry policy in force for the forward action."""
        return self.retry if self.retryable else NO_RETRY

    def parse_args(self, raw: Mapping[str, Any]) -> BaseModel:
        """The arguments as the model reads them from JSON (strictly, unless the step was
        declared with ``strict=False``: then "180" may become 180)."""
        return self.args_model.model_validate_json(_ARGS_JSON(raw), strict=self.strict or None)


# ``json.dumps(raw, default=str)``, its encoder made once
_ARGS_JSON = encoder(default=str)


def _args_model_of(fn: Callable[..., Any]) -> type[BaseModel]:
    params = list(inspect.signature(fn).parameters)
    hints = typing.get_type_hints(fn)
    model = hints.get(params[0]) if params else None
    if isinstance(model, type) and issubclass(model, BaseModel):
        return model
    raise CatalogueError(
        f"{fn.__name__}: annotate the first parameter with a pydantic model or pass args="
    )


async def _no_undo_yet(args: Any, result: Any, ctx: StepContext) -> str | None:
    """Stands in for the undo of a step declared with ``compensable()`` until ``@x.undo``
    names it; a catalogue holding it is refused before anything could call it."""
    raise CatalogueError(f"compensable step {ctx.step!r} has no undo")


class Compensable(Generic[A, R]):
    """What ``@catalogue.compensable()`` returns: the action, registered, waiting for its undo.

    Declare the undo right below it with ``@<action>.undo``; it is typed against the action's
    argument model. Until it is declared, the catalogue refuses to be used: an ``App`` is not
    built with it and no plan naming it is validated. Calling the object calls the action.
    """

    def __init__(self, catalogue: Catalogue, name: str, action: ActionOf[A, R]) -> None:
        functools.update_wrapper(self, action)
        self.catalogue = catalogue
        self.name = name
        self.action = action

    def __call__(self, args: A, ctx: StepContext) -> Awaitable[R]:
        return self.action(args, ctx)

    def undo(self, fn: UndoOf[A]) -> UndoOf[A]:
        """Decorator declaring ``fn(args, result, ctx)`` as this step's undo; returns ``fn``."""
        self.catalogue._set_undo(self.name, fn)
        return fn

    @property
    def step(self) -> Step:
        """The catalogue entry (refused while the undo is missing)."""
        return self.catalogue[self.name]

    def __repr__(self) -> str:
        return f"<compensable step {self.name!r} of catalogue {self.catalogue.name!r}>"


Unbound = Literal["allow", "warn", "refuse"]


DEFAULT_TIMEOUT = 60.0  # seconds a call of a step may take when it says nothing
MAX_TIMEOUT = 3600.0
DOUBT_GRACE = 30.0  # after its timeout, how long an abandoned call may still land
RECHECK_AFTER = 5.0  # a wait longer than this re-validates the plan before the next step


class UnboundArgument(UserWarning):
    """A catalogue that asked for it (``unbound="warn"``) has an argument of money or
    identity that no rule binds."""


class Catalogue:
    """A named set of steps a planner may choose from.

    ``unbound``: what to do, when the catalogue is checked, about an argument that moves
    money or names an entity (declared with ``identity.MONEY`` or an ``Identity``) which no
    rule binds to a trusted fact, makes agree across steps, or declares free: nothing
    (``"allow"``), a ``UnboundArgument`` warning, or a refusal (``"refuse"``).

    ``default_timeout``: how long a call of a step without its own ``timeout`` may take;
    ``max_timeout``: the most any step may declare. ``doubt_grace``: how long after its
    timeout an abandoned call is still taken to be able to land.

    ``recheck_after``: how long a saga may wait (for a retry, a worker, a crashed process's
    lease) before the step that follows the wait re-validates the whole plan against fresh
    facts, as at submission. The plan is always re-validated just before the point of no
    return, and before the step an approval gated.

    ``about``: the keys of a request's trusted context that say what a plan of this
    catalogue is about (an order, the customer who asked); by default the arguments its
    steps declare as entities. The planning loop records them with the plan, and a plan
    whose calls or facts name anything else is refused.

    ``checked``: the file ``pivotal check-provider --record`` wrote for this catalogue's
    providers; an orchestrator (every worker, ``execute``, the API's) reads it when made
    and warns where the catalogue declares a lookup lag, a doubt grace or a key reuse its
    providers were seen not to honour.

    ``rollout``: a ``policy.Rollout``: agent-proposed plans execute below an exposure; above
    it they are kept in shadow or refused (step 6 of the migration: low-value sagas first).
    """

    def __init__(
        self,
        name: str,
        description: str = "",
        *,
        approval: ApprovalPolicy | None = None,
        rollout: Rollout | None = None,
        rules: Iterable[PlanRule] = (),
        limits: PlanLimits | None = None,
        unbound: Unbound = "allow",
        about: Iterable[str] | None = None,
        default_timeout: float = DEFAULT_TIMEOUT,
        max_timeout: float = MAX_TIMEOUT,
        doubt_grace: float = DOUBT_GRACE,
        recheck_after: float = RECHECK_AFTER,
        checked: str | os.PathLike[str] | None = None,
    ) -> None:
        if unbound not in ("allow", "warn", "refuse"):
            raise CatalogueError(f"unbound must be 'allow', 'warn' or 'refuse', not {unbound!r}")
        if (
            not 0 < default_timeout <= max_timeout < math.inf
            or not 0 <= doubt_grace < math.inf
            or not recheck_after >= 0
        ):
            raise CatalogueError(
                "a catalogue needs 0 < default_timeout <= max_timeout (finite: every call is "
                "bounded), 0 <= doubt_grace (finite) and recheck_after >= 0"
            )
        self.recheck_after = recheck_after
        # what the last provider check observed (``pivotal check-provider --record``): a
        # process that runs sagas warns at start where this catalogue declares less
        self.checked = checked
        self.default_timeout = default_timeout
        self.max_timeout = max_timeout
        self.doubt_grace = doubt_grace
        self.name = name
        self.description = description
        self.approval = approval
        self.rollout = rollout  # None: agent plans execute whatever they expose
        self.rules: list[PlanRule] = list(rules)
        self.limits = limits or DEFAULT_LIMITS
        self.unbound = unbound
        self.about = None if about is None else tuple(about)
        self._steps: dict[str, Step] = {}
        self._without_undo: list[str] = []  # declared with compensable(), no @x.undo yet

    def rule(self, *rules: PlanRule) -> None:
        """Add rules over the whole plan (see ``pivotal.declarations.rules``)."""
        self.rules.extend(rules)

    def check(self) -> None:
        """Refuse a finished catalogue with a compensable step that has no undo, rules that
        name steps it lacks, or an approval policy that can never fire on it. An ``App``
        checks each of its catalogues."""
        self._require_undos()
        self._check_about()
        for rule in self.rules:
            unknown = sorted(rule.mentions() - set(self._steps))
            if unknown:
                raise CatalogueError(
                    f"catalogue {self.name!r}: the rule '{rule.describe()}' names steps it "
                    f"does not have: {', '.join(unknown)}"
                )
        never = getattr(self.approval, "never_fires", None)
        reason = never(self) if callable(never) else None
        if reason:
            raise CatalogueError(
                f"catalogue {self.name!r}: its approval policy can never fire: {reason}"
            )
        for policy in (self.approval, self.rollout):
            named = getattr(policy, "undeclared", None)
            reason = named(self) if callable(named) else None
            if reason:
                raise CatalogueError(f"catalogue {self.name!r}: {reason}")
        self._check_bindings()

    def unbounded_value(self) -> list[str]:
        """The steps that move value (they declare ``moves``, or take an argument of money)
        which no ``AtMost`` rule bounds: a plan may call them as often as its size allows."""
        from pivotal.declarations.rules import AtMost

        bounded = {rule.step for rule in self.rules if isinstance(rule, AtMost)}
        return [
            step.name
            for step in self._steps.values()
            if step.name not in bounded
            and (
                step.moves is not None
                or any(
                    kind_of(info) is ArgKind.MONEY for info in step.args_model.model_fields.values()
                )
            )
        ]

    def unbound_arguments(self) -> list[tuple[str, str, ArgKind]]:
        """(step, argument, kind) of every argument of money or identity no rule binds."""
        return [
            (step.name, arg, kind)
            for step in self._steps.values()
            for arg, info in step.args_model.model_fields.items()
            if (kind := kind_of(info)) is not None
            and not any(rule.binds(step.name, arg) for rule in self.rules)
        ]

    def _check_bindings(self) -> None:
        if self.unbound == "allow":
            return
        repeatable = self.unbounded_value()
        if repeatable:
            text = (
                f"catalogue {self.name!r}: no rule bounds how often a plan may call "
                f"{', '.join(repeatable)}, which move value; bound each (AtMost)"
            )
            if self.unbound == "refuse":
                raise CatalogueError(text)
            warnings.warn(text, UnboundArgument, stacklevel=3)
        loose = self.unbound_arguments()
        if not loose:
            return
        listed = ", ".join(f"{step}.{arg} ({kind.value})" for step, arg, kind in loose)
        text = (
            f"catalogue {self.name!r}: no rule binds {listed}; bind each to a trusted fact "
            "(FromFact, FromFactRows), make it agree across steps (Agree), or declare it "
            "free (Free)"
        )
        if self.unbound == "refuse":
            raise CatalogueError(text)
        warnings.warn(text, UnboundArgument, stacklevel=3)

    def subject_keys(self) -> tuple[str, ...]:
        """The request context keys that name what a plan of this catalogue is about, as
        declared: ``about=``; else the subjects its steps move value for
        (``Moves(per=...)``); else its entity arguments whose kind can be a subject (an
        order, a customer). A currency, a SKU or a warehouse never is
        (``Identity.names_subject``): a request naming only one is about no one."""
        if self.about is not None:
            return self.about
        moved = {p for step in self._steps.values() if step.moves for p in step.moves.subjects}
        if moved:
            return tuple(sorted(moved))
        names = {
            arg
            for step in self._steps.values()
            for arg, info in step.args_model.model_fields.items()
            if (identity := identity_of(info)) is not None and identity.names_subject
        }
        return tuple(sorted(names))

    def _check_about(self) -> None:
        """Refuse ``about=`` naming an argument that names no possible subject."""
        for key in self.about or ():
            for step in self._steps.values():
                identity = identity_of(step.args_model.model_fields.get(key))
                if identity is not None and not identity.names_subject:
                    raise CatalogueError(
                        f"catalogue {self.name!r}: about names {key!r}, which step "
                        f"{step.name!r} takes as a {identity.kind}: a request is about an "
                        f"order or a customer, never a {identity.kind}"
                    )

    def _require_undos(self) -> None:
        if len(self._without_undo) == 1:
            [name] = self._without_undo
            raise CatalogueError(
                f"catalogue {self.name!r}: compensable step {name!r} has no undo; declare it "
                f"with @{name}.undo below the action"
            )
        if self._without_undo:
            names = ", ".join(repr(n) for n in self._without_undo)
            raise CatalogueError(
                f"catalogue {self.name!r}: compensable steps {names} have no undo; declare "
                f"each with @<step>.undo below its action (@{self._without_undo[0]}.undo)"
            )

    def _set_undo(self, name: str, undo: Undo) -> None:
        if name not in self._without_undo:
            raise CatalogueError(f"step {name!r} of catalogue {self.name!r} already has an undo")
        self._steps[name] = replace(self._steps[name], undo=undo)  # keeps its place
        self._without_undo.remove(name)

    @property
    def asks_app(self) -> bool:
        """Whether validating a plan calls the app's code: a step's precondition, or a rule
        that reads the trusted facts (an app's own ``Check`` among them)."""
        return any(s.precondition is not None for s in self._steps.values()) or any(
            rule.needs_facts for rule in self.rules
        )

    def timeout_of(self, step: Step) -> float:
        """How long one call of ``step`` (action, undo or lookup) may take."""
        return step.timeout if step.timeout is not None else self.default_timeout

    def add(self, step: Step) -> Step:
        if step.timeout is not None and step.timeout > self.max_timeout:
            raise CatalogueError(
                f"step {step.name!r}: timeout {step.timeout:g}s is above the catalogue's "
                f"max_timeout of {self.max_timeout:g}s"
            )
        if step.name in self._steps:
            raise CatalogueError(f"catalogue {self.name!r} already has a step {step.name!r}")
        self._steps[step.name] = step
        return step

    def step(
        self, kind: StepKind, *, undo: Undo | None = None, **options: Unpack[UndoOptions]
    ) -> Callable[[F], F]:
        """Decorator declaring ``fn`` as the action of a new step; returns ``fn`` unchanged.

        The lower-level form of ``compensable``, ``pivot`` and ``retriable``: ``kind`` is
        given, and a compensable step must be given its ``undo`` here."""

        def register(fn: F) -> F:
            given: dict[str, Any] = dict(options)
            name = given.pop("name", None) or fn.__name__
            description = given.pop("description", None) or inspect.getdoc(fn) or ""
            args = given.pop("args", None) or _args_model_of(fn)
            for policy in ("retry", "undo_retry", "dead_letter_retry"):
                if given.get(policy) is None:
                    given.pop(policy, None)  # the step's default policy
            self.add(
                Step(
                    name=name,
                    description=description.strip(),
                    kind=kind,
                    args_model=args,
                    action=fn,
                    undo=undo,
                    **given,
                )
            )
            return fn

        return register

    @overload
    def compensable(
        self, *, undo: None = None, **options: Unpack[UndoOptions]
    ) -> Callable[[ActionOf[A, R]], Compensable[A, R]]: ...

    @overload
    def compensable(self, *, undo: Undo, **options: Unpack[UndoOptions]) -> Callable[[F], F]: ...

    def compensable(
        self, *, undo: Undo | None = None, **options: Unpack[UndoOptions]
    ) -> Callable[[Any], Any]:
        """Declare a step that can be undone, before the point of no return.

        Write its undo right below it::

            @payments.compensable()
            async def authorize(args: Payment, ctx: StepContext) -> dict[str, str]: ...

            @authorize.undo
            async def void(args: Payment, result: Any, ctx: StepContext) -> str | None: ...

        ``undo=fn`` declares the same step in one call and returns the action unchanged, for
        an undo defined elsewhere. ``undo_retry`` is the undo's retry policy within a pass;
        ``dead_letter_retry`` how a parked undo is retried by the sweeper.
        """
        declare = self.step(StepKind.COMPENSABLE, undo=undo or _no_undo_yet, **options)
        if undo is not None:
            return declare

        def register(fn: ActionOf[A, R]) -> Compensable[A, R]:
            declare(fn)
            step_name = options.get("name") or fn.__name__
            self._without_undo.append(step_name)
            return Compensable(self, step_name, fn)

        return register

    def pivot(self, *, undo: None = None, **options: Unpack[StepOptions]) -> Callable[[F], F]:
        """Declare the point-of-no-return step (at most one per plan); returns the action.

        ``undo`` exists only to be refused: a pivot is never undone."""
        return self.step(StepKind.PIVOT, undo=undo, **options)

    def retriable(self, *, undo: None = None, **options: Unpack[StepOptions]) -> Callable[[F], F]:
        """Declare a step that runs after the pivot and is retried until it succeeds; returns
        the action. ``undo`` exists only to be refused: a retriable step is never undone."""
        return self.step(StepKind.RETRIABLE, undo=undo, **options)

    def why_not_a_step(self, name: str) -> tuple[ErrorCode, str]:
        """What a plan is told of a call of ``name``, which is not a step of this
        catalogue: that it is an undo (run by the orchestrator, never planned), or the
        closest step's name and every step's."""
        undo_names = {getattr(s.undo, "__name__", "") for s in self if s.undo is not None}
        if name in undo_names:
            return (
                ErrorCode.UNDO_NOT_CALLABLE,
                f"{name!r} is a compensation; compensations are run by the orchestrator and "
                "cannot be planned. Remove this step.",
            )
        known = sorted(s.name for s in self)
        close = difflib.get_close_matches(name, known, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        return (
            ErrorCode.UNKNOWN_STEP,
            f"{name!r} is not in catalogue {self.name!r}.{hint} Available steps: "
            + ", ".join(known),
        )

    def get(self, name: str) -> Step | None:
        if self._without_undo:
            self._require_undos()
        return self._steps.get(name)

    def __getitem__(self, name: str) -> Step:
        if self._without_undo:
            self._require_undos()
        return self._steps[name]

    def __contains__(self, name: object) -> bool:
        return name in self._steps

    def __iter__(self) -> Iterator[Step]:
        self._require_undos()
        return iter(self._steps.values())

    def __len__(self) -> int:
        return len(self._steps)

    def __repr__(self) -> str:
        return f"Catalogue({self.name!r}, steps={list(self._steps)})"
