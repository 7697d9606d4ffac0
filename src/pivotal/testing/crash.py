"""Crashing on purpose: hooks that stop the engine at a protocol point."""

from __future__ import annotations

import os
import signal
from collections import Counter
from dataclasses import dataclass, field

from pivotal.hooks import Point


class SimulatedCrash(BaseException):
    """The process 'vanished' here: nothing after this point ran or was recorded.

    A ``BaseException`` so that no ``except Exception`` in the engine or in user code can
    swallow it, as nothing can catch a real ``kill -9``.
    """


@dataclass(frozen=True)
class CrashSite:
    """The ``occurrence``-th time the engine reaches ``point`` for step ``index``."""

    point: Point
    index: int
    occurrence: int = 1

    def __str__(self) -> str:
        return f"{self.point.value}:{self.index}:{self.occurrence}"

    @classmethod
    def parse(cls, text: str) -> CrashSite:
        """``point:index[:occurrence]``, e.g. ``after_effect:2``."""
        parts = text.split(":")
        if len(parts) not in (2, 3):
            raise ValueError(f"crash site {text!r} must be point:index[:occurrence]")
        return cls(Point(parts[0]), int(parts[1]), int(parts[2]) if len(parts) == 3 else 1)


@dataclass
class CrashAt:
    """A hook that crashes at one site: in-process (raise) or for real (SIGKILL itself)."""

    site: CrashSite
    kill: bool = False
    seen: Counter[tuple[Point, int]] = field(default_factory=Counter)
    fired: bool = False

    def __call__(self, point: Point, index: int) -> None:
        self.seen[(point, index)] += 1
        site = self.site
        if (point, index) == (site.point, site.index) and self.seen[(point, index)] == (
            site.occurrence
        ):
            self.fired = True
            if self.kill:
                os.kill(os.getpid(), signal.SIGKILL)
            raise SimulatedCrash(str(site))


@dataclass
class Trace:
    """A hook that records every site reached, in order."""

    sites: list[CrashSite] = field(default_factory=list)
    _seen: Counter[tuple[Point, int]] = field(default_factory=Counter)

    def __call__(self, point: Point, index: int) -> None:
        self._seen[(point, index)] += 1
        self.sites.append(CrashSite(point, index, self._seen[(point, index)]))
