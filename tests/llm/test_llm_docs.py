"""The examples in the docstrings run as written."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "caap.llm._fakes",
    "caap.llm._infer",
    "caap.llm._seeded",
    "caap.llm._structured",
    "caap.llm.testing",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    assert result.attempted > 0
