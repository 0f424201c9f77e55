"""The one real client: any OpenAI-compatible chat-completions endpoint, via ``openai``."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from caap.llm._errors import (
    LLMConnectionError,
    LLMError,
    LLMMalformedOutput,
    LLMRateLimited,
    LLMRefusal,
    LLMServerError,
    LLMTimeout,
)
from caap.llm._types import Message

if TYPE_CHECKING:
    import openai

__all__ = ["DEFAULT_MAX_RETRIES", "DEFAULT_TIMEOUT", "PLACEHOLDER_API_KEY", "OpenAIChatModel"]

DEFAULT_TIMEOUT = 20.0
"""Seconds one HTTP attempt may take. A decision is a short JSON object and an answer a short
paragraph; a healthy endpoint answers well within this, and a dead one is given up quickly."""
DEFAULT_MAX_RETRIES = 1
"""Retries on timeouts, rate limits and 5xx. With the defaults one call waits at most about
``(1 + retries) * timeout`` = 40 s, and since ``realize`` does not call a model that just
failed in ``decide``, one ``respond()`` against a dead endpoint costs about that much."""

PLACEHOLDER_API_KEY = "not-needed"
"""Key sent when none is configured; local servers (vLLM, Ollama, llama.cpp) accept any key."""

_BASE_URL_ENV = ("CAAP_LLM_BASE_URL", "OPENAI_BASE_URL")
_API_KEY_ENV = ("CAAP_LLM_API_KEY", "OPENAI_API_KEY")


def _first_env(names: tuple[str, ...]) -> str | None:
    """Return the first of ``names`` that is set to a non-empty value."""
    for name in names:
        value = os.environ.get(name)
        if value:
            return value
    return None


def _excerpt(text: str, limit: int = 200) -> str:
    """Shorten ``text`` for an error message."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _retry_after(exc: openai.APIStatusError) -> float | None:
    """Read the ``Retry-After`` header (seconds form) of a failed response, if any."""
    value = exc.response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        # The HTTP-date form is legal but rare from model endpoints; not worth parsing.
        return None


