"""Turn a model string such as ``"openai:gpt-4o-mini"`` into a :class:`ChatModel`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from caap.llm._openai import OpenAIChatModel
from caap.llm._types import ChatModel

__all__ = ["PROVIDERS", "infer_model"]

PROVIDERS: dict[str, Callable[..., ChatModel]] = {
    # Every OpenAI-compatible server (OpenAI, vLLM, Ollama, llama.cpp) speaks this wire format;
    # which one is picked by base_url, not by the prefix.
    "openai": OpenAIChatModel,
}
"""Provider prefix -> factory called as ``factory(model_name, **kwargs)``."""

_DEFAULT_PROVIDER = "openai"


def infer_model(spec: str | ChatModel, **kwargs: Any) -> ChatModel:
    """Return the model a spec names; a model instance is returned unchanged.

    Example:
        >>> infer_model("openai:gpt-4o-mini", base_url="http://localhost:8000/v1").name
        'openai:gpt-4o-mini'

    Args:
        spec: ``"provider:model"`` (``"openai:gpt-4o-mini"``), a bare model name (taken as
            ``openai``), or an object that already implements :class:`ChatModel`.
        **kwargs: Passed to the provider's model class (``base_url``, ``api_key``, ``timeout``,
            ``max_retries`` for ``openai``). Ignored when ``spec`` is already a model.

    Returns:
        A :class:`ChatModel`.

    Raises:
        ValueError: The spec is empty or names an unknown provider.
        TypeError: ``spec`` is neither a string nor a :class:`ChatModel`.
    """
    if not isinstance(spec, str):
        if isinstance(spec, ChatModel):
            return spec
        raise TypeError(f"expected a model string or a ChatModel, got {type(spec).__name__}")
    text = spec.strip()
    if not text:
        raise ValueError("model spec is empty; expected e.g. 'openai:gpt-4o-mini'")
    provider, sep, name = text.partition(":")
    if not sep:
        provider, name = _DEFAULT_PROVIDER, text
    factory = PROVIDERS.get(provider)
    if factory is None:
        supported = ", ".join(sorted(PROVIDERS))
        raise ValueError(
            f"unknown model provider {provider!r} in {spec!r}; supported: {supported}. "
            f"For a model served over an OpenAI-compatible endpoint write 'openai:{text}'."
        )
    if not name:
        raise ValueError(f"model spec {spec!r} has no model name after {provider!r}:")
    return factory(name, **kwargs)
