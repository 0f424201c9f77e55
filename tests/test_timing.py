import time

from caap._timing import collect, phase


def test_phases_are_free_outside_collect_and_counted_inside() -> None:
    with phase("embed"):
        pass
    start = time.perf_counter()
    with collect() as t, phase("graph"):
        time.sleep(0.02)
        with phase("embed"):
            time.sleep(0.02)
    assert set(t.seconds) == {"graph", "embed"}
    # Nested time is charged to the inner phase only, never twice.
    assert t.seconds["embed"] >= 0.02
    assert t.seconds["graph"] >= 0.02
    assert sum(t.seconds.values()) <= time.perf_counter() - start


def test_collectors_do_not_leak_between_blocks() -> None:
    with collect() as first, phase("sqlite"):
        pass
    with collect() as second:
        pass
    assert "sqlite" in first.seconds
    assert second.seconds == {}