class OpenAIChatModel:
    """A chat model behind any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp).

    Configuration comes from the arguments, else the environment:

    * ``base_url``: ``CAAP_LLM_BASE_URL``, then ``OPENAI_BASE_URL``, then OpenAI's own API.
    * ``api_key``: ``CAAP_LLM_API_KEY``, then ``OPENAI_API_KEY``, then the placeholder
      ``"not-needed"`` (local servers accept any key).

    Example:
        >>> model = OpenAIChatModel(  # doctest: +SKIP
        ...     "llama3.1", base_url="http://localhost:11434/v1"
        ... )
        >>> model.complete([{"role": "user", "content": "Say hi"}])  # doctest: +SKIP
        'Hi!'

    Attributes:
        name: ``"openai:<model>"``.
        model: The model name sent to the endpoint.
        base_url: The endpoint in use, or ``None`` for OpenAI's default.
        timeout: Seconds to wait for one HTTP attempt.
        max_retries: Retries the ``openai`` client makes on timeouts, 429 and 5xx.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> None:
        """Create the client; no request is made until :meth:`complete`.

        Args:
            model: Model name as the endpoint knows it (``"gpt-4o-mini"``, ``"llama3.1:8b"``).
            base_url: Endpoint root including ``/v1``; defaults from the environment.
            api_key: API key; defaults from the environment, else ``"not-needed"``.
            timeout: Seconds to wait for one HTTP attempt (default :data:`DEFAULT_TIMEOUT`).
            max_retries: Retries on timeouts, rate limits and server errors (default
                :data:`DEFAULT_MAX_RETRIES`).

        Raises:
            ImportError: The ``openai`` package is not installed.
            ValueError: ``model`` is empty, or ``timeout``/``max_retries`` is out of range.
        """
        try:
            import openai
        except ImportError as exc:
            raise ImportError(
                'OpenAIChatModel needs the "openai" package; '
                'install it with: pip install "caap-memory[llm]"'
            ) from exc
        if not model:
            raise ValueError("model must be a non-empty model name, got ''")
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries!r}")
        self.model = model
        self.name = f"openai:{model}"
        self.base_url = base_url or _first_env(_BASE_URL_ENV)
        self.timeout = timeout
        self.max_retries = max_retries
        self._client: openai.OpenAI = openai.OpenAI(
            base_url=self.base_url,
            api_key=api_key or _first_env(_API_KEY_ENV) or PLACEHOLDER_API_KEY,
            timeout=timeout,
            max_retries=max_retries,
        )

    def close(self) -> None:
        """Release the HTTP connection pool; the model must not be used afterwards."""
        self._client.close()

    def __repr__(self) -> str:
        # Never show the key.
        return f"OpenAIChatModel({self.model!r}, base_url={self.base_url!r})"

    def complete(
        self,
        messages: list[Message],
        *,
        json_schema: dict[str, Any] | None = None,
        schema_name: str = "output",
        temperature: float = 0.0,
    ) -> str:
        """Send one chat-completions request and return the reply text.

        Args:
            messages: The conversation so far, oldest first.
            json_schema: When given, sent as a ``json_schema`` response format (non-strict, so
                endpoints that cannot enforce every keyword still accept it).
            schema_name: Name sent with the schema.
            temperature: Sampling temperature.

        Returns:
            The assistant message's content.

        Raises:
            LLMTimeout: No answer within ``timeout`` (after retries).
            LLMRateLimited: HTTP 429.
            LLMServerError: HTTP 5xx.
            LLMConnectionError: The endpoint could not be reached.
            LLMRefusal: The model refused or the reply was content-filtered.
            LLMMalformedOutput: The body was not a usable chat completion, or had no content.
            LLMError: Any other failure (e.g. 400/401/404).
        """
        import openai

        extra: dict[str, Any] = {}
        if json_schema is not None:
            extra["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": schema_name, "schema": json_schema, "strict": False},
            }
        wire_messages: Any = [{"role": m["role"], "content": m["content"]} for m in messages]
        name = self.name
        try:
            completion: Any = self._client.chat.completions.create(
                model=self.model,
                messages=wire_messages,
                temperature=temperature,
                **extra,
            )
        # Order matters: APITimeoutError subclasses APIConnectionError, and RateLimitError
        # subclasses APIStatusError.
        except openai.APITimeoutError as exc:
            raise LLMTimeout(
                f"{name}: request timed out after {self.timeout}s", model=name
            ) from exc
        except openai.APIConnectionError as exc:
            raise LLMConnectionError(
                f"{name}: cannot reach the endpoint: {exc}", model=name
            ) from exc
        except openai.RateLimitError as exc:
            raise LLMRateLimited(
                f"{name}: rate limited: {exc.message}",
                model=name,
                status_code=exc.status_code,
                retry_after=_retry_after(exc),
            ) from exc
        except openai.APIStatusError as exc:
            cls = LLMServerError if exc.status_code >= 500 else LLMError
            raise cls(
                f"{name}: HTTP {exc.status_code}: {exc.message}",
                model=name,
                status_code=exc.status_code,
            ) from exc
        except openai.APIResponseValidationError as exc:
            raise LLMMalformedOutput(
                f"{name}: response does not follow the chat-completions format", model=name
            ) from exc
        except openai.OpenAIError as exc:
            raise LLMError(f"{name}: {exc}", model=name) from exc
        except ValueError as exc:
            # A 2xx body that is not JSON surfaces as json.JSONDecodeError (a ValueError).
            raise LLMMalformedOutput(
                f"{name}: response body is not valid JSON: {exc}", model=name
            ) from exc
        except (RecursionError, MemoryError) as exc:
            # A body nested thousands deep (or absurdly large) breaks the JSON parser itself.
            raise LLMMalformedOutput(
                f"{name}: response body cannot be parsed ({type(exc).__name__})", model=name
            ) from exc
        return self._reply_text(completion)

    def _reply_text(self, completion: Any) -> str:
        """Pull the assistant text out of a (possibly ill-formed) completion object."""
        name = self.name
        # Non-strict response validation means a wrong body arrives as a half-built object or a
        # bare string rather than an exception, so check the shape by hand.
        if isinstance(completion, (str, bytes)):
            text = (
                completion if isinstance(completion, str) else completion.decode(errors="replace")
            )
            raise LLMMalformedOutput(
                f"{name}: response is not a chat completion: {_excerpt(text)}",
                model=name,
                text=text,
            )
        try:
            choice = completion.choices[0]
            message = choice.message
            content = message.content
            refusal = getattr(message, "refusal", None)
            finish_reason = getattr(choice, "finish_reason", None)
        except (AttributeError, IndexError, KeyError, TypeError) as exc:
            raise LLMMalformedOutput(
                f"{name}: response has no choices[0].message", model=name
            ) from exc
        if refusal:
            raise LLMRefusal(
                f"{name} refused: {_excerpt(str(refusal))}", model=name, refusal=str(refusal)
            )
        if not isinstance(content, str) or not content.strip():
            if finish_reason == "content_filter":
                raise LLMRefusal(f"{name}: reply withheld by the content filter", model=name)
            raise LLMMalformedOutput(
                f"{name}: reply has no content (finish_reason={finish_reason!r})", model=name
            )
        return content
