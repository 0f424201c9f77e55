"""Structural checks of a TANGLE dataset beyond what the pydantic model enforces.

Every problem names the instance (or file and line) and what is wrong. Count minimums (how
many instances per conflict type, personas, aspects, high-risk SCC) describe a full benchmark:
they are errors for the shipped set and warnings for any other dataset, so a small custom set
still validates.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from caap.benchmark.dataset import Instance, _files, default_dataset_path, iter_lines
from caap.benchmark.stale import StaleScenario, iter_stale_lines

__all__ = [
    "BACKGROUND_RANGE",
    "CORE_RANGE",
    "CUSTOM_CORE_RANGE",
    "CUSTOM_DISTRACTOR_RANGE",
    "DISTRACTORS",
    "MINIMUMS",
    "Problem",
    "Severity",
    "check_instance",
    "check_stale_scenario",
    "distinctive_words",
    "is_stale_dataset",
    "validate_dataset",
    "validate_instances",
    "validate_stale",
]

Severity = Literal["error", "warning"]

#: Allowed number of core memories per instance (inclusive).
CORE_RANGE = (6, 8)
#: Allowed number of background memories per instance (inclusive).
BACKGROUND_RANGE = (1, 2)
#: Exact number of distractors per instance (the noise ablation goes up to it).
DISTRACTORS = 6
#: Sizes any dataset may use: outside the shipped set, sizes in these ranges that differ from
#: the shipped ones are warnings; only sizes outside them are errors.
CUSTOM_CORE_RANGE = (2, 8)
#: Distractors a custom dataset may have (the ablation shows at most as many as there are).
CUSTOM_DISTRACTOR_RANGE = (0, 8)
#: Dataset-wide minimums.
MINIMUMS: dict[str, int] = {
    "CPC": 20,
    "BOC": 20,
    "SCC": 20,
    "NONE": 6,
    "personas": 15,
    "aspects": 30,
    "high_risk_scc": 8,
}

# Long words that say nothing about the unresolved variable; they may appear in both texts.
_GENERIC = frozenset(
    {
        "actually",
        "already",
        "always",
        "another",
        "anything",
        "around",
        "because",
        "before",
        "between",
        "currently",
        "during",
        "either",
        "getting",
        "having",
        "making",
        "neither",
        "people",
        "person",
        "prefers",
        "rather",
        "really",
        "recent",
        "recently",
        "should",
        "something",
        "taking",
        "things",
        "through",
        "usually",
        "whether",
        "within",
        "without",
    }
)


class Problem(BaseModel):
    """One thing wrong with a dataset."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    severity: Severity
    message: str
    instance: str | None = None
    where: str | None = None

    def __str__(self) -> str:
        subject = self.instance or self.where or "dataset"
        at = f" ({self.where})" if self.where and self.instance else ""
        return f"{self.severity}: {subject}{at}: {self.message}"


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z]+", text.lower())


def _stem(word: str) -> str:
    # Enough to see "reminder" in "reminders"; not a real stemmer.
    return word[:-1] if word.endswith("s") and len(word) > 6 else word


def distinctive_words(instance: Instance) -> set[str]:
    """Words of ``missing_information`` that would give the unresolved variable away.

    Words of six or more letters, lowercased and with a plural ``s`` dropped, except the
    persona's name, the aspect's words and a short list of generic words.
    """
    if not instance.missing_information:
        return set()
    exclude = {_stem(w) for w in _words(instance.persona.name) + _words(instance.aspect)}
    return {
        _stem(w)
        for w in _words(instance.missing_information)
        if len(w) >= 6 and w not in _GENERIC and _stem(w) not in exclude
    }


