"""Pure summary code for the peer benchmark: medians, min-max, same-round ratios, tables.

No third-party imports, so ``tests/unit/test_bench_summary.py`` can load it by path.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence

Result = dict[str, object]

# An fsync or fdatasync call as ``strace -f -y`` prints it: ``fsync(3</path/file>``.
_SYNC = re.compile(r"\b(fsync|fdatasync)\((\d+)<([^>]*)>")


def parse_result(stdout: str) -> Result:
    """The last line of a workload's output that is a JSON object."""
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            parsed = json.loads(line)
            if isinstance(parsed, dict):
                return parsed
    raise ValueError(f"no JSON result in workload output: {stdout[-300:]!r}")


def combine(parts: Sequence[Result]) -> Result:
    """Several processes of one run: all their sagas over the wall time from the first
    start to the last end; their CPU seconds summed (so CPU per saga is all the CPU over
    all the sagas); the largest peak RSS. Other fields are the first process's; every
    process's own result is kept under "parts"."""
    if not parts:
        raise ValueError("no results to combine")

    def total(key: str) -> float:
        return sum(float(str(p[key])) for p in parts)

    sagas = total("sagas")
    start = min(float(str(p["start"])) for p in parts)
    end = max(float(str(p["end"])) for p in parts)
    seconds = max(end - start, 1e-9)
    rss = max(float(str(p["peak_rss_mib"])) for p in parts)
    both: Result = {
        **parts[0],
        "sagas": sagas,
        "start": start,
        "end": end,
        "seconds": seconds,
        "rate": sagas / seconds,
        "peak_rss_mib": rss,
        "processes": len(parts),
        "parts": list(parts),
    }
    if all("worker_cpu_s" in p and "server_cpu_s" in p for p in parts):
        worker, server = total("worker_cpu_s"), total("server_cpu_s")
        both["worker_cpu_s"] = worker
        both["server_cpu_s"] = server
        both["cpu_ms_per_saga"] = 1000 * (worker + server) / max(sagas, 1)
    if all("server_peak_rss_mib" in p for p in parts):
        both["server_peak_rss_mib"] = max(float(str(p["server_peak_rss_mib"])) for p in parts)
    return both


def median(values: Iterable[float]) -> float:
    data = list(values)
    if not data:
        raise ValueError("median of nothing")
    return float(statistics.median(data))


def span(values: Iterable[float]) -> tuple[float, float]:
    data = list(values)
    if not data:
        raise ValueError("span of nothing")
    return min(data), max(data)


def same_round_ratios(ours: Sequence[float], theirs: Sequence[float]) -> list[float]:
    """Round i of ours over round i of theirs: both measured minutes apart at most."""
    if len(ours) != len(theirs):
        raise ValueError("ratios need the same number of rounds on both sides")
    return [a / b for a, b in zip(ours, theirs, strict=True) if b > 0]


def paired_ratios(ours: Sequence[Result], theirs: Sequence[Result]) -> list[float]:
    """Our rate over theirs in each round both measured (results carry their "round"), so
    a system measured in fewer rounds is paired with the same rounds of the other."""
    by_round = {r.get("round"): float(str(r["rate"])) for r in theirs}
    pairs = [(float(str(r["rate"])), by_round.get(r.get("round"))) for r in ours]
    return [a / b for a, b in pairs if b]


def fmt_number(value: float) -> str:
    """Thousands separators; one decimal below 10, none above."""
    return f"{value:,.1f}" if abs(value) < 10 else f"{value:,.0f}"


def fmt_spread(values: Sequence[float]) -> str:
    """``median (min-max)``, or just the value when there is one round."""
    if not values:
        return "-"
    mid = median(values)
    if len(values) == 1:
        return fmt_number(mid)
    lo, hi = span(values)
    return f"{fmt_number(mid)} ({fmt_number(lo)}-{fmt_number(hi)})"


def fmt_ratio(values: Sequence[float]) -> str:
    """Ratios as ``1.23x (1.10-1.31)``."""
    if not values:
        return "-"
    mid = median(values)
    if len(values) == 1:
        return f"{mid:.2f}x"
    lo, hi = span(values)
    return f"{mid:.2f}x ({lo:.2f}-{hi:.2f})"


def count_syncs(strace_output: str, log_suffixes: Sequence[str]) -> tuple[int, int]:
    """(all fsync/fdatasync calls, those on a file ending in one of ``log_suffixes``)."""
    total = on_log = 0
    for match in _SYNC.finditer(strace_output):
        total += 1
        if match.group(3).endswith(tuple(log_suffixes)):
            on_log += 1
    return total, on_log


def per_saga(
    small: tuple[int, int], large: tuple[int, int], extra_sagas: int
) -> tuple[float, float]:
    """Counts from a run of n and a run of n + ``extra_sagas`` sagas: their difference per
    extra saga, so setup, schema creation and shutdown cancel out."""
    if extra_sagas <= 0:
        raise ValueError("the larger run must have more sagas")
    return (
        (large[0] - small[0]) / extra_sagas,
        (large[1] - small[1]) / extra_sagas,
    )


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A Markdown table whose columns line up in a terminal too."""
    body = [list(header), *[list(r) for r in rows]]
    widths = [max(len(r[i]) for r in body) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(body[0]), rule, *(line(r) for r in body[1:])])


def rates(runs: Mapping[str, Sequence[Result]], key: str) -> list[float]:
    """The per-round sagas/s of one case, in round order."""
    return [float(str(r["rate"])) for r in runs.get(key, ())]
