"""A fake model that answers with random, schema-valid JSON, deterministic per seed."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import random
import uuid
from typing import Any

from caap.llm._types import Message

__all__ = ["SeededSchemaModel", "random_instance"]

_WORDS = (
    "alpha", "amber", "basil", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "iris",
    "juniper", "kelp", "lumen", "maple", "nectar", "opal", "pepper", "quartz", "river", "sage",
    "tundra", "umber", "violet", "willow", "xenon", "yarrow", "zephyr",
)  # fmt: skip

# Past this depth the generator takes the shortest way out (no optional properties, fewest items,
# the null branch of a union) so recursive models terminate.
_SOFT_DEPTH = 4
# Past this depth the schema cannot be satisfied by a finite instance (or is absurdly deep).
_HARD_DEPTH = 40
_DEFAULT_SPAN = 100
_MAX_UNIQUE_TRIES = 50


class _Generator:
    """Builds one random instance of a JSON schema; holds the root for ``$ref`` lookups."""

    def __init__(self, root: dict[str, Any], rng: random.Random) -> None:
        self.root = root
        self.rng = rng

    # -- schema plumbing -------------------------------------------------------------------

    def resolve(self, ref: str) -> dict[str, Any]:
        """Follow a local JSON pointer such as ``#/$defs/Item``."""
        if not ref.startswith("#"):
            raise ValueError(f"only local $ref is supported, got {ref!r}")
        node: Any = self.root
        for part in ref[1:].split("/"):
            if not part:
                continue
            key = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, list):
                node = node[int(key)]
            elif isinstance(node, dict) and key in node:
                node = node[key]
            else:
                raise ValueError(f"$ref {ref!r} does not resolve")
        if not isinstance(node, dict):
            raise ValueError(f"$ref {ref!r} does not point to a schema")
        return node

    def normalize(self, schema: dict[str, Any] | bool) -> dict[str, Any]:
        """Inline ``$ref`` and merge ``allOf`` so the rest only sees plain keywords."""
        if schema is True:
            return {}
        if schema is False:
            raise ValueError("schema 'false' admits no value")
        schema = dict(schema)
        seen: set[str] = set()
        while "$ref" in schema:
            ref = schema.pop("$ref")
            if ref in seen:
                raise ValueError(f"$ref cycle through {ref!r} without any content")
            seen.add(ref)
            # Sibling keywords (description, default, ...) refine the target.
            schema = _merge(self.resolve(ref), schema)
        if "allOf" in schema:
            parts = schema.pop("allOf")
            merged: dict[str, Any] = {}
            for part in parts:
                merged = _merge(merged, self.normalize(part))
            schema = _merge(merged, schema)
        return schema

    # -- generation --------------------------------------------------------------------------

    def value(self, schema: dict[str, Any] | bool, depth: int = 0) -> Any:
        """Return a random value valid under ``schema``."""
        if depth > _HARD_DEPTH:
            raise ValueError("schema nests too deeply (is a recursive field required?)")
        s = self.normalize(schema)
        rng = self.rng
        if "const" in s:
            return s["const"]
        if "enum" in s:
            return rng.choice(s["enum"])
        for key in ("anyOf", "oneOf"):
            if key in s:
                return self.value(self.pick_branch(s, key, depth), depth + 1)
        kind = s.get("type")
        if isinstance(kind, list):
            kind = "null" if depth >= _SOFT_DEPTH and "null" in kind else rng.choice(kind)
        if kind is None:
            kind = _infer_type(s)
        if kind == "object":
            return self.object(s, depth)
        if kind == "array":
            return self.array(s, depth)
        if kind == "string":
            return self.string(s)
        if kind == "integer":
            return self.integer(s)
        if kind == "number":
            return self.number(s)
        if kind == "boolean":
            return rng.random() < 0.5
        if kind == "null":
            return None
        if kind == "any":
            return rng.choice(_WORDS)
        raise ValueError(f"unsupported schema type {kind!r}")

    def pick_branch(self, s: dict[str, Any], key: str, depth: int) -> dict[str, Any]:
        """Choose one alternative of an ``anyOf``/``oneOf``, merged with its siblings."""
        branches = [self.normalize(b) for b in s[key]]
        if any(b.get("type") in ("number", "integer") for b in branches):
            # pydantic writes Decimal (and similar) as "number or string"; the string branch
            # means a *numeric* string, which random words are not, so use the number branch.
            plain = [b for b in branches if not _is_free_string(b)]
            branches = plain or branches
        if depth >= _SOFT_DEPTH:
            # Deep in a recursive model: end the recursion through the null branch if any.
            nulls = [b for b in branches if b.get("type") == "null"]
            if nulls:
                branches = nulls
        siblings = {k: v for k, v in s.items() if k != key}
        return _merge(siblings, self.rng.choice(branches))

    def object(self, s: dict[str, Any], depth: int) -> dict[str, Any]:
        """Random object: every required property, some optional ones, maybe extra keys."""
        rng = self.rng
        props: dict[str, Any] = s.get("properties", {})
        required = set(s.get("required", []))
        out: dict[str, Any] = {}
        for name, sub in props.items():
            if name in required or (depth < _SOFT_DEPTH and rng.random() < 0.5):
                out[name] = self.value(sub, depth + 1)
        for name in required - out.keys():
            # Required but not described: any value will do.
            out[name] = rng.choice(_WORDS)
        extra = s.get("additionalProperties", not props)
        if extra is not False and not props:
            low = int(s.get("minProperties", 0))
            high = int(s.get("maxProperties", max(low, 3 if depth < _SOFT_DEPTH else low)))
            target = rng.randint(low, max(low, high))
            value_schema: dict[str, Any] | bool = (
                extra if isinstance(extra, dict) else {"type": "string"}
            )
            names: dict[str, Any] | bool | None = s.get("propertyNames")
            for _ in range(target * _MAX_UNIQUE_TRIES):
                if len(out) >= target:
                    break
                key = rng.choice(_WORDS) if names is None else str(self.value(names, depth + 1))
                if key not in out:
                    out[key] = self.value(value_schema, depth + 1)
        return out

    def array(self, s: dict[str, Any], depth: int) -> list[Any]:
        """Random array honouring ``prefixItems``, ``items``, sizes and ``uniqueItems``."""
        rng = self.rng
        prefix: list[Any] = s.get("prefixItems", [])
        items: dict[str, Any] | bool = s.get("items", {} if not prefix else False)
        low = max(int(s.get("minItems", 0)), 0)
        high: int | None = s.get("maxItems")
        if items is False:
            # A closed tuple: never more items than positions.
            high = len(prefix) if high is None else min(int(high), len(prefix))
        if high is None:
            high = low + (3 if depth < _SOFT_DEPTH else 0)
        if low > high:
            raise ValueError(f"array needs between {low} and {high} items")
        size = rng.randint(low, int(high)) if depth < _SOFT_DEPTH else low
        out: list[Any] = []
        seen: set[str] = set()
        unique = bool(s.get("uniqueItems"))
        tries = 0
        while len(out) < size:
            index = len(out)
            sub = prefix[index] if index < len(prefix) else items
            item = self.value(sub, depth + 1)
            if unique:
                key = json.dumps(item, sort_keys=True)
                if key in seen:
                    tries += 1
                    if tries > _MAX_UNIQUE_TRIES * max(size, 1):
                        if len(out) >= low:
                            break
                        raise ValueError("cannot find enough distinct items for uniqueItems")
                    continue
                seen.add(key)
            out.append(item)
        return out

    def string(self, s: dict[str, Any]) -> str:
        """Random string: formatted if a known ``format`` is asked, else words within length."""
        rng = self.rng
        fmt = s.get("format")
        if fmt == "date-time":
            return self.moment().isoformat()
        if fmt == "date":
            return self.moment().date().isoformat()
        if fmt == "time":
            return self.moment().time().isoformat()
        if fmt == "duration":
            return f"PT{rng.randint(1, 48)}H{rng.randint(0, 59)}M"
        if fmt == "email":
            return f"{rng.choice(_WORDS)}@example.com"
        if fmt in ("uri", "url", "iri"):
            return f"https://example.com/{rng.choice(_WORDS)}"
        if fmt == "uuid":
            return str(uuid.UUID(int=rng.getrandbits(128), version=4))
        if fmt == "ipv4":
            return "192.0.2." + str(rng.randint(1, 254))
        if fmt == "ipv6":
            return f"2001:db8::{rng.randint(1, 0xFFFF):x}"
        low = max(int(s.get("minLength", 0)), 0)
        high = int(s.get("maxLength", max(low, 24)))
        words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 3)))
        while len(words) < low:
            words += " " + rng.choice(_WORDS)
        cut = words[:high]
        # Do not end on a stray fragment of a word when the length allows.
        return cut.rstrip() if len(cut.rstrip()) >= low else cut

    def moment(self) -> dt.datetime:
        """A random whole-second UTC time in 2020-2029."""
        start = dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc)
        return start + dt.timedelta(seconds=self.rng.randrange(10 * 365 * 24 * 3600))

    def integer(self, s: dict[str, Any]) -> int:
        """Random integer within the (exclusive) bounds and a multiple of ``multipleOf``."""
        low, high = _bounds(s)
        lo = math.ceil(low) if "exclusiveMinimum" not in s else math.floor(low) + 1
        hi = math.floor(high) if "exclusiveMaximum" not in s else math.ceil(high) - 1
        if lo > hi:
            raise ValueError(f"no integer between {low} and {high}")
        step = s.get("multipleOf")
        if step:
            k_lo, k_hi = math.ceil(lo / step), math.floor(hi / step)
            if k_lo > k_hi:
                raise ValueError(f"no multiple of {step} between {lo} and {hi}")
            return int(self.rng.randint(k_lo, k_hi) * step)
        return self.rng.randint(lo, hi)

    def number(self, s: dict[str, Any]) -> float:
        """Random number within the (exclusive) bounds, rounded to two decimals where possible."""
        low, high = _bounds(s)
        step = s.get("multipleOf")
        if step:
            k_lo, k_hi = math.ceil(low / step), math.floor(high / step)
            if "exclusiveMinimum" in s and k_lo * step <= low:
                k_lo += 1
            if "exclusiveMaximum" in s and k_hi * step >= high:
                k_hi -= 1
            if k_lo > k_hi:
                raise ValueError(f"no multiple of {step} between {low} and {high}")
            return float(self.rng.randint(k_lo, k_hi) * step)
        for _ in range(_MAX_UNIQUE_TRIES):
            x = round(self.rng.uniform(low, high), 2)
            if _within(x, s, low, high):
                return x
        return (low + high) / 2


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Combine two schemas that must both hold (the ``allOf`` of two plain schemas)."""
    out = dict(base)
    for key, value in extra.items():
        if key == "properties" and key in out:
            out[key] = {**out[key], **value}
        elif key == "required" and key in out:
            out[key] = list(dict.fromkeys([*out[key], *value]))
        elif key in ("minimum", "exclusiveMinimum", "minLength", "minItems") and key in out:
            out[key] = max(out[key], value)
        elif key in ("maximum", "exclusiveMaximum", "maxLength", "maxItems") and key in out:
            out[key] = min(out[key], value)
        else:
            out[key] = value
    return out


def _is_free_string(s: dict[str, Any]) -> bool:
    """A string schema that does not pin its values down (no enum, const or format)."""
    return s.get("type") == "string" and not any(k in s for k in ("enum", "const", "format"))


def _infer_type(s: dict[str, Any]) -> str:
    """Guess the type of a schema that does not state one."""
    if "properties" in s or "additionalProperties" in s or "required" in s:
        return "object"
    if "items" in s or "prefixItems" in s:
        return "array"
    if any(k in s for k in ("minLength", "maxLength", "format", "pattern")):
        return "string"
    if any(k in s for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")):
        return "number"
    return "any"


def _bounds(s: dict[str, Any]) -> tuple[float, float]:
    """Lower and upper bound of a numeric schema, with a default span where one is open."""
    low: float | None = s.get("minimum", s.get("exclusiveMinimum"))
    high: float | None = s.get("maximum", s.get("exclusiveMaximum"))
    if "minimum" in s and "exclusiveMinimum" in s:
        low = max(s["minimum"], s["exclusiveMinimum"])
    if "maximum" in s and "exclusiveMaximum" in s:
        high = min(s["maximum"], s["exclusiveMaximum"])
    if low is None:
        return (0.0, float(_DEFAULT_SPAN)) if high is None else (high - _DEFAULT_SPAN, high)
    return (low, low + _DEFAULT_SPAN) if high is None else (low, high)


def _within(x: float, s: dict[str, Any], low: float, high: float) -> bool:
    """Whether ``x`` respects the inclusive/exclusive bounds of ``s``."""
    above = x > low if "exclusiveMinimum" in s else x >= low
    below = x < high if "exclusiveMaximum" in s else x <= high
    return above and below


def random_instance(schema: dict[str, Any], rng: random.Random) -> Any:
    """Return a random value valid under ``schema``, drawing randomness from ``rng``.

    Supports what pydantic v2's ``model_json_schema()`` emits: objects (properties, required,
    additionalProperties, propertyNames), arrays (items, prefixItems, min/maxItems, uniqueItems),
    strings (enum, min/maxLength, date-time/date/time/duration/email/uri/uuid formats), integers
    and numbers (inclusive and exclusive bounds, multipleOf), booleans, null, const, anyOf, oneOf,
    allOf and local ``$ref``. ``pattern`` is not honoured.

    Args:
        schema: A JSON schema (draft 2020-12 style, as pydantic writes it).
        rng: Source of randomness.

    Returns:
        A JSON-serialisable value.

    Raises:
        ValueError: The schema uses an unsupported construct or admits no finite value.
    """
    return _Generator(schema, rng).value(schema)


class SeededSchemaModel:
    """A fake model that answers with random JSON valid under the requested schema.

    The reply is a pure function of ``(seed, messages, json_schema)``: the same inputs always
    give the same reply, in any order and in any process, and another seed gives another reply.
    Without a schema it answers a short deterministic sentence.

    Example:
        >>> from pydantic import BaseModel
        >>> class Answer(BaseModel):
        ...     text: str
        ...     score: int
        >>> reply = SeededSchemaModel(seed=1).complete(
        ...     [{"role": "user", "content": "q"}], json_schema=Answer.model_json_schema()
        ... )
        >>> Answer.model_validate_json(reply).__class__.__name__
        'Answer'

    Attributes:
        seed: The seed.
        name: Name reported in logs and reports.
    """

    def __init__(self, seed: int = 0, name: str = "seeded") -> None:
        """Create the model.

        Args:
            seed: Selects which of the possible valid replies the model gives.
            name: Name reported in logs and reports.
        """
        self.seed = seed
        self.name = name

    def _rng(self, messages: list[Message], json_schema: dict[str, Any] | None) -> random.Random:
        # hashlib, not hash(): str hashing is salted per process.
        payload = json.dumps([self.seed, messages, json_schema], sort_keys=True, default=str)
        return random.Random(hashlib.sha256(payload.encode()).hexdigest())

    def complete(
        self,
        messages: list[Message],
        *,
        json_schema: dict[str, Any] | None = None,
        schema_name: str = "output",
        temperature: float = 0.0,
    ) -> str:
        """Return a schema-valid JSON document, or a short sentence when no schema is given.

        Args:
            messages: The conversation (mixed into the seed).
            json_schema: The schema the reply must satisfy.
            schema_name: Ignored.
            temperature: Ignored.

        Returns:
            The reply text.

        Raises:
            ValueError: The schema uses an unsupported construct or admits no finite value.
        """
        rng = self._rng(messages, json_schema)
        if json_schema is None:
            return f"Seeded reply: {rng.choice(_WORDS)} {rng.choice(_WORDS)}."
        return json.dumps(random_instance(json_schema, rng))
