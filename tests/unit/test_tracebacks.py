"""The trace kept on a failure's event: the user's frames only, bounded, redacted, and never
an exception of its own, whatever the failing code raised."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from pivotal.engine import Abandoned
from pivotal.tracebacks import MAX_BYTES, MAX_FRAMES, from_exception, last_frame, lines


def caught(fn: Any, *args: Any) -> BaseException:
    try:
        fn(*args)
    except BaseException as exc:
        return exc
    raise AssertionError("it did not raise")


def charge(amount: int) -> None:
    raise ValueError(f"card declined for {amount}")


def frames(trace: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    return [e for e in trace or () if "file" in e]


def exceptions(trace: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    return [e for e in trace or () if "exception" in e]


def test_a_plain_failure_keeps_its_frames_type_and_message() -> None:
    trace = from_exception(caught(charge, 180))

    assert trace is not None
    *kept, last = trace
    assert last == {"exception": "ValueError", "message": "card declined for 180"}
    assert [f["function"] for f in kept] == ["caught", "charge"]
    assert {f["file"] for f in kept} == {"test_tracebacks.py"}  # the base name only
    assert kept[-1]["source"] == 'raise ValueError(f"card declined for {amount}")'
    assert isinstance(kept[-1]["line"], int)
    assert last_frame(trace) == f"test_tracebacks.py:{kept[-1]['line']} in charge"
    assert lines(trace)[-1] == "ValueError: card declined for 180"
    json.dumps(trace)  # plain data, fit for the ledger


def test_frames_inside_pivotal_and_asyncio_are_dropped() -> None:
    async def action() -> None:
        await asyncio.sleep(0)
        charge(1)

    async def run() -> BaseException:
        try:
            # through a task and asyncio.timeout, as the engine calls an action
            async with asyncio.timeout(10):
                await asyncio.create_task(action())
        except ValueError as exc:
            return exc
        raise AssertionError("it did not raise")

    trace = from_exception(asyncio.run(run()))

    names = [f["function"] for f in frames(trace)]
    assert names[-2:] == ["action", "charge"]
    assert not any("asyncio" in f["file"] or f["file"] in ("tasks.py",) for f in frames(trace))


def test_the_engine_frames_are_dropped_and_example_catalogues_kept() -> None:
    from pivotal import tracebacks

    def fake(filename: str) -> bool:
        return tracebacks._users(filename)

    assert not fake(tracebacks._PIVOTAL + "engine.py")
    assert not fake(tracebacks._ASYNCIO + "tasks.py")
    assert fake(tracebacks._EXAMPLES + "commerce/services.py")
    assert fake("/srv/shop/shop.py")


def test_a_timeout_needs_no_trace() -> None:
    assert from_exception(Abandoned("no outcome within 5s: the call was abandoned")) is None
    assert from_exception(caught(_raise, TimeoutError())) is None


def _raise(exc: BaseException) -> None:
    raise exc


def test_a_raising_str_still_gives_a_trace() -> None:
    class Broken(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no text for you")

    trace = from_exception(caught(_raise, Broken()))

    assert trace is not None
    assert trace[-1]["exception"].endswith("Broken")
    assert trace[-1]["message"] == "(its message could not be read)"


def test_a_str_returning_no_text_or_a_hostile_subclass_is_contained() -> None:
    class NotText(Exception):
        def __str__(self) -> Any:
            return 42

    class Sly(str):
        def __getitem__(self, key: Any) -> Any:
            raise RuntimeError("sliced")

    class Subclassed(Exception):
        def __str__(self) -> str:
            return Sly("a message " * 1000)

    assert from_exception(caught(_raise, NotText()))[-1]["message"] == (  # type: ignore[index]
        "(its message could not be read)"
    )
    trace = from_exception(caught(_raise, Subclassed()))
    assert trace is not None
    assert type(trace[-1]["message"]) is str
    assert trace[-1]["message"].startswith("a message a message")


def test_a_megabyte_message_is_cut_and_the_trace_stays_small() -> None:
    trace = from_exception(caught(_raise, ValueError("x" * 1_000_000)))

    assert trace is not None
    assert len(trace[-1]["message"]) <= 500
    assert trace[-1]["message"].endswith("…")
    assert len(json.dumps(trace).encode()) <= MAX_BYTES


def test_a_deep_recursion_is_kept_once_with_its_count() -> None:
    def down(n: int) -> int:
        return down(n + 1) + 1

    exc = caught(down, 0)
    assert isinstance(exc, RecursionError)

    trace = from_exception(exc)

    kept = frames(trace)
    assert len(kept) <= MAX_FRAMES
    assert kept[-1]["function"] == "down"
    assert kept[-1]["repeated"] > 100
    assert any("repeated" in line for line in lines(trace))
    assert len(json.dumps(trace).encode()) <= MAX_BYTES


def test_many_distinct_frames_keep_the_ones_nearest_the_failure() -> None:
    # 40 functions deep, each its own frame: the last MAX_FRAMES are kept, the rest counted
    space: dict[str, Any] = {}
    source = "def f0():\n    raise KeyError('deep')\n" + "".join(
        f"def f{i}():\n    f{i - 1}()\n" for i in range(1, 40)
    )
    exec(compile(source, "generated.py", "exec"), space)

    trace = from_exception(caught(space["f39"]))

    kept = frames(trace)
    assert len(kept) == MAX_FRAMES
    assert kept[-1]["function"] == "f0"
    assert kept[-1]["source"] == ""  # a file that cannot be read: no source, no error
    assert exceptions(trace)[-1]["omitted"] >= 40 - MAX_FRAMES
    assert any("more frames not kept" in line for line in lines(trace))


def test_an_exception_chain_is_kept_oldest_first() -> None:
    def lookup() -> None:
        try:
            {}["sku"]
        except KeyError as exc:
            raise LookupError("no stock record") from exc

    def handled() -> None:
        try:
            lookup()
        except LookupError:
            raise RuntimeError("reservation failed")  # noqa: B904 - the context is the test

    trace = from_exception(caught(handled))

    found = exceptions(trace)
    assert [e["exception"] for e in found] == ["KeyError", "LookupError", "RuntimeError"]
    assert [e.get("then") for e in found] == ["cause", "context", None]
    shown = lines(trace)
    assert "The above exception was the direct cause of the following exception:" in shown
    assert shown[-1] == "RuntimeError: reservation failed"
    assert len(frames(trace)) <= MAX_FRAMES


def test_a_chain_that_loops_or_never_ends_is_bounded() -> None:
    first, second = ValueError("one"), ValueError("two")
    first.__cause__, second.__cause__ = second, first  # a cycle
    assert len(exceptions(from_exception(first))) == 2

    latest: BaseException = ValueError("0")
    for n in range(1, 200):
        newer = ValueError(str(n))
        newer.__cause__ = latest
        latest = newer
    assert len(exceptions(from_exception(latest))) == 3


def test_secrets_in_the_message_and_source_are_redacted() -> None:
    def connect() -> None:
        raise ConnectionError(
            "cannot reach postgresql://shop:hunter2@db.internal/orders?sslmode=require "
            'token=abc123 {"api_key": "sk-live-1"}'
        )

    def leaky() -> None:
        password = "s3cr3t-in-source"
        raise OSError(f"password={password}")

    trace = from_exception(caught(connect))
    text = json.dumps(trace)
    for secret in ("hunter2", "abc123", "sk-live-1"):
        assert secret not in text
    assert "postgresql://shop:***@db.internal/orders?sslmode=require" in text

    leaked = json.dumps(from_exception(caught(leaky)))
    assert "s3cr3t-in-source" not in leaked
    assert "password=***" in leaked


def test_a_secret_in_a_source_line_is_redacted() -> None:
    def call() -> None:
        raise OSError("down")  # https://user:pa55word@api.example/v1?token=t0k

    trace = from_exception(caught(call))
    source = frames(trace)[-1]["source"]
    assert "pa55word" not in source
    assert "t0k" not in source
    assert "https://user:***@api.example/v1" in source


def test_it_never_raises_even_when_the_walk_itself_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pivotal import tracebacks

    def boom(*args: Any) -> Any:
        raise MemoryError

    monkeypatch.setattr(tracebacks, "_trace", boom)
    assert from_exception(ValueError("x")) is None

    monkeypatch.undo()
    monkeypatch.setattr(tracebacks.linecache, "getline", boom)
    trace = from_exception(caught(charge, 1))
    assert trace is not None
    assert frames(trace)[-1]["source"] == ""


def test_an_exception_never_raised_has_no_frames_but_a_trace() -> None:
    assert from_exception(ValueError("made, not raised")) == [
        {"exception": "ValueError", "message": "made, not raised"}
    ]


def test_lines_and_last_frame_accept_what_a_ledger_holds() -> None:
    assert lines(None) == []
    assert last_frame(None) is None
    assert lines([{"odd": 1}, "not a dict"]) == []  # type: ignore[list-item]


def test_the_largest_trace_still_fits_its_bound(tmp_path: Any) -> None:
    # three chained exceptions with long messages, each 20 frames deep in long source lines
    pad = "x" * 300
    source = "".join(
        f"def f{i}(n):\n    f{i - 1}(n) if {i} else None  # {pad}\n" for i in range(1, 21)
    )
    source = "def f0(n):\n    raise ValueError(str(n) * 2000)  # " + pad + "\n" + source
    path = tmp_path / ("long_module_name_" * 10 + ".py")
    path.write_text(source)
    space: dict[str, Any] = {}
    exec(compile(source, str(path), "exec"), space)

    def chained() -> None:
        try:
            try:
                space["f20"](1)
            except ValueError as exc:
                raise KeyError("k" * 2000) from exc
        except KeyError:
            space["f20"](3)

    trace = from_exception(caught(chained))

    assert trace is not None
    assert len(json.dumps(trace, ensure_ascii=False).encode()) <= MAX_BYTES
    assert len(frames(trace)) <= MAX_FRAMES
    assert trace[-1]["exception"] == "ValueError"  # the failure itself is always kept
    assert frames(trace)[-1]["function"] == "f0"
    assert all(len(f["source"]) <= 160 for f in frames(trace))
