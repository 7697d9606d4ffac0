"""The example's simulated providers share one SQLite connection between threads: a
precondition asks (and consumes its scheduled fault) on a facts thread while the
providers' calls run elsewhere, so no transaction may begin inside another's."""

from __future__ import annotations

import threading
from decimal import Decimal

from pivotal.examples.commerce.services import CommerceServices


def test_faults_and_calls_from_many_threads_at_once_never_nest_transactions() -> None:
    services = CommerceServices()
    services.order("o-1", "ada")
    errors: list[BaseException] = []
    start = threading.Barrier(9)

    def check() -> None:
        start.wait()
        for _ in range(300):
            try:
                services.faults.check("reserve_stock")
            except BaseException as exc:  # collected: the test fails on any
                errors.append(exc)

    def charge() -> None:
        start.wait()
        for n in range(300):
            try:
                services.charge("o-1", Decimal("1.00"), key=f"k-{n}")
            except BaseException as exc:
                errors.append(exc)

    threads = [threading.Thread(target=check) for _ in range(8)]
    threads.append(threading.Thread(target=charge))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert len(services.rows("payments")) == 300
