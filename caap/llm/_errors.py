"""Errors raised by everything that calls a model.

Every failure of a model call surfaces as a subclass of :class:`LLMError`. Each class carries a
short, stable ``kind`` string so callers (the policy's fallback path, benchmark reports) can
record *which* fault happened without matching on class names or messages.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import ValidationError

__all__ = [
    "LLMConnectionError",
    "LLMError",
    "LLMMalformedOutput",
    "LLMRateLimited",
    "LLMRefusal",
    "LLMSchemaError",
    "LLMServerError",
    "LLMTimeout",
]


class LLMError(Exception):
    """Base class of every model-call failure.

    Attributes:
        kind: Stable machine-readable name of the fault (``"error"`` for the base class).
        message: Human-readable description.
        model: Name of the model that failed (``"openai:gpt-4o-mini"``), when known.
        status_code: HTTP status of the failing response, when there was one.
    """

    kind: ClassVar[str] = "error"

    def __init__(
        self,
        message: str = "model call failed",
        *,
        model: str | None = None,
        status_code: int | None = None,
    ) -> None:
        """Create the error.

        Args:
            message: Human-readable description.
            model: Name of the model that failed, when known.
            status_code: HTTP status of the failing response, when there was one.
        """
        super().__init__(message)
        self.message = message
        self.model = model
        self.status_code = status_code


class LLMTimeout(LLMError):
    """The model did not answer within the client's timeout."""

    kind: ClassVar[str] = "timeout"


class LLMRateLimited(LLMError):
    """The endpoint refused the request because of a rate limit or quota (HTTP 429).

    Attributes:
        retry_after: Seconds the server asked us to wait (``Retry-After`` header), if it said.
    """

    kind: ClassVar[str] = "rate_limited"

    def __init__(
        self,
        message: str = "rate limited",
        *,
        model: str | None = None,
        status_code: int | None = 429,
        retry_after: float | None = None,
    ) -> None:
        """Create the error.

        Args:
            message: Human-readable description.
            model: Name of the model that failed, when known.
            status_code: HTTP status of the failing response.
            retry_after: Seconds the server asked us to wait, if it said.
        """
        super().__init__(message, model=model, status_code=status_code)
        self.retry_after = retry_after


class LLMServerError(LLMError):
    """The endpoint failed on its side (HTTP 5xx)."""

    kind: ClassVar[str] = "server_error"


class LLMConnectionError(LLMError):
    """The endpoint could not be reached (refused connection, DNS failure, dropped socket)."""

    kind: ClassVar[str] = "connection_error"


class LLMRefusal(LLMError):
    """The model declined to answer (the reply carried a ``refusal`` or was content-filtered).

    Attributes:
        refusal: The refusal text the model gave, if any.
    """

    kind: ClassVar[str] = "refusal"

    def __init__(
        self,
        message: str = "the model refused to answer",
        *,
        model: str | None = None,
        status_code: int | None = None,
        refusal: str | None = None,
    ) -> None:
        """Create the error.

        Args:
            message: Human-readable description.
            model: Name of the model that refused, when known.
            status_code: HTTP status of the response, when there was one.
            refusal: The refusal text the model gave, if any.
        """
        super().__init__(message, model=model, status_code=status_code)
        self.refusal = refusal


class LLMMalformedOutput(LLMError):
    """The reply could not be used: empty, not the wire format, or not JSON where JSON was asked.

    Attributes:
        text: The offending raw text, when there was one.
    """

    kind: ClassVar[str] = "malformed_output"

    def __init__(
        self,
        message: str = "malformed model output",
        *,
        model: str | None = None,
        status_code: int | None = None,
        text: str | None = None,
    ) -> None:
        """Create the error.

        Args:
            message: Human-readable description (should include a short excerpt of ``text``).
            model: Name of the model that produced the output, when known.
            status_code: HTTP status of the response, when there was one.
            text: The offending raw text, when there was one.
        """
        super().__init__(message, model=model, status_code=status_code)
        self.text = text


class LLMSchemaError(LLMError):
    """The reply was JSON but did not validate against the requested output type.

    Attributes:
        text: The raw reply text.
        validation_error: The pydantic error describing which fields were wrong.
    """

    kind: ClassVar[str] = "schema_error"

    def __init__(
        self,
        message: str = "model output does not match the schema",
        *,
        model: str | None = None,
        text: str | None = None,
        validation_error: ValidationError | None = None,
    ) -> None:
        """Create the error.

        Args:
            message: Human-readable description.
            model: Name of the model that produced the output, when known.
            text: The raw reply text.
            validation_error: The pydantic error describing which fields were wrong.
        """
        super().__init__(message, model=model)
        self.text = text
        self.validation_error = validation_error
