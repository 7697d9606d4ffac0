"""Replay one simulated run, or explore many.

    python -m pivotal.testing.sim --seed 4711          # replay one run, say what it came to
    python -m pivotal.testing.sim --seed 4711 --show s3  # ... with saga s3's events
    python -m pivotal.testing.sim --runs 2000 --jobs 2 # that many runs, from a random seed

Exit status 1 when a run broke an invariant (each is printed with the command that replays
it), or took a row of the saga machine declared unreachable (``--coverage``, which also
prints the rows taken least often and the reachable rows no run took: some are taken once in
thousands of runs, so a row untaken here is news, not a failure; the suite's corpus of seeds,
``tests/sim/test_coverage.py``, is the check that fails when one is no longer taken).
"""

from __future__ import annotations

import argparse
import random
import sys
import time

from pivotal.testing.sim.explore import explore
from pivotal.testing.sim.run import Settings, simulate


def main(argv: list[str] | None = None) -> int:
    given = argparse.ArgumentParser(prog="python -m pivotal.testing.sim", description=__doc__)
    given.add_argument("--seed", type=int, help="the (first) run's seed; random by default")
    given.add_argument("--runs", type=int, default=1, help="how many runs, seed after seed")
    given.add_argument("--jobs", type=int, default=1, help="processes to share the runs")
    given.add_argument("--sagas", type=int, default=Settings.sagas)
    given.add_argument("--span", type=float, default=Settings.span)
    given.add_argument("--calm", action="store_true", help="no host or provider misbehaves")
    given.add_argument("--alone", action="store_true", help="no person acts")
    given.add_argument("--show", action="append", default=[], help="a saga to print the events of")
    given.add_argument(
        "--coverage",
        action="store_true",
        help="say which rows of the machine the runs took, and how often",
    )
    args = given.parse_args(argv)
    settings = Settings(args.sagas, args.span, not args.calm, not args.alone)
    first = args.seed if args.seed is not None else random.SystemRandom().randrange(10**9)
    started = time.perf_counter()
    if args.runs == 1 and not args.coverage:
        report = simulate(first, settings, show=tuple(args.show))
        for saga_id, lines in report.shown.items():
            print(f"saga {saga_id}:", *lines, sep="\n  ")
        print(f"seed {first}: {report.sagas} sagas, {dict(report.statuses)}")
        print(f"faults: {dict(report.faults)}")
        print(f"a person: {dict(report.acts)}")
        for violation in report.violations:
            print(f"VIOLATION {violation}")
        if report.violations:
            print(f"replay: {report.replay()}")
        return 1 if report.violations else 0
    found = explore(range(first, first + args.runs), settings, jobs=args.jobs)
    took = time.perf_counter() - started
    print(
        f"{found.runs} runs from seed {first}: {found.sagas} sagas in {took:.1f}s, "
        f"{dict(found.statuses)}"
    )
    for failure in found.failures():
        print(failure)
    missed = found.missed()
    if args.coverage:
        for row in found.taken_unreachable():
            print(f"taken, though declared unreachable: {row}")
        for row, times in sorted(found.rows.items(), key=lambda taken: taken[1])[:10]:
            print(f"taken {times} times, seed {found.first[row]} first: {row}")
        for row in missed:
            print(f"not taken: {row}")
        print(f"rows taken: {len(found.rows)}; reachable rows not taken: {len(missed)}")
        print(f"seeds that take every row taken: {sorted(set(found.first.values()))}")
    bad = found.failed or (args.coverage and found.taken_unreachable())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
