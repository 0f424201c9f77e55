"""The Mem0-shaped surface of :class:`caap.Agent`: ``add`` / ``search`` / ``get_all`` / ``get``
/ ``update`` / ``history`` / ``delete`` / ``delete_all`` and ``Agent.from_config``.

Records are plain JSON-ready dicts shaped like Mem0's (``{"results": [...]}`` with ``id``,
``memory``, ``user_id``, ``agent_id``, ``run_id``, ``metadata`` ...), plus what CAAP knows: the
memory's facets and the conflict its cluster carries. Every write goes through
:meth:`caap.Agent.remember_many`, so conflicts are kept exactly as with ``remember``.

Where the two differ from Mem0 (all by design):

* ``user_id`` is required everywhere, ``update`` / ``history`` / ``delete`` included: users are
  a hard isolation boundary, and another user's memory id is "not found".
* ``update`` never overwrites: it stores a new version that takes the memory's place in
  recall, closes the earlier version (its edges are closed and kept for audit) and keeps the
  earlier versions' records in the new one's history.
* The same statement (same text, scope and observed time, and no other source or context given)
  is stored once: ``add`` reports the existing memory with ``event: "NONE"``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import fields as dataclass_fields
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from caap.models import Memory, utcnow

if TYPE_CHECKING:
    from caap.agent import Agent

__all__ = ["MEM0_KEYS", "Mem0Api", "load_config", "match_filters"]

#: Metadata keys this surface reserves: the scope of a memory and its version chain.
AGENT_KEY = "agent_id"
RUN_KEY = "run_id"
ROLE_KEY = "role"
VERSIONS_KEY = "caap_versions"
MEM0_KEYS = (AGENT_KEY, RUN_KEY, ROLE_KEY, VERSIONS_KEY)

_T = TypeVar("_T")


def _versions(metadata: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A memory's version chain; entries that are not version records (a store written
    before the key was reserved) are skipped."""
    chain = metadata.get(VERSIONS_KEY)
    if not isinstance(chain, list):
        return []
    return [dict(v) for v in chain if isinstance(v, Mapping)]


#: ``Agent`` constructor arguments a config may set (``graph`` holds GraphConfig fields).
_CONFIG_KEYS = (
    "path",
    "backend",
    "model",
    "backend_options",
    "llm",
    "store",
    "reliability_threshold",
    "reliability_recalibrate_after",
    "relations",
    "graph",
)

#: How many nearest memories a filtered or scoped search looks through at most.
_FILTER_CANDIDATES = 2000

_OPS = ("eq", "ne", "in", "nin", "gt", "gte", "lt", "lte", "contains")


def load_config(config: Mapping[str, Any] | str | Path) -> dict[str, Any]:
    """Read an agent configuration from a mapping or a JSON / TOML file.

    Raises:
        ValueError: An unknown key (named), or a file that does not parse.
        FileNotFoundError: ``config`` names no file.
    """
    if isinstance(config, (str, Path)):
        path = Path(config)
        if not path.is_file():
            raise FileNotFoundError(f"config file not found: {str(path)!r}")
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".toml":
            if sys.version_info >= (3, 11):
                import tomllib
            else:  # pragma: no cover - Python 3.10
                import tomli as tomllib
            data: Any = tomllib.loads(text)
        else:
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValueError(f"config file {str(path)!r} is not valid JSON: {exc}") from None
        # A file may put everything under [caap] / {"caap": {...}}.
        if isinstance(data, dict) and set(data) == {"caap"}:
            data = data["caap"]
    elif isinstance(config, Mapping):
        data = dict(config)
    else:
        raise TypeError(f"config must be a mapping or a file path, got {type(config).__name__}")
    if not isinstance(data, dict):
        raise ValueError("config must be a mapping of Agent arguments")
    unknown = sorted(k for k in data if k not in _CONFIG_KEYS)
    if unknown:
        raise ValueError(
            f"unknown config key {unknown[0]!r}; known keys: {', '.join(_CONFIG_KEYS)}"
        )
    return dict(data)


