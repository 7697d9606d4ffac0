"""The provider check in a team's own tests, against its sandboxes.

    def test_our_payment_sandbox_keeps_its_promises() -> None:
        assert_promises_kept(sandbox_app(), "checkout", sandbox="tests/sandbox.json")

It fails naming every promise the catalogue relies on that a provider broke (see
``pivotal.provider_check``), and returns the report for more checks of the test's own.
In an ``async`` test, ``(await check_provider(...)).assert_kept()`` does the same.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pivotal.clock import Clock
from pivotal.declarations.app import App
from pivotal.provider_check import CheckReport, Options, SandboxFile, check_provider


def assert_promises_kept(
    app: App,
    catalogue: str,
    *,
    steps: Iterable[str] = (),
    sandbox: str | Path | Mapping[str, Any] | None = None,
    options: Options | None = None,
    clock: Clock | None = None,
) -> CheckReport:
    """Check ``catalogue``'s providers (``app`` must be declared a sandbox) and fail the
    test when one breaks a promise the catalogue relies on. ``sandbox``: the arguments,
    as a sandbox file's path or its value."""
    given = SandboxFile.read(sandbox) if isinstance(sandbox, str | Path) else sandbox
    report = asyncio.run(
        check_provider(app, catalogue, steps=steps, sandbox=given, options=options, clock=clock)
    )
    report.assert_kept()
    return report
