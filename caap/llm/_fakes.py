"""Fake models for tests: one driven by a function, one by a script of outputs."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from caap.llm._errors import LLMError
from caap.llm._types import Message

__all__ = ["FunctionModel", "ScriptedModel"]


class FunctionModel:
    """A model whose reply is computed by a plain function of the messages.

    Example:
        >>> def echo(messages, json_schema):
        ...     return messages[-1]["content"].upper()
        >>> FunctionModel(echo).complete([{"role": "user", "content": "hi"}])
        'HI'

    Attributes:
        name: Name reported in logs and reports.
        calls: The messages of every call, in order.
    """

    def __init__(
        self,
        fn: Callable[[list[Message], dict[str, Any] | None], str],
        name: str = "function",
    ) -> None:
        """Create the model.

        Args:
            fn: Called as ``fn(messages, json_schema)``; returns the reply text. Any exception it
                raises (an :class:`LLMError` to simulate a fault) propagates unchanged.
            name: Name reported in logs and reports.
        """
        self.fn = fn
        self.name = name
        self.calls: list[list[Message]] = []

    def complete(
        self,
        messages: list[Message],
        *,
        json_schema: dict[str, Any] | None = None,
        schema_name: str = "output",
        temperature: float = 0.0,
    ) -> str:
        """Return ``fn(messages, json_schema)``.

        Args:
            messages: The conversation so far.
            json_schema: Passed through to ``fn``.
            schema_name: Ignored.
            temperature: Ignored.

        Returns:
            What ``fn`` returned.

        Raises:
            TypeError: ``fn`` returned something other than a string.
        """
        self.calls.append(list(messages))
        reply = self.fn(list(messages), json_schema)
        if not isinstance(reply, str):
            raise TypeError(
                f"FunctionModel {self.name!r}: fn must return str, got {type(reply).__name__}"
            )
        return reply


class ScriptedModel:
    """A model that replays a fixed script of outputs, one per call.

    An exception in the script is raised instead of returned, so a test can inject faults:

    Example:
        >>> from caap.llm import LLMTimeout
        >>> model = ScriptedModel(["first", LLMTimeout("slow")])
        >>> model.complete([{"role": "user", "content": "q"}])
        'first'

    Attributes:
        name: Name reported in logs and reports.
        calls: The messages of every call, in order (including calls that raised).
    """

    def __init__(self, outputs: Iterable[str | Exception], name: str = "scripted") -> None:
        """Create the model.

        Args:
            outputs: Replies in order; may be a generator (consumed lazily).
            name: Name reported in logs and reports.
        """
        self.name = name
        self.calls: list[list[Message]] = []
        self._outputs = iter(outputs)
        self._lock = threading.Lock()

    def complete(
        self,
        messages: list[Message],
        *,
        json_schema: dict[str, Any] | None = None,
        schema_name: str = "output",
        temperature: float = 0.0,
    ) -> str:
        """Return (or raise) the next scripted output.

        Args:
            messages: The conversation so far (recorded in :attr:`calls`).
            json_schema: Ignored.
            schema_name: Ignored.
            temperature: Ignored.

        Returns:
            The next scripted string.

        Raises:
            LLMError: ``"script exhausted"`` once every output has been used.
            Exception: The next scripted output, when it is an exception.
        """
        with self._lock:
            self.calls.append(list(messages))
            output = next(self._outputs, None)
            calls = len(self.calls)
        if output is None:
            raise LLMError(
                f"script exhausted: ScriptedModel {self.name!r} has no output for call {calls}",
                model=self.name,
            )
        if isinstance(output, BaseException):
            raise output
        return output
