"""Ask a model for a pydantic object: send the schema, parse the reply tolerantly, validate."""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from caap.llm._errors import LLMMalformedOutput, LLMSchemaError
from caap.llm._types import ChatModel, Message

__all__ = ["extract_json", "structured_call"]

T = TypeVar("T", bound=BaseModel)

_FENCE = re.compile(r"```[ \t]*(?:json|JSON|jsonc|javascript|js)?[ \t]*\r?\n?(.*?)```", re.DOTALL)
# Wire-format rule for response_format names (OpenAI): letters, digits, '_' and '-', <= 64 chars.
_NAME_BAD_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_MAX_OBJECT_STARTS = 1000
_EXCERPT = 160
#: Replies longer than this are rejected before any parsing (a decision is a few hundred bytes).
MAX_REPLY_CHARS = 1_000_000
#: JSON nested deeper than this is rejected before parsing (Python's parser would recurse).
MAX_JSON_DEPTH = 64


def _excerpt(text: str) -> str:
    """Shorten ``text`` for an error message."""
    return repr(text if len(text) <= _EXCERPT else text[:_EXCERPT] + "...")


def json_depth(text: str) -> int:
    """How deeply ``[`` / ``{`` nest in ``text``, outside JSON strings (a linear scan)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth = max(0, depth - 1)
    return deepest


def _first_object(text: str) -> dict[str, Any] | None:
    """Return the first ``{...}`` in ``text`` that decodes as a JSON object, if any."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    tries = 0
    # raw_decode understands strings, so braces inside string values do not confuse it.
    while start != -1 and tries < _MAX_OBJECT_STARTS:
        tries += 1
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            pass
        else:
            if isinstance(value, dict):
                return value
        start = text.find("{", start + 1)
    return None


def extract_json(text: str) -> Any:
    """Find the JSON document in a model reply.

    Tried in order: the whole reply; the content of each Markdown code fence; the first
    balanced ``{...}`` object embedded in prose. A reply that parses as JSON but not as an
    object (``"42"``) is returned as is when no object is found elsewhere, so validation can
    report it precisely.

    Args:
        text: The model's reply.

    Returns:
        The decoded JSON value.

    Raises:
        LLMMalformedOutput: No JSON could be found, or the reply is longer than
            :data:`MAX_REPLY_CHARS` or nested deeper than :data:`MAX_JSON_DEPTH`; the message
            quotes an excerpt of the reply.
    """
    if not isinstance(text, str):
        raise LLMMalformedOutput(f"model reply is {type(text).__name__}, not text")
    if len(text) > MAX_REPLY_CHARS:
        raise LLMMalformedOutput(
            f"model reply is {len(text)} characters, over the {MAX_REPLY_CHARS} limit: "
            f"{_excerpt(text)}",
            text=text[:_EXCERPT],
        )
    depth = json_depth(text)
    if depth > MAX_JSON_DEPTH:
        raise LLMMalformedOutput(
            f"model reply nests {depth} levels deep, over the {MAX_JSON_DEPTH} limit: "
            f"{_excerpt(text)}",
            text=text[:_EXCERPT],
        )
    stripped = text.strip()
    whole: Any = None
    parsed_whole = False
    try:
        whole = json.loads(stripped)
        parsed_whole = True
    except ValueError:
        pass
    if parsed_whole and isinstance(whole, dict):
        return whole
    for block in _FENCE.findall(stripped):
        try:
            value = json.loads(block.strip())
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    embedded = _first_object(stripped)
    if embedded is not None:
        return embedded
    if parsed_whole:
        return whole
    raise LLMMalformedOutput(f"model reply contains no JSON object: {_excerpt(text)}", text=text)


def _schema_name(output_type: type[BaseModel]) -> str:
    """A wire-safe schema name from a model class name (``Page[Item]`` -> ``Page_Item_``)."""
    return _NAME_BAD_CHARS.sub("_", output_type.__name__)[:64] or "output"


def structured_call(
    model: ChatModel,
    messages: list[Message],
    output_type: type[T],
    *,
    schema_name: str | None = None,
) -> T:
    """Ask ``model`` for an instance of ``output_type`` and return it validated.

    The JSON schema of ``output_type`` goes with the request; the reply is parsed tolerantly
    (Markdown fences and surrounding prose are ignored, see :func:`extract_json`).

    Example:
        >>> from pydantic import BaseModel
        >>> from caap.llm import ScriptedModel
        >>> class Verdict(BaseModel):
        ...     conflict: bool
        >>> model = ScriptedModel(['Sure: ```json\\n{"conflict": true}\\n```'])
        >>> structured_call(model, [{"role": "user", "content": "?"}], Verdict)
        Verdict(conflict=True)

    Args:
        model: Any :class:`ChatModel`.
        messages: The conversation; say in it what the object should contain.
        output_type: A pydantic model class.
        schema_name: Name sent with the schema; defaults to the class name.

    Returns:
        The validated object.

    Raises:
        LLMMalformedOutput: The reply contains no JSON.
        LLMSchemaError: The JSON does not validate; wraps the pydantic ``ValidationError``.
        LLMError: Whatever the model itself raised (timeout, refusal, ...).
    """
    schema = output_type.model_json_schema()
    text = model.complete(
        messages, json_schema=schema, schema_name=schema_name or _schema_name(output_type)
    )
    try:
        data = extract_json(text)
    except LLMMalformedOutput as exc:
        exc.model = model.name
        raise
    try:
        return output_type.model_validate(data)
    except ValidationError as exc:
        raise LLMSchemaError(
            f"{model.name}: reply does not match {output_type.__name__}: "
            f"{exc.error_count()} error(s); first: {_first_error(exc)}; reply: {_excerpt(text)}",
            model=model.name,
            text=text,
            validation_error=exc,
        ) from exc


def _first_error(exc: ValidationError) -> str:
    """``"field.path: message"`` of the first validation error."""
    err = exc.errors()[0]
    loc = ".".join(str(part) for part in err["loc"]) or "<root>"
    return f"{loc}: {err['msg']}"
