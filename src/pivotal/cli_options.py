"""Option types shared by every command module (kept apart to avoid import cycles)."""

from __future__ import annotations

from typing import Annotated

import typer

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]
AllFlag = Annotated[bool, typer.Option("--all", help="Include resolved ones")]
