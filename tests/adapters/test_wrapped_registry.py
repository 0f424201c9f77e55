"""The wrapped systems are registered by name, and a missing one names its install command."""

from __future__ import annotations

import importlib.util

import pytest

from caap.adapters import available_backends, get_backend

WRAPPED = {
    # name: (module the adapter needs, what the error must tell the user to run)
    "memos": ("memos", 'pip install "caap-memory[memos]"'),
    "letta": ("letta_client", 'pip install "caap-memory[letta]"'),
    "amem": ("agentic_memory", "git+https://github.com/agiresearch/A-mem"),
}


def test_wrapped_backends_are_registered() -> None:
    assert set(WRAPPED) <= set(available_backends())


@pytest.mark.parametrize("name", sorted(WRAPPED))
def test_missing_dependency_names_the_install_command(name: str) -> None:
    module, hint = WRAPPED[name]
    if importlib.util.find_spec(module) is not None:
        pytest.skip(f"{module} is installed here, so the {name} backend imports")
    with pytest.raises(ImportError) as info:
        get_backend(name)
    assert hint in str(info.value)
