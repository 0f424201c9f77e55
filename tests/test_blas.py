"""Graph operations run NumPy's BLAS on one thread and give the threads back after."""

from __future__ import annotations

import numpy  # noqa: F401  (loads the BLAS the limit applies to)
import pytest

from caap._blas import one_blas_thread, single_blas_thread

threadpoolctl = pytest.importorskip("threadpoolctl")


def _blas_threads() -> list[int]:
    return [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]


def test_limit_holds_inside_nests_and_is_restored() -> None:
    before = _blas_threads()
    if not before:
        pytest.skip("NumPy reports no BLAS library to limit")
    with one_blas_thread():
        assert set(_blas_threads()) == {1}
        with one_blas_thread():
            assert set(_blas_threads()) == {1}
        # Leaving the inner block does not give the threads back early.
        assert set(_blas_threads()) == {1}
    assert _blas_threads() == before


def test_decorated_function_runs_limited_and_restores_after_an_error() -> None:
    before = _blas_threads()
    if not before:
        pytest.skip("NumPy reports no BLAS library to limit")
    seen: list[list[int]] = []

    @single_blas_thread
    def fails() -> None:
        seen.append(_blas_threads())
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        fails()
    assert set(seen[0]) == {1}
    assert _blas_threads() == before
