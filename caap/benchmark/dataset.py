"""TANGLE instances: the JSON Lines format of DESIGN §7, validated by pydantic.

Unknown fields and bad values are rejected with an error naming the file, the line and the
field.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import date
from importlib import resources
from pathlib import Path
from typing import Literal, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from caap.conflict_graph.relations import RELATIONS
from caap.conflict_graph.relations import Relation as PairRelation

__all__ = [
    "PAIR_RELATIONS",
    "STYLES",
    "DatasetError",
    "Instance",
    "InstanceMemory",
    "PairLabel",
    "Persona",
    "RawLine",
    "Session",
    "Turn",
    "default_dataset_path",
    "iter_dataset",
    "iter_lines",
    "load_dataset",
]

ConflictLabel = Literal["CPC", "BOC", "SCC", "NONE"]
Role = Literal["core", "background", "distractor"]
Style = Literal["dated", "narrative", "implicit", "chatty"]
#: Writing styles of the blind corpus (judge-only; see shared EVALUATION.md).
STYLES: tuple[Style, ...] = ("dated", "narrative", "implicit", "chatty")
#: Pair relations a writer may label between two memories of an instance: the relation layer's
#: vocabulary, so labels train and evaluate it directly.
PAIR_RELATIONS: tuple[PairRelation, ...] = RELATIONS


class DatasetError(ValueError):
    """A dataset file is malformed; the message names the file, line and field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Persona(_Strict):
    """Who the memories are about."""

    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    summary: str = ""


class InstanceMemory(_Strict):
    """One memory of an instance with its (judge-only) role."""

    id: str = Field(min_length=1)
    text: str = Field(min_length=1)
    role: Role


class Turn(_Strict):
    """One dialogue turn."""

    role: Literal["user", "assistant"]
    content: str = Field(min_length=1)


class PairLabel(_Strict):
    """Judge-only label of how two memories of an instance relate (training/evaluation data
    for the relation layer; never shown to a policy)."""

    a: str = Field(min_length=1, description="Id of the earlier-listed memory.")
    b: str = Field(min_length=1, description="Id of the other memory.")
    relation: PairRelation


class Session(_Strict):
    """One dated conversation for the pipeline track."""

    id: str = Field(min_length=1)
    date: date
    turns: list[Turn] = Field(min_length=1)
    memory_ids: list[str] = Field(default_factory=list)


class Instance(_Strict):
    """One benchmark item. Policies see only memory texts and the query."""

    id: str = Field(min_length=1)
    persona: Persona
    aspect: str = Field(min_length=1)
    domain: str = Field(min_length=1)
    conflict_type: ConflictLabel
    structure: str = ""
    high_risk: bool = False
    query: str = Field(min_length=1)
    memories: list[InstanceMemory] = Field(min_length=1)
    missing_information: str | None = None
    sessions: list[Session] = Field(default_factory=list)
    style: Style | None = Field(default=None, description="Judge-only: the writing style.")
    pairs: list[PairLabel] = Field(
        default_factory=list, description="Judge-only: labelled relations between memories."
    )

    @model_validator(mode="after")
    def _ids_consistent(self) -> Instance:
        ids = [m.id for m in self.memories]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"duplicate memory ids: {dupes}")
        known = set(ids)
        for pair in self.pairs:
            unknown = [i for i in (pair.a, pair.b) if i not in known]
            if unknown:
                raise ValueError(f"pair label names unknown memory ids {unknown}")
            if pair.a == pair.b:
                raise ValueError(f"pair label joins memory {pair.a!r} to itself")
        for s in self.sessions:
            unknown = [i for i in s.memory_ids if i not in known]
            if unknown:
                raise ValueError(f"session {s.id!r} lists unknown memory ids {unknown}")
        return self

    def by_role(self, role: Role) -> list[InstanceMemory]:
        """Memories with the given role, in file order."""
        return [m for m in self.memories if m.role == role]

    @property
    def core_ids(self) -> list[str]:
        """Ids of the conflict-bearing memories."""
        return [m.id for m in self.memories if m.role == "core"]

    def memory(self, memory_id: str) -> InstanceMemory:
        """One memory by id (KeyError if absent)."""
        for m in self.memories:
            if m.id == memory_id:
                return m
        raise KeyError(memory_id)


