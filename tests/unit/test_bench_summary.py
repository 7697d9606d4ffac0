"""The peer benchmark's summary code: parsing, medians, min-max, ratios, sync counts.

``bench/peers/summary.py`` is loaded by path: it is a script's sibling, not a package, and
needs none of the peers' virtual environments.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

SUMMARY = Path(__file__).resolve().parents[2] / "bench" / "peers" / "summary.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_peers_summary", SUMMARY)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


summary = _load()


def test_parse_result_takes_the_last_json_line() -> None:
    out = 'warming up\n{"rate": 1.0}\nnoise\n{"rate": 2.5, "system": "x"}\n'
    assert summary.parse_result(out) == {"rate": 2.5, "system": "x"}


def test_parse_result_without_json_says_so() -> None:
    with pytest.raises(ValueError, match="no JSON result"):
        summary.parse_result("Traceback ...\n")


def test_combine_spans_first_start_to_last_end() -> None:
    parts = [
        {"sagas": 100, "start": 10.0, "end": 12.0, "peak_rss_mib": 40.0, "rate": 50.0},
        {"sagas": 100, "start": 10.5, "end": 14.0, "peak_rss_mib": 55.0, "rate": 28.6},
    ]
    both = summary.combine(parts)
    assert both["sagas"] == 200
    assert both["seconds"] == pytest.approx(4.0)
    assert both["rate"] == pytest.approx(50.0)
    assert both["peak_rss_mib"] == 55.0
    assert both["processes"] == 2


def test_combine_sums_cpu_over_all_sagas() -> None:
    parts = [
        {
            "sagas": 100,
            "start": 10.0,
            "end": 12.0,
            "peak_rss_mib": 40.0,
            "worker_cpu_s": 1.0,
            "server_cpu_s": 0.0,
            "cpu_ms_per_saga": 10.0,
        },
        {
            "sagas": 300,
            "start": 10.2,
            "end": 13.0,
            "peak_rss_mib": 45.0,
            "worker_cpu_s": 5.0,
            "server_cpu_s": 1.0,
            "cpu_ms_per_saga": 20.0,
        },
    ]
    both = summary.combine(parts)
    assert both["worker_cpu_s"] == pytest.approx(6.0)
    assert both["server_cpu_s"] == pytest.approx(1.0)
    assert both["cpu_ms_per_saga"] == pytest.approx(17.5)  # 7 s of CPU over 400 sagas
    assert (both["start"], both["end"]) == (10.0, 13.0)
    assert both["rate"] == pytest.approx(400 / 3.0)
    assert both["parts"] == parts


def test_median_and_span() -> None:
    assert summary.median([3.0, 1.0, 2.0]) == 2.0
    assert summary.median([1.0, 2.0, 3.0, 4.0]) == 2.5
    assert summary.span([3.0, 1.0, 2.0]) == (1.0, 3.0)
    with pytest.raises(ValueError, match="median of nothing"):
        summary.median([])


def test_same_round_ratios_pair_rounds() -> None:
    assert summary.same_round_ratios([200.0, 300.0], [100.0, 100.0]) == [2.0, 3.0]
    with pytest.raises(ValueError, match="same number of rounds"):
        summary.same_round_ratios([1.0], [1.0, 2.0])


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([], "-"),
        ([771.4], "771"),
        ([259.0, 271.0, 250.0], "259 (250-271)"),
        ([5.04, 5.0, 5.1], "5.0 (5.0-5.1)"),
        ([1282.0, 1300.0, 1250.0], "1,282 (1,250-1,300)"),
    ],
)
def test_fmt_spread(values: list[float], expected: str) -> None:
    assert summary.fmt_spread(values) == expected


def test_fmt_ratio() -> None:
    assert summary.fmt_ratio([]) == "-"
    assert summary.fmt_ratio([0.6]) == "0.60x"
    assert summary.fmt_ratio([0.6, 0.52, 0.71]) == "0.60x (0.52-0.71)"


def test_count_syncs_reads_strace_lines() -> None:
    trace = "\n".join(
        [
            "101 fsync(5</tmp/a/ledger.db-wal>) = 0",
            "102 fdatasync(5</tmp/a/ledger.db-wal> <unfinished ...>",
            "102 <... fdatasync resumed>) = 0",
            "101 fsync(4</tmp/a/ledger.db>) = 0",
            "101 openat(AT_FDCWD, ...) = 3",
        ]
    )
    assert summary.count_syncs(trace, ["-wal"]) == (3, 2)


def test_per_saga_cancels_setup() -> None:
    assert summary.per_saga((30, 10), (530, 510), 100) == (5.0, 5.0)
    with pytest.raises(ValueError, match="more sagas"):
        summary.per_saga((1, 1), (2, 2), 0)


def test_table_lines_up() -> None:
    text = summary.table(["a", "bb"], [["1", "2"], ["333", "4"]])
    lines = text.splitlines()
    assert lines[0] == "| a   | bb |"
    assert lines[1] == "|-----|----|"
    assert lines[3] == "| 333 | 4  |"
    assert len({len(line) for line in lines}) == 1


def test_rates_in_round_order() -> None:
    runs = {"pivotal/one": [{"rate": 1.0}, {"rate": 2.0}]}
    assert summary.rates(runs, "pivotal/one") == [1.0, 2.0]
    assert summary.rates(runs, "dbos/one") == []
    assert json.dumps(runs)  # results stay plain JSON


def test_paired_ratios_pair_the_rounds_both_measured() -> None:
    ours = [{"rate": 100.0, "round": 1}, {"rate": 90.0, "round": 2}, {"rate": 80.0, "round": 3}]
    theirs = [{"rate": 50.0, "round": 1}, {"rate": 30.0, "round": 3}]  # round 2 not run

    assert summary.paired_ratios(ours, theirs) == [2.0, 80.0 / 30.0]
    assert summary.paired_ratios(ours, []) == []