def check_instance(
    instance: Instance, where: str | None = None, *, sizes: Severity = "error"
) -> list[Problem]:
    """Per-instance structural checks (counts, ids, sessions, turns, annotations).

    Args:
        instance: The instance.
        where: Optional ``file:line``, for messages.
        sizes: Severity of a core / background / distractor count that differs from the
            shipped set's. With ``"warning"`` (a user's own dataset) only counts outside
            :data:`CUSTOM_CORE_RANGE` and :data:`CUSTOM_DISTRACTOR_RANGE` are errors.
    """
    out: list[Problem] = []

    def err(message: str, severity: Severity = "error") -> None:
        out.append(Problem(severity=severity, message=message, instance=instance.id, where=where))

    def size(n: int, what: str, shipped: tuple[int, int], allowed: tuple[int, int]) -> None:
        if shipped[0] <= n <= shipped[1]:
            return
        want = f"{shipped[0]}-{shipped[1]}" if shipped[0] != shipped[1] else str(shipped[0])
        if sizes == "warning" and allowed[0] <= n <= allowed[1]:
            err(f"has {n} {what}; the shipped set has {want}", "warning")
        elif sizes == "warning":
            err(f"has {n} {what}; expected {allowed[0]}-{allowed[1]}")
        else:
            err(f"has {n} {what}; expected {want}")

    size(len(instance.by_role("core")), "core memories", CORE_RANGE, CUSTOM_CORE_RANGE)
    n_bg = len(instance.by_role("background"))
    size(n_bg, "background memories", BACKGROUND_RANGE, (0, max(n_bg, BACKGROUND_RANGE[1])))
    size(
        len(instance.by_role("distractor")),
        "distractor memories",
        (DISTRACTORS, DISTRACTORS),
        CUSTOM_DISTRACTOR_RANGE,
    )

    mem_ids = [m.id for m in instance.memories]
    dupes = sorted({i for i in mem_ids if mem_ids.count(i) > 1})
    if dupes:
        err(f"duplicate memory ids {dupes}")
    sess_ids = [s.id for s in instance.sessions]
    dupes = sorted({i for i in sess_ids if sess_ids.count(i) > 1})
    if dupes:
        err(f"duplicate session ids {dupes}")

    if not instance.sessions:
        err("has no sessions, so it cannot run on the pipeline track", "warning")
    else:
        listed = {i for s in instance.sessions for i in s.memory_ids}
        unlisted = [i for i in instance.core_ids if i not in listed]
        if unlisted:
            err(f"core memories {unlisted} appear in no session's memory_ids")
        unknown = sorted({i for i in listed if i not in set(mem_ids)})
        if unknown:
            err(f"sessions list unknown memory ids {unknown}")
        for prev, cur in zip(instance.sessions, instance.sessions[1:], strict=False):
            if cur.date < prev.date:
                err(
                    f"session dates go backwards: {prev.id!r} is {prev.date}, "
                    f"then {cur.id!r} is {cur.date}"
                )
        for s in instance.sessions:
            if s.turns[0].role != "user":
                err(f"session {s.id!r} must start with a user turn (turn 0 is {s.turns[0].role})")
            for i in range(1, len(s.turns)):
                if s.turns[i].role == s.turns[i - 1].role:
                    err(
                        f"session {s.id!r} turns do not alternate: turns {i - 1} and {i} are "
                        f"both {s.turns[i].role}"
                    )
                    break

    if instance.conflict_type != "NONE":
        if not (instance.missing_information or "").strip():
            err(f"missing_information is required for a {instance.conflict_type} instance")
        else:
            query = {_stem(w) for w in _words(instance.query)}
            leaked = sorted(distinctive_words(instance) & query)
            if leaked:
                err(f"query leaks words of missing_information: {leaked}")
    if instance.high_risk and instance.conflict_type not in ("SCC", "NONE"):
        err(
            f"high_risk is set on a {instance.conflict_type} instance; only SCC and NONE (a "
            "high-stakes matter whose sources agree: a high-risk control) may be high-risk"
        )
    return out


def _count_problems(instances: Sequence[Instance], severity: Severity) -> list[Problem]:
    types = Counter(i.conflict_type for i in instances)
    have = {
        **{t: types.get(t, 0) for t in ("CPC", "BOC", "SCC", "NONE")},
        "personas": len({i.persona.id for i in instances}),
        "aspects": len({i.aspect for i in instances}),
        "high_risk_scc": sum(i.high_risk and i.conflict_type == "SCC" for i in instances),
    }
    label = {
        "personas": "personas",
        "aspects": "distinct aspects",
        "high_risk_scc": "high-risk SCC instances",
    }
    return [
        Problem(
            severity=severity,
            message=(
                f"has {have[key]} {label.get(key, key + ' instances')}; expected at least {low}"
            ),
        )
        for key, low in MINIMUMS.items()
        if have[key] < low
    ]


def validate_instances(
    instances: Sequence[Instance],
    *,
    counts: Severity | None = "warning",
    where: Sequence[str | None] | None = None,
    sizes: Severity = "error",
) -> list[Problem]:
    """Check already-loaded instances: each one, dataset-wide ids, and count minimums.

    Args:
        instances: The dataset.
        counts: Severity of count-minimum problems, or ``None`` to skip them.
        where: Optional ``file:line`` per instance, for messages.
        sizes: Severity of per-instance sizes that differ from the shipped set's (see
            :func:`check_instance`).
    """
    locs = list(where) if where is not None else [None] * len(instances)
    out: list[Problem] = []
    seen: dict[str, str] = {}
    owner: dict[str, str] = {}
    for inst, loc in zip(instances, locs, strict=True):
        if inst.id in seen:
            out.append(_duplicate("instance", inst.id, seen[inst.id], loc))
        seen.setdefault(inst.id, loc or inst.id)
        for s in inst.sessions:
            # Pipeline provenance names sessions by id: one id must mean one session.
            if s.id in owner and owner[s.id] != inst.id:
                out.append(
                    Problem(
                        severity="error",
                        message=f"session id {s.id!r} is also used by instance {owner[s.id]!r}",
                        instance=inst.id,
                        where=loc,
                    )
                )
            owner.setdefault(s.id, inst.id)
        out.extend(check_instance(inst, loc, sizes=sizes))
    if counts is not None:
        out.extend(_count_problems(instances, counts))
    return out