def default_dataset_path() -> Path:
    """The dataset shipped with caap (a directory of ``.jsonl`` files)."""
    return Path(str(resources.files("caap.benchmark") / "data" / "tangle"))


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(path.glob("*.jsonl"))
        if not files:
            raise DatasetError(f"{path}: directory has no .jsonl files")
        return files
    if not path.exists():
        raise DatasetError(f"{path}: no such file or directory")
    return [path]


#: A model one line of a JSON Lines file is validated as.
ModelT = TypeVar("ModelT", bound=BaseModel)


def _describe(exc: ValidationError, subject: str = "<instance>") -> str:
    """The first validation error in one line: the field and what is wrong with it."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]) or subject
    extra = f" (value {err['input']!r})" if err["type"] != "missing" and "input" in err else ""
    if err["type"] == "extra_forbidden":
        return f"unknown field {loc!r}"
    return f"field {loc!r}: {err['msg']}{extra}"


@dataclass(frozen=True)
class RawLine:
    """One non-blank line of a dataset file: where it is, and its instance or its error."""

    where: str
    instance: Instance | None
    error: str | None
    raw_id: str | None


def _parsed_lines(
    root: Path, model: type[ModelT], subject: str
) -> Iterator[tuple[str, ModelT | None, str | None, str | None]]:
    """Every non-blank line of a file or directory of JSON Lines, parsed and validated as
    ``model``: ``(where, item or None, error or None, the line's id if it names one)``,
    without stopping at the first bad line. ``subject`` names an item in errors that have no
    field (``"<instance>"``).

    Raises:
        DatasetError: ``root`` does not exist or is a directory without ``.jsonl`` files.
    """
    for f in _files(root):
        with f.open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                where = f"{f}:{lineno}"
                try:
                    raw = json.loads(line)
                except json.JSONDecodeError as exc:
                    yield where, None, f"not valid JSON ({exc.msg})", None
                    continue
                if not isinstance(raw, dict):
                    yield where, None, "expected a JSON object per line", None
                    continue
                ident = raw.get("id") if isinstance(raw.get("id"), str) else None
                try:
                    yield where, model.model_validate(raw), None, ident
                except ValidationError as exc:
                    yield where, None, _describe(exc, subject), ident


def iter_lines(path: str | Path | None = None) -> Iterator[RawLine]:
    """Every non-blank line of a file or directory (default: shipped set), parsed and
    validated, without stopping at the first bad one (the validator reports them all)."""
    root = Path(path) if path is not None else default_dataset_path()
    for where, inst, error, ident in _parsed_lines(root, Instance, "<instance>"):
        yield RawLine(where, inst, error, ident)


def iter_dataset(path: str | Path | None = None) -> Iterator[Instance]:
    """Yield instances from a ``.jsonl`` file or a directory of them (default: shipped set).

    Raises:
        DatasetError: at the first bad line, naming the file, the line and the field.
    """
    root = Path(path) if path is not None else default_dataset_path()
    return _strict(_parsed_lines(root, Instance, "<instance>"), "instance")


class _Identified(Protocol):
    """What the strict loader needs of an item: its id."""

    @property
    def id(self) -> str: ...


ItemT = TypeVar("ItemT", bound=_Identified)


def _strict(
    lines: Iterable[tuple[str, ItemT | None, str | None, str | None]], kind: str
) -> Iterator[ItemT]:
    """The items of :func:`_parsed_lines`'s lines, raising at the first bad line or repeated
    id (``kind`` names the item in the message).

    Raises:
        DatasetError: naming the file, the line and the field, or the first use of the id.
    """
    seen: dict[str, str] = {}
    for where, item, error, _ in lines:
        if item is None:
            raise DatasetError(f"{where}: {error}")
        if item.id in seen:
            raise DatasetError(
                f"{where}: duplicate {kind} id {item.id!r} (first at {seen[item.id]})"
            )
        seen[item.id] = where
        yield item


def load_dataset(path: str | Path | None = None) -> list[Instance]:
    """All instances from a file or directory (default: the shipped set)."""
    return list(iter_dataset(path))
