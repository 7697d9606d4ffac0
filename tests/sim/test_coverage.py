"""Transition coverage measured on the real driver: the runs of a corpus of seeds take every
row of the saga machine that the driver can take, and never one it declares unreachable.

A change that makes a reachable row no longer taken fails here; so does one that takes a
row declared unreachable. The corpus is a few seeds that take every row together, picked
from the seeds ``python -m pivotal.testing.sim --seed 0 --runs 8000 --coverage`` names for
each row: a change to the engine may change a run so that it no longer takes what it took,
and another seed is picked then.
"""

from __future__ import annotations

import pytest

from pivotal.engine.machine import REACHABLE, TABLE
from pivotal.testing.sim.explore import explore

# fmt: off
CORPUS = (30, 113, 272, 526, 618, 675, 811, 836, 841, 894, 902, 1129, 1235, 1252, 1413, 7749)
# fmt: on


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
