"""The message shape and the one protocol every model implements."""

from __future__ import annotations

from typing import Any, Literal, Protocol, TypedDict, runtime_checkable

__all__ = ["ChatModel", "Message", "Role"]

Role = Literal["system", "user", "assistant"]
"""Who wrote a message, as in the chat-completions wire format."""


class Message(TypedDict):
    """One chat message, exactly as the chat-completions wire format spells it."""

    role: Role
    """``"system"``, ``"user"`` or ``"assistant"``."""
    content: str
    """The message text."""


@runtime_checkable
class ChatModel(Protocol):
    """Anything that turns a list of messages into the assistant's reply text.

    Real endpoints (:class:`~caap.llm.OpenAIChatModel`) and the test fakes
    (:class:`~caap.llm.FunctionModel`, :class:`~caap.llm.ScriptedModel`,
    :class:`~caap.llm.SeededSchemaModel`) all implement it, so code that calls a model never
    needs to know which one it has.
    """

    name: str
    """Identifies the model in logs and reports, e.g. ``"openai:gpt-4o-mini"``."""

    def complete(
        self,
        messages: list[Message],
        *,
        json_schema: dict[str, Any] | None = None,
        schema_name: str = "output",
        temperature: float = 0.0,
    ) -> str:
        """Return the assistant's reply to ``messages``.

        Args:
            messages: The conversation so far, oldest first.
            json_schema: When given, ask the model for a JSON reply valid under this schema.
            schema_name: Name of the schema, sent with it where the wire format wants one.
            temperature: Sampling temperature; ``0.0`` for the most repeatable output.

        Returns:
            The reply text (a JSON document when ``json_schema`` was given and honoured).

        Raises:
            LLMError: A subclass naming the fault (timeout, rate limit, refusal, ...).
        """
        ...