def _duplicate(kind: str, ident: str, first: str, where: str | None) -> Problem:
    """An id used a second time (``first``: where it was used first)."""
    return Problem(
        severity="error",
        message=f"duplicate {kind} id (first at {first})",
        instance=ident,
        where=where,
    )


def _bad_line(error: str | None, raw_id: str | None, where: str) -> Problem:
    """A line that does not parse or fails the format."""
    return Problem(severity="error", message=error or "invalid line", instance=raw_id, where=where)


def validate_dataset(path: str | Path | None = None) -> list[Problem]:
    """Validate a ``.jsonl`` file or directory of them (default: the shipped set).

    Lines that do not parse are reported (all of them, not only the first) and skipped; the
    rest are checked by :func:`validate_instances`. Count minimums and per-instance sizes other
    than the shipped set's are errors for the shipped set and warnings for any other dataset
    (sizes: 2-8 core memories and 0-8 distractors; beyond those they are errors).

    Raises:
        DatasetError: ``path`` does not exist or is a directory without ``.jsonl`` files.
    """
    shipped = default_dataset_path()
    root = Path(path) if path is not None else shipped
    out: list[Problem] = []
    instances: list[Instance] = []
    where: list[str | None] = []
    for line in iter_lines(root):
        if line.instance is None:
            out.append(_bad_line(line.error, line.raw_id, line.where))
            continue
        instances.append(line.instance)
        where.append(line.where)
    is_shipped = root.resolve() == shipped.resolve()
    out.extend(
        validate_instances(
            instances,
            counts="error" if is_shipped else "warning",
            where=where,
            sizes="error" if is_shipped else "warning",
        )
    )
    return out


def _mentions(texts: Sequence[str], terms: Sequence[str]) -> bool:
    low = [t.lower() for t in texts]
    return any(term.lower() in text for term in terms for text in low)


def check_stale_scenario(scenario: StaleScenario, where: str | None = None) -> list[Problem]:
    """What makes a valid stale scenario unscorable or too easy (warnings).

    The scorer passes an answer that names the current state (any of ``current_terms``); an
    answer is built from what the user said, so a current term that no ``update`` turn
    contains can only be named by chance. A stale term no ``old`` turn contains names nothing
    the history states, and an implicit-adaptation query that names the current state gives
    the answer away.
    """
    out: list[Problem] = []

    def warn(message: str) -> None:
        out.append(Problem(severity="warning", message=message, instance=scenario.id, where=where))

    turns = [t for s in scenario.sessions for t in s.turns]
    updates = [t.content for t in turns if t.tag == "update"]
    olds = [t.content for t in turns if t.tag == "old"]
    if not _mentions(updates, scenario.current_terms):
        warn(
            f"no 'update' turn contains a current term {scenario.current_terms}: an answer "
            "can name the current state only by chance"
        )
    if scenario.stale_terms and not _mentions(olds, scenario.stale_terms):
        warn(f"no 'old' turn contains a stale term {scenario.stale_terms}")
    implicit = scenario.probe("implicit_adaptation").query
    if _mentions([implicit], scenario.current_terms):
        warn("the implicit_adaptation query names the current state, which gives it away")
    return out


def validate_stale(path: str | Path | None = None) -> list[Problem]:
    """Validate a ``.jsonl`` file or directory of stale-state scenarios (default: the shipped
    set): every line that does not parse or fails the format (all of them, not only the
    first), duplicate scenario ids (errors), and :func:`check_stale_scenario`'s warnings.

    Raises:
        DatasetError: ``path`` does not exist or is a directory without ``.jsonl`` files.
    """
    out: list[Problem] = []
    seen: dict[str, str] = {}
    for line in iter_stale_lines(path):
        sc = line.scenario
        if sc is None:
            out.append(_bad_line(line.error, line.raw_id, line.where))
            continue
        if sc.id in seen:
            out.append(_duplicate("scenario", sc.id, seen[sc.id], line.where))
        seen.setdefault(sc.id, line.where)
        out.extend(check_stale_scenario(sc, line.where))
    return out


def is_stale_dataset(path: str | Path) -> bool:
    """Whether ``path`` holds stale-state scenarios rather than TANGLE instances: its first
    line that is a JSON object has ``probes`` (a scenario's) and no ``memories`` (an
    instance's).

    Raises:
        DatasetError: ``path`` does not exist or is a directory without ``.jsonl`` files.
    """
    for f in _files(Path(path)):
        with f.open(encoding="utf-8") as fh:
            for line in fh:
                try:
                    raw = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(raw, dict):
                    return "probes" in raw and "memories" not in raw
    return False
