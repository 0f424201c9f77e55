"""The backend registry: names, lazy imports, and errors a user can act on."""

from __future__ import annotations

import pytest

from caap.adapters import available_backends, get_backend, register
from caap.adapters.builtin import BuiltinBackend
from caap.adapters.registry import _REGISTRY, backend_class


def test_the_shipped_names_are_registered() -> None:
    assert {"builtin", "mem0"} <= set(available_backends())
    assert backend_class("builtin") is BuiltinBackend


def test_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown backend 'nope'.*builtin"):
        get_backend("nope")


def test_a_missing_dependency_names_the_install_command() -> None:
    register("ghost", "caap_no_such_module_xyz:Ghost", 'pip install "caap-memory[ghost]"')
    try:
        with pytest.raises(ImportError, match=r'pip install "caap-memory\[ghost\]"'):
            backend_class("ghost")
    finally:
        del _REGISTRY["ghost"]


def test_a_target_that_is_not_a_backend_is_refused() -> None:
    register("notabackend", "caap.models:Memory")
    try:
        with pytest.raises(TypeError, match="not a MemoryBackend"):
            get_backend("notabackend")
    finally:
        del _REGISTRY["notabackend"]


def test_register_refuses_a_taken_name_and_a_bad_target() -> None:
    with pytest.raises(ValueError, match="already registered"):
        register("builtin", "caap.adapters.builtin:BuiltinBackend")
    with pytest.raises(ValueError, match="target"):
        register("x", "no-colon-here")
