"""SeededSchemaModel: schema-valid, deterministic per seed, varied across seeds."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from enum import Enum, IntEnum
from typing import Annotated, Any, Literal, Optional
from uuid import UUID

import pytest
from pydantic import BaseModel, Field

from caap.llm import Message, SeededSchemaModel, structured_call

ASK: list[Message] = [{"role": "user", "content": "Give me one."}]
SEEDS = range(25)


class Color(str, Enum):
    RED = "red"
    GREEN = "green"
    BLUE = "blue"


class Priority(IntEnum):
    LOW = 1
    HIGH = 2


class Address(BaseModel):
    city: str = Field(min_length=2, max_length=12)
    zip_code: str | None = None


class Person(BaseModel):
    name: str
    age: int = Field(ge=0, le=120)
    score: float = Field(gt=0, lt=1)
    color: Color
    priority: Priority
    home: Address
    previous: list[Address] = []
    tags: dict[str, list[str]]
    nickname: Optional[str] = None  # noqa: UP045 - the typing.Optional spelling on purpose
    born: dt.datetime
    kind: Literal["a", "b"]


class Tree(BaseModel):
    label: str
    children: list[Tree] = []
    parent: Tree | None = None


class Cat(BaseModel):
    type: Literal["cat"]
    lives: int = Field(ge=1, le=9)


class Dog(BaseModel):
    type: Literal["dog"]
    good: bool


class Kitchen(BaseModel):
    pet: Annotated[Cat | Dog, Field(discriminator="type")]
    pets: list[Cat | Dog] = Field(min_length=2, max_length=4)
    pair: tuple[int, str]
    labels: set[str]
    day: dt.date
    at: dt.time
    span: dt.timedelta
    ident: UUID
    by_color: dict[Color, int]
    price: Decimal
    step: float = Field(gt=0, le=2, multiple_of=0.25)
    even: int = Field(ge=-10, lt=10, multiple_of=2)
    owner: Person | None
    anything: Any
    extra: dict[str, Any]


MODELS: list[type[BaseModel]] = [Address, Person, Tree, Kitchen]


@pytest.mark.parametrize("output_type", MODELS, ids=lambda t: t.__name__)
def test_output_validates_for_every_seed(output_type: type[BaseModel]) -> None:
    for seed in SEEDS:
        result = structured_call(SeededSchemaModel(seed), ASK, output_type)
        assert isinstance(result, output_type)


@pytest.mark.parametrize("output_type", MODELS, ids=lambda t: t.__name__)
def test_output_is_valid_json_schema_instance(output_type: type[BaseModel]) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = output_type.model_json_schema()
    for seed in SEEDS:
        reply = SeededSchemaModel(seed).complete(ASK, json_schema=schema)
        jsonschema.validate(json.loads(reply), schema)


@pytest.mark.parametrize("output_type", MODELS, ids=lambda t: t.__name__)
def test_deterministic_per_seed_and_varied_across_seeds(output_type: type[BaseModel]) -> None:
    schema = output_type.model_json_schema()
    first = [SeededSchemaModel(seed).complete(ASK, json_schema=schema) for seed in SEEDS]
    again = [SeededSchemaModel(seed).complete(ASK, json_schema=schema) for seed in SEEDS]
    assert first == again
    assert len(set(first)) >= len(SEEDS) // 2


def test_repeated_calls_on_one_instance_are_stable() -> None:
    model = SeededSchemaModel(3)
    schema = Person.model_json_schema()
    assert model.complete(ASK, json_schema=schema) == model.complete(ASK, json_schema=schema)


def test_messages_change_the_output() -> None:
    model = SeededSchemaModel(0)
    schema = Person.model_json_schema()
    replies = {
        model.complete([{"role": "user", "content": f"q{i}"}], json_schema=schema) for i in range(5)
    }
    assert len(replies) > 1


def test_optional_fields_are_sometimes_set_and_sometimes_null() -> None:
    nicknames = [structured_call(SeededSchemaModel(s), ASK, Person).nickname for s in SEEDS]
    assert any(n is None for n in nicknames)
    assert any(n is not None for n in nicknames)


def test_recursive_model_terminates() -> None:
    depth = 0
    for seed in SEEDS:
        tree = structured_call(SeededSchemaModel(seed), ASK, Tree)
        stack = [(tree, 1)]
        while stack:
            node, level = stack.pop()
            depth = max(depth, level)
            stack.extend((child, level + 1) for child in node.children)
    assert depth < 12


def test_hand_written_schema_keywords() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema: dict[str, Any] = {
        "$defs": {"Base": {"type": "object", "properties": {"a": {"type": "integer"}}}},
        "type": "object",
        "properties": {
            "merged": {
                "allOf": [
                    {"$ref": "#/$defs/Base"},
                    {"properties": {"b": {"const": "fixed"}}, "required": ["a", "b"]},
                ]
            },
            "choice": {"oneOf": [{"type": "string", "maxLength": 3}, {"type": "boolean"}]},
            "multi": {"type": ["integer", "null"], "minimum": 5, "maximum": 5},
            "closed": {"type": "object", "additionalProperties": False},
            "bounded": {
                "type": "object",
                "additionalProperties": {"type": "integer"},
                "minProperties": 2,
                "maxProperties": 2,
            },
            "nothing": {"type": "null"},
            "long": {"type": "string", "minLength": 40},
            "email": {"type": "string", "format": "email"},
            "ts": {"type": "string", "format": "date-time"},
        },
        "required": ["merged", "choice", "multi", "closed", "bounded", "nothing", "long", "ts"],
        "additionalProperties": False,
    }
    for seed in SEEDS:
        value = json.loads(SeededSchemaModel(seed).complete(ASK, json_schema=schema))
        jsonschema.validate(value, schema)
        assert value["merged"]["b"] == "fixed"
        assert value["closed"] == {}
        assert len(value["bounded"]) == 2
        assert value["multi"] in (5, None)
        dt.datetime.fromisoformat(value["ts"])


def test_unsatisfiable_schema_raises_value_error() -> None:
    with pytest.raises(ValueError):
        SeededSchemaModel().complete(
            ASK, json_schema={"type": "integer", "minimum": 3, "maximum": 2}
        )


def test_without_schema_returns_short_deterministic_text() -> None:
    a = SeededSchemaModel(1).complete(ASK)
    assert a == SeededSchemaModel(1).complete(ASK)
    assert 0 < len(a) < 80
    assert a.startswith("Seeded reply")
    assert SeededSchemaModel(1, name="judge").name == "judge"
