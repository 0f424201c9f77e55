"""LLM access: one small client for any OpenAI-compatible endpoint, plus fakes for tests.

Everything in CAAP that calls a model goes through a :class:`ChatModel`:

* :class:`OpenAIChatModel` talks to OpenAI, vLLM, Ollama, llama.cpp, ... by ``base_url``;
  :func:`infer_model` builds one from a string such as ``"openai:gpt-4o-mini"``.
* :class:`FunctionModel`, :class:`ScriptedModel` and :class:`SeededSchemaModel` stand in for a
  model in tests; :mod:`caap.llm.testing` has a local HTTP server for testing the client itself.
* :func:`structured_call` asks for a pydantic object and validates the reply.

Every failure is an :class:`LLMError` whose ``kind`` names the fault.
"""

from caap.llm._errors import (
    LLMConnectionError,
    LLMError,
    LLMMalformedOutput,
    LLMRateLimited,
    LLMRefusal,
    LLMSchemaError,
    LLMServerError,
    LLMTimeout,
)
from caap.llm._fakes import FunctionModel, ScriptedModel
from caap.llm._infer import infer_model
from caap.llm._openai import OpenAIChatModel
from caap.llm._seeded import SeededSchemaModel
from caap.llm._structured import structured_call
from caap.llm._types import ChatModel, Message

__all__ = [
    "ChatModel",
    "FunctionModel",
    "LLMConnectionError",
    "LLMError",
    "LLMMalformedOutput",
    "LLMRateLimited",
    "LLMRefusal",
    "LLMSchemaError",
    "LLMServerError",
    "LLMTimeout",
    "Message",
    "OpenAIChatModel",
    "ScriptedModel",
    "SeededSchemaModel",
    "infer_model",
    "structured_call",
]
