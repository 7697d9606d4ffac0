"""Transition coverage measured on the real driver: the runs of a corpus of seeds take every
row of the saga machine that the driver can take, and never one it declares unreachable.

A change that makes a reachable row no longer taken fails here; so does one that takes a
row declared unreachable. The corpus is the seeds `make explore` names as taking each row
first (`python -m pivotal.testing.sim --runs 3000 --coverage` prints them): a run changed
by the engine's code may no longer take what it took, and another seed is named then.
"""

from __future__ import annotations

import pytest

from pivotal.engine.machine import REACHABLE, TABLE
from pivotal.testing.sim.explore import explore

CORPUS = (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 16, 17, 20, 21, 22, 24, 52, 71, 157, 163, 167, 180, 188, 214, 398, 615, 669)


@pytest.mark.timeout(600)  # virtual time: a run cannot wait, only loop; this is for a loop
def test_the_corpus_takes_every_reachable_row_of_the_machine_on_the_real_driver() -> None:
    found = explore(CORPUS)

    assert not found.failed, "\n".join(found.failures())
    assert found.taken_unreachable() == []
    assert found.missed() == [], f"{len(found.missed())} of {len(REACHABLE)} rows not taken"


def test_every_row_the_driver_cannot_take_says_why() -> None:
    unreachable = [row for row in TABLE if row.unreachable]
    assert {row.id for row in unreachable} == {"gate/rejected/*", "gate/expired/*"}
    assert len(REACHABLE) == len(TABLE) - len(unreachable)