def _compare(op: str, actual: Any, wanted: Any) -> bool:
    if op == "eq":
        return bool(actual == wanted)
    if op == "ne":
        return bool(actual != wanted)
    if op in ("in", "nin"):
        if not isinstance(wanted, (list, tuple, set)):
            raise ValueError(f"filter operator {op!r} needs a list, got {type(wanted).__name__}")
        return (actual in wanted) == (op == "in")
    if op == "contains":
        if isinstance(actual, str):
            return isinstance(wanted, str) and wanted.lower() in actual.lower()
        return isinstance(actual, (list, tuple)) and wanted in actual
    if actual is None:
        return False
    try:
        if op == "gt":
            return bool(actual > wanted)
        if op == "gte":
            return bool(actual >= wanted)
        if op == "lt":
            return bool(actual < wanted)
        return bool(actual <= wanted)
    except TypeError:
        return False


def match_filters(record: Mapping[str, Any], filters: Mapping[str, Any] | None) -> bool:
    """Whether a record matches Mem0-style filters.

    ``filters`` maps a field to a value (equality), a list (any of), or an operator mapping
    (``eq ne in nin gt gte lt lte contains``); ``AND`` / ``OR`` take lists of filters and
    ``NOT`` one filter or, as in Mem0, a list of them of which none may hold. A field is
    looked up in the record's ``metadata`` first, then in the record (``source``,
    ``context``, ``aspect``, ``agent_id``, ``run_id``, ``memory`` ...).

    Raises:
        ValueError: An unknown operator (named).
    """
    if not filters:
        return True
    if not isinstance(filters, Mapping):
        raise TypeError(f"filters must be a mapping, got {type(filters).__name__}")
    meta = record.get("metadata") or {}
    for key, wanted in filters.items():
        if key in ("AND", "OR"):
            if not isinstance(wanted, (list, tuple)):
                raise ValueError(f"filter {key!r} needs a list of filters")
            results = [match_filters(record, f) for f in wanted]
            if not (all(results) if key == "AND" else any(results)):
                return False
            continue
        if key == "NOT":
            # One filter, or Mem0's list of them: none may hold.
            negated = wanted if isinstance(wanted, (list, tuple)) else [wanted]
            if any(match_filters(record, f) for f in negated):
                return False
            continue
        actual = meta[key] if key in meta else record.get(key)
        if isinstance(wanted, Mapping):
            for op, value in wanted.items():
                if op not in _OPS:
                    raise ValueError(
                        f"unknown filter operator {op!r} for {key!r}; known: {', '.join(_OPS)}"
                    )
                if not _compare(op, actual, value):
                    return False
        elif isinstance(wanted, (list, tuple)):
            if actual not in wanted:
                return False
        elif wanted == "*":
            if actual is None:
                return False
        elif actual != wanted:
            return False
    return True


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _opt_id(value: object, field: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{field} must be a non-empty string or None, got {value!r}")
    return value


#: Chat roles ``add`` reads (only ``user`` turns are memories with ``infer=True``).
_ROLES = ("user", "assistant", "system", "tool", "developer")
_ROLE_ALIASES = {"human": "user", "ai": "assistant", "function": "tool"}


def _messages(messages: object, infer: bool) -> list[tuple[str, str]]:
    """(role, content) pairs to store from ``add``'s first argument."""
    if isinstance(messages, str):
        return [("user", messages)]
    if isinstance(messages, Mapping):
        messages = [messages]
    if not isinstance(messages, Sequence):
        raise TypeError(
            "messages must be a str, a message mapping or a list of messages, got "
            f"{type(messages).__name__}"
        )
    out: list[tuple[str, str]] = []
    for n, msg in enumerate(messages):
        if isinstance(msg, str):
            out.append(("user", msg))
            continue
        if not isinstance(msg, Mapping):
            raise TypeError(f"messages[{n}] must be a mapping with role and content")
        role, content = msg.get("role"), msg.get("content")
        if not isinstance(role, str) or not role.strip():
            raise ValueError(f"messages[{n}].role must be a non-empty string")
        # Case and the common "human" / "ai" spellings are read; any other role is an error
        # rather than a turn silently left out.
        role = _ROLE_ALIASES.get(role.strip().lower(), role.strip().lower())
        if role not in _ROLES:
            raise ValueError(
                f"messages[{n}].role must be one of {', '.join(_ROLES)}, got {msg['role']!r}"
            )
        if not isinstance(content, str):
            raise TypeError(f"messages[{n}].content must be a str, got {type(content).__name__}")
        if not content.strip():
            continue
        # With inference the user's own statements are the memories; without it every turn is
        # stored verbatim (as Mem0 does with infer=False).
        if infer and role != "user":
            continue
        out.append((role, content))
    return out


class Mem0Api:
    """Mixin of :class:`caap.Agent` with the Mem0-shaped methods (see the module docs)."""

    @classmethod
    def from_config(cls: type[_T], config: Mapping[str, Any] | str | Path) -> _T:
        """Build an agent from a mapping or a JSON / TOML file of its constructor arguments.

        Keys: ``path``, ``backend``, ``model``, ``backend_options``, ``llm``, ``store``,
        ``reliability_threshold``, ``reliability_recalibrate_after``, ``relations`` (a relation
        layer's name, e.g. ``"learned"``), and ``graph`` (a mapping
        of :class:`~caap.conflict_graph.GraphConfig` fields). A file may nest them under
        ``caap``. Unknown keys are rejected, naming the key.
        """
        from caap.conflict_graph.rules import GraphConfig

        data = load_config(config)
        graph = data.pop("graph", None)
        if graph is not None:
            if not isinstance(graph, Mapping):
                raise TypeError(f"graph must be a mapping, got {type(graph).__name__}")
            known = {f.name for f in dataclass_fields(GraphConfig)}
            bad = sorted(k for k in graph if k not in known)
            if bad:
                raise ValueError(f"unknown graph setting {bad[0]!r}")
            data["config"] = GraphConfig(**dict(graph))
        return cls(**data)

    # -- helpers ---------------------------------------------------------------------------
    def _agent(self) -> Agent:
        return cast("Agent", self)

    def _record(self, m: Memory, *, conflicts: Mapping[str, Any] | None = None) -> dict[str, Any]:
        meta = dict(m.metadata)
        versions = meta.pop(VERSIONS_KEY, None)
        agent_id = meta.pop(AGENT_KEY, None)
        run_id = meta.pop(RUN_KEY, None)
        record: dict[str, Any] = {
            "id": m.id,
            "memory": m.text,
            "user_id": m.user_id,
            "agent_id": agent_id,
            "run_id": run_id,
            "metadata": meta,
            "created_at": _iso(m.created_at),
            "updated_at": _iso(m.created_at) if versions else None,
            "observed_at": _iso(m.observed_at),
            "source": m.source,
            "context": m.context,
            "aspect": m.aspect,
            "conflict": (conflicts or {}).get(m.id),
        }
        return record

    def _conflict_index(self, user_id: str, ids: Sequence[str] | None = None) -> dict[str, Any]:
        """Memory id -> its conflict cluster's summary; with ``ids``, only the clusters holding
        those memories are read (a write names its own, not every cluster of the user)."""
        agent = self._agent()
        if ids is None:
            clusters = agent.conflicts(user_id)
        else:
            graph = agent.graph(user_id)
            found = (graph.cluster_of(i) for i in dict.fromkeys(ids))
            clusters = [c for c in found if c is not None and c.has_conflict]
        out: dict[str, Any] = {}
        for c in clusters:
            info = {
                "aspect": c.aspect,
                "type": c.conflict_type.value,
                "risk": c.risk.value,
                "unresolved": c.unresolved,
            }
            for i in c.memory_ids:
                out.setdefault(i, info)
        return out

    @staticmethod
    def _scope_ok(m: Memory, agent_id: str | None, run_id: str | None) -> bool:
        if agent_id is not None and m.metadata.get(AGENT_KEY) != agent_id:
            return False
        return run_id is None or m.metadata.get(RUN_KEY) == run_id

    # -- Mem0-shaped methods ---------------------------------------------------------------
    def add(
        self,
        messages: str | Mapping[str, Any] | Sequence[Mapping[str, Any] | str],
        user_id: str,
        *,
        agent_id: str | None = None,
        run_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        infer: bool = True,
        source: str | None = None,
        context: str | None = None,
        observed_at: datetime | date | str | None = None,
    ) -> dict[str, Any]:
        """Store a text or the user's statements from a chat-message list.

        Args:
            messages: A text, one ``{"role", "content"}`` mapping, or a list of them.
            user_id: The owner (an isolation boundary).
            agent_id: Optional scope: the agent the memory was told to.
            run_id: Optional scope: the session / run.
            metadata: Free metadata stored with each memory (filterable in :meth:`search`);
                may not use the keys ``agent_id``, ``run_id``, ``role``, ``caap_versions``.
            infer: ``True`` (default): store the ``user`` turns only, facets inferred offline;
                ``False``: store every turn verbatim, its ``role`` in the metadata.
            source: Who reported it (``None``: the user's own account).
            context: The condition it holds under.
            observed_at: When it was observed (world time).

        Returns:
            ``{"results": [...]}``: one record per statement, with ``event`` ``"ADD"`` (stored)
            or ``"NONE"`` (the same statement was already stored; the record is the existing
            memory). Nothing is stored when an argument is invalid.
        """
        agent = self._agent()
        user_id = agent._check_user(user_id)
        agent_id = _opt_id(agent_id, "agent_id")
        run_id = _opt_id(run_id, "run_id")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise TypeError(f"metadata must be a mapping, got {type(metadata).__name__}")
        reserved = sorted(k for k in (metadata or {}) if k in MEM0_KEYS)
        if reserved:
            raise ValueError(f"metadata key {reserved[0]!r} is reserved; pass it as an argument")
        turns = _messages(messages, bool(infer))
        items: list[dict[str, Any]] = []
        for role, content in turns:
            meta = dict(metadata or {})
            if agent_id is not None:
                meta[AGENT_KEY] = agent_id
            if run_id is not None:
                meta[RUN_KEY] = run_id
            if not infer:
                meta[ROLE_KEY] = role
            items.append(
                {
                    "text": content,
                    "source": source,
                    "context": context,
                    "observed_at": observed_at,
                    "metadata": meta,
                }
            )
        with agent._lock:
            # Validate every item (and normalise facets) before deduplicating against them.
            built = [agent._build(item, user_id) for item in items]
            existing: dict[tuple[Any, ...], list[Memory]] = {}
            for m in agent.memories(user_id):
                existing.setdefault(self._dedup_key(m), []).append(m)
            # Per statement: the existing memory it repeats, or the index of the fresh item
            # that stores it (the same statement twice in one call is stored once).
            slots: list[Memory | int] = []
            fresh: list[dict[str, Any]] = []
            first: dict[tuple[Any, ...], int] = {}
            for item, m in zip(items, built, strict=True):
                key = self._dedup_key(m)
                same = next((e for e in existing.get(key, []) if self._same_facets(m, e)), None)
                if same is not None:
                    slots.append(same)
                elif (*key, m.source, m.context) in first:
                    slots.append(first[(*key, m.source, m.context)])
                else:
                    first[(*key, m.source, m.context)] = len(fresh)
                    slots.append(len(fresh))
                    fresh.append(item)
            stored = agent.remember_many(fresh, user_id)
            # The clusters as they stand after this write: a statement that just formed a
            # conflict says so in its record, as search and get_all would.
            ids = [slot.id if isinstance(slot, Memory) else stored[slot].id for slot in slots]
            conflicts = self._conflict_index(user_id, ids)
        out: list[dict[str, Any]] = []
        seen: set[int] = set()
        for slot in slots:
            if isinstance(slot, Memory):
                out.append({**self._record(slot, conflicts=conflicts), "event": "NONE"})
            else:
                event = "NONE" if slot in seen else "ADD"
                seen.add(slot)
                record = self._record(stored[slot], conflicts=conflicts)
                out.append({**record, "event": event})
        return {"results": out}

    @staticmethod
    def _dedup_key(m: Memory) -> tuple[Any, ...]:
        return (
            " ".join(m.text.split()),
            m.metadata.get(AGENT_KEY),
            m.metadata.get(RUN_KEY),
            m.observed_at,
        )

    @staticmethod
    def _same_facets(new: Memory, stored: Memory) -> bool:
        # A stored memory's source and context may have been inferred from its text: only a
        # source or context given with the new statement can make it another statement.
        return (new.source is None or new.source == stored.source) and (
            new.context is None or new.context == stored.context
        )

    def search(
        self,
        query: str,
        user_id: str,
        *,
        agent_id: str | None = None,
        run_id: str | None = None,
        filters: Mapping[str, Any] | None = None,
        limit: int = 10,
        threshold: float | None = None,
    ) -> dict[str, Any]:
        """The user's memories nearest ``query`` that match the scope and ``filters``.

        Args:
            query: What to look for.
            user_id: The owner.
            agent_id: Only memories added with this ``agent_id``.
            run_id: Only memories added with this ``run_id``.
            filters: Metadata / field filters (see :func:`match_filters`).
            limit: At most this many results.
            threshold: Only results whose ``score`` (cosine similarity) reaches this.

        Returns:
            ``{"results": [...]}``, best first, each record with its ``score`` and the
            ``conflict`` its cluster carries (``None`` when none): use :meth:`recall` or
            :meth:`respond` for every side of a conflict.
        """
        agent = self._agent()
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise ValueError(f"limit must be a positive int, got {limit!r}")
        if threshold is not None and (
            isinstance(threshold, bool)
            or not isinstance(threshold, int | float)
            or not -1.0 <= threshold <= 1.0
        ):
            raise ValueError(
                f"threshold must be a number in [-1, 1] (a cosine similarity), got {threshold!r}"
            )
        agent_id = _opt_id(agent_id, "agent_id")
        run_id = _opt_id(run_id, "run_id")
        if filters is not None and not isinstance(filters, Mapping):
            raise TypeError(f"filters must be a mapping, got {type(filters).__name__}")
        user_id = agent._check_user(user_id)
        with agent._lock:
            total = len(agent.memories(user_id))
            if total == 0:
                if not isinstance(query, str):
                    raise TypeError(f"query must be a str, got {type(query).__name__}")
                return {"results": []}
            narrowed = bool(filters) or agent_id is not None or run_id is not None
            # Filters are applied to the nearest candidates: all of a user's memories, up to
            # _FILTER_CANDIDATES of them.
            k = min(total, _FILTER_CANDIDATES) if narrowed else min(limit, total)
            recall = agent.recall(query, user_id, k=k)
            conflicts = self._conflict_index(user_id)
            by_id = {m.id: m for m in recall.memories}
            out: list[dict[str, Any]] = []
            for mid in recall.hit_ids:
                m = by_id[mid]
                score = float(recall.scores.get(mid, 0.0))
                if threshold is not None and score < threshold:
                    continue
                if not self._scope_ok(m, agent_id, run_id):
                    continue
                record = {**self._record(m, conflicts=conflicts), "score": score}
                if not match_filters(record, filters):
                    continue
                out.append(record)
                if len(out) == limit:
                    break
        return {"results": out}

    def get_all(
        self,
        user_id: str,
        *,
        agent_id: str | None = None,
        run_id: str | None = None,
        filters: Mapping[str, Any] | None = None,
        limit: int = 100,
    ) -> dict[str, Any]:
        """Every current memory of the user (in write order) matching the scope and filters.

        Versions replaced by :meth:`update` are not listed (see :meth:`history`).
        """
        agent = self._agent()
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise ValueError(f"limit must be a positive int, got {limit!r}")
        agent_id = _opt_id(agent_id, "agent_id")
        run_id = _opt_id(run_id, "run_id")
        with agent._lock:
            memories = agent.memories(user_id)
            conflicts = self._conflict_index(user_id) if memories else {}
        out = []
        for m in memories:
            if not self._scope_ok(m, agent_id, run_id):
                continue
            record = self._record(m, conflicts=conflicts)
            if match_filters(record, filters):
                out.append(record)
            if len(out) == limit:
                break
        return {"results": out}

    def get(self, memory_id: str, user_id: str) -> dict[str, Any] | None:
        """One memory's record, or ``None`` when the user has no such memory."""
        agent = self._agent()
        with agent._lock:
            graph = agent.graph(user_id)
            if not isinstance(memory_id, str) or memory_id not in graph:
                return None
            return self._record(graph.memory(memory_id), conflicts=self._conflict_index(user_id))

    def update(
        self,
        memory_id: str,
        text: str,
        user_id: str,
        *,
        metadata: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Store a new version of a memory; it takes the earlier one's place.

        Nothing is overwritten: the new version is a new memory (a new id) with the earlier
        one's facets, scope and metadata (``metadata`` given here is merged in), and the earlier
        version's record in its history. The earlier version leaves recall and search (its
        conflict edges are closed and kept, as :meth:`forget` does).

        Returns:
            The new version's record with ``event: "UPDATE"`` and ``previous_id``.

        Raises:
            KeyError: The user has no memory ``memory_id`` (another user's id included).
        """
        agent = self._agent()
        user_id = agent._check_user(user_id)
        if not isinstance(text, str) or not text.strip():
            raise ValueError("text must be a non-empty string")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise TypeError(f"metadata must be a mapping, got {type(metadata).__name__}")
        reserved = sorted(k for k in (metadata or {}) if k in MEM0_KEYS)
        if reserved:
            raise ValueError(f"metadata key {reserved[0]!r} is reserved")
        with agent._lock:
            graph = agent.graph(user_id)
            if not isinstance(memory_id, str) or memory_id not in graph:
                raise KeyError(f"user {user_id!r} has no memory {memory_id!r}")
            old = graph.memory(memory_id)
            meta = {k: v for k, v in old.metadata.items() if k != VERSIONS_KEY}
            meta.update(metadata or {})
            versions = _versions(old.metadata)
            versions.append(
                {
                    "id": old.id,
                    "memory": old.text,
                    "created_at": _iso(old.created_at),
                    "observed_at": _iso(old.observed_at),
                    "replaced_at": utcnow().isoformat(),
                }
            )
            meta[VERSIONS_KEY] = versions
            # The new version is the same memory revised: it keeps its aspect and facets.
            (new,) = agent._remember_many(
                [
                    {
                        "text": text,
                        "source": old.source,
                        "context": old.context,
                        "aspect": old.aspect,
                        "metadata": meta,
                    }
                ],
                user_id,
                versions=True,
            )
            agent.forget(old.id, user_id)
        return {**self._record(new), "event": "UPDATE", "previous_id": old.id}

    def history(self, memory_id: str, user_id: str) -> list[dict[str, Any]]:
        """Every version of a memory, oldest first: ``ADD`` then ``UPDATE`` events.

        ``memory_id`` may be any version's id. The current version is the last entry
        (``current: True``). Empty when the user has no such memory.
        """
        agent = self._agent()
        with agent._lock:
            memories = agent.memories(user_id)
        for m in memories:
            versions = _versions(m.metadata)
            ids = [v.get("id") for v in versions]
            if m.id != memory_id and memory_id not in ids:
                continue
            out: list[dict[str, Any]] = []
            previous: str | None = None
            for n, v in enumerate(versions):
                out.append(
                    {
                        "id": v.get("id"),
                        "memory": v.get("memory"),
                        "event": "ADD" if n == 0 else "UPDATE",
                        "previous_id": previous,
                        "created_at": v.get("created_at"),
                        "replaced_at": v.get("replaced_at"),
                        "current": False,
                    }
                )
                previous = v.get("id")
            out.append(
                {
                    "id": m.id,
                    "memory": m.text,
                    "event": "UPDATE" if versions else "ADD",
                    "previous_id": previous,
                    "created_at": _iso(m.created_at),
                    "replaced_at": None,
                    "current": True,
                }
            )
            return out
        return []

    def delete(self, memory_id: str, user_id: str) -> bool:
        """Delete a memory (as :meth:`forget`); ``False`` when the user has no such memory."""
        return self._agent().forget(memory_id, user_id)

    def delete_all(
        self, user_id: str, *, agent_id: str | None = None, run_id: str | None = None
    ) -> int:
        """Delete every memory of the user (within the scope, when given); returns how many."""
        agent = self._agent()
        agent_id = _opt_id(agent_id, "agent_id")
        run_id = _opt_id(run_id, "run_id")
        with agent._lock:
            ids = [m.id for m in agent.memories(user_id) if self._scope_ok(m, agent_id, run_id)]
            return sum(1 for i in ids if agent.forget(i, user_id))
