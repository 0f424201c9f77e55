"""Stale state: supersession (Type I) and propagated invalidation (Type II).

A later observation can invalidate an earlier memory without saying so:

- **Type I, supersession.** A newer memory gives an incompatible value for the *same* aspect
  ("signed a lease in Portland" after "lives in Seattle"). Edge: ``supersedes`` (newer -> older).
- **Type II, propagated invalidation.** A newer memory changes an aspect that *another* aspect
  depends on ("broke a leg" makes "cycles to work every day" unsafe to act on). Edge:
  ``propagated_invalidation`` (the change -> the dependent memory), only along an explicit
  :class:`DependencyMap` between life facets.

One change is a supersession; repeated reversals are an oscillation (BOC), which the timeline
rules in :mod:`caap.conflict_graph.rules` keep as they are. Old memories are never deleted:
the edge carries the world time the old state stopped holding (``invalid_at``), and a
propagated invalidation is lifted (its edge closed) as soon as the dependent aspect is observed
again after the change.

Every rule here is a pure function over :class:`~caap.conflict_graph.rules.Node` values, facet
names and similarities; the only model use is :func:`facet_matrix` (embeddings of the facet
descriptions), done once per embedder.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType

import numpy as np
import numpy.typing as npt

from caap._embeddings import Embedder
from caap.conflict_graph import _text
from caap.conflict_graph._prototypes import PROTOTYPES
from caap.conflict_graph.rules import (
    GraphConfig,
    Node,
    PairSimilarity,
    TimelineEdge,
    VerdictLookup,
    _self_source,
    newer_older,
)
from caap.models import ConflictEdge, EdgeKind

__all__ = [
    "DEFAULT_DEPENDENCIES",
    "EXCLUSIVE_FACETS",
    "FACET_CUES",
    "FACET_DESCRIPTIONS",
    "DependencyMap",
    "Validity",
    "about_someone_else",
    "entities",
    "entity_supersessions",
    "exclusive_supersessions",
    "facet_matrix",
    "facet_similarities",
    "facets_of",
    "invalidation_certain",
    "is_change_event",
    "is_later",
    "primary_facets",
    "propagated_invalidations",
    "reports_own_change",
    "state_supersessions",
    "trigger_reach",
    "validity",
    "verdict_stale_edges",
]

#: Life facets a memory can sit on: the graph's aspect prototypes, with the facets the default
#: dependency map links spelled out as several short phrasings (separated by ``;``): a memory
#: sits on a facet as close as it is to the nearest phrasing.
FACET_DESCRIPTIONS: Mapping[str, str] = MappingProxyType(
    {
        **PROTOTYPES,
        "residence": "lives in Seattle; lives in an apartment downtown; moved to a new city; "
        "signed a lease on a flat; bought a house; their home address",
        "commute": "cycles to work every day; takes the bus to the office; drives to work; "
        "drives in every morning on the motorway; walks to the office; commutes by train; "
        "takes the tram; gets a lift from a colleague",
        "exercise": "runs every morning; goes to the gym; swims laps; plays tennis on "
        "weekends; training for a marathon; goes to yoga classes",
        "travel": "travels abroad; takes flights for work; goes on a road trip; books hotels "
        "and trips; a holiday overseas",
        "diet": "eats vegetarian; follows a keto diet; loves spicy food; cooks pasta for "
        "dinner; eats a lot of sweets and sugar",
        "alcohol": "drinks wine with dinner; has a few beers; enjoys cocktails; drinks "
        "alcohol at parties",
        "caffeine": "drinks coffee every morning; has three espressos a day; drinks energy "
        "drinks; loves strong tea",
        "employment": "got a new job; works as a nurse at the hospital; changed employers; "
        "was laid off; promoted to manager; started at a new company",
        "work_schedule": "works night shifts; office hours nine to five; works from home on "
        "Fridays; shifts Monday to Thursday",
        "budgeting": "a monthly budget; spends a lot on eating out; tracks expenses; can "
        "afford it; saving money each month",
        "childcare": "picks up the kids from school; daycare for the baby; a babysitter on "
        "weekends; who collects the children",
        "elder_care": "takes care of an elderly mother; visits dad at the care home; handles "
        "a parent's medical appointments",
        "legal": "custody arrangement for the children; a court order; legal agreement; "
        "visitation schedule",
        "injury": "broke a leg; fractured an arm; sprained an ankle; tore a knee ligament; "
        "had surgery; is in a cast; walks on crutches",
        "diagnosis": "diagnosed with diabetes; found out she is pregnant; has high blood "
        "pressure; has celiac disease; the doctor said to cut out salt",
        "vehicle": "drives a 2015 Toyota; sold the car; bought a new car; owns a motorbike; "
        "the car was stolen; driving licence suspended",
        "family_status": "got married; got divorced; separated from a partner; had a baby; a "
        "parent moved in; a relative passed away",
        "local_places": "a favourite neighbourhood cafe; the local climbing gym; the park near "
        "home; a bar down the street; a local restaurant",
        "pets": "has a cat named Luna; adopted a rescue dog; walks the dog twice a day; the "
        "dog passed away; feeds the cat; a pet sitter",
        "hobbies": "plays guitar in a band; reads novels; plays video games; knits and "
        "paints; plays chess; collects vinyl records",
        "social_life": "goes out with friends on Fridays; hosts dinner parties; meets friends "
        "for drinks; goes to concerts",
        "medical_care": "sees a physiotherapist; has a check-up with the doctor; follows a "
        "treatment plan; goes to therapy",
        "local_services": "the local dentist; a family doctor nearby; a gym membership; the "
        "nearby grocery store; the local library; a hairdresser",
    }
)

#: Lexical cues that place a memory on a facet whatever the embedding says: how someone gets
#: to work is said in very few ways.
FACET_CUES: Mapping[str, str] = MappingProxyType(
    {
        "commute": r"\b(?:commut\w*|(?:drive|drives|drove|driving|cycle|cycles|cycling|bike|"
        r"bikes|biking|ride|rides|riding|walk|walks|walking)\s+(?:in\s+)?to\s+(?:the\s+)?"
        r"(?:work|office|job|site|plant|warehouse|factory|shop|store|hospital|school|campus)\b)",
    }
)

#: Facets that hold one value at a time: a newer reported change on one of them supersedes an
#: older memory on the same facet even when the graph filed the two under different aspects.
EXCLUSIVE_FACETS = frozenset({"residence", "employment", "commute", "work_schedule", "vehicle"})


class DependencyMap:
    """Which life facets depend on which: ``trigger -> dependents``.

    A change on a trigger facet can invalidate memories on its dependent facets, and nothing
    else: two facets that are not linked here never invalidate each other. Immutable: extend
    it with :meth:`extended`.

    Args:
        edges: Trigger facet -> the facets that depend on it.
        descriptions: Facet name -> a short description, used to place memories on facets by
            embedding similarity (default :data:`FACET_DESCRIPTIONS`). Every facet named in
            ``edges`` needs one.

        cues: Facet name -> a regular expression; a memory whose text matches it sits on
            that facet whatever its embedding says (default :data:`FACET_CUES`). Lexical cues
            catch what a small embedding model misses ("drive to the warehouse" is a commute).

    Raises:
        ValueError: a facet in ``edges`` has no description, a facet depends on itself, or a
            cue is not a valid regular expression.
    """

    __slots__ = ("_cues", "_descriptions", "_edges")

    def __init__(
        self,
        edges: Mapping[str, Iterable[str]],
        descriptions: Mapping[str, str] | None = None,
        cues: Mapping[str, str] | None = None,
    ) -> None:
        desc = dict(FACET_DESCRIPTIONS if descriptions is None else descriptions)
        for name, text in desc.items():
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f"description of facet {name!r} must be a non-empty string")
        frozen: dict[str, frozenset[str]] = {}
        for trigger, deps in edges.items():
            if isinstance(deps, str):
                raise ValueError(
                    f"dependents of {trigger!r} must be a collection of facet names, "
                    f"not the string {deps!r}"
                )
            dset = frozenset(deps)
            for name in (trigger, *sorted(dset, key=str)):
                if not isinstance(name, str) or not name.strip():
                    raise ValueError(f"facet names must be non-empty strings, got {name!r}")
                if name not in desc:
                    raise ValueError(
                        f"facet {name!r} has no description; pass descriptions={{{name!r}: "
                        "'what the facet is about'}"
                    )
            if trigger in dset:
                raise ValueError(f"facet {trigger!r} cannot depend on itself")
            frozen[trigger] = frozen.get(trigger, frozenset()) | dset
        compiled: dict[str, re.Pattern[str]] = {}
        for name, rx in dict(FACET_CUES if cues is None else cues).items():
            if name not in desc:
                raise ValueError(f"cue for facet {name!r}, which has no description")
            try:
                compiled[name] = re.compile(rx, re.I)
            except (re.error, TypeError) as exc:
                raise ValueError(f"cue for facet {name!r} is not a valid pattern: {exc}") from None
        self._edges: Mapping[str, frozenset[str]] = MappingProxyType(frozen)
        self._descriptions: Mapping[str, str] = MappingProxyType(desc)
        self._cues: Mapping[str, re.Pattern[str]] = MappingProxyType(compiled)

    @property
    def cues(self) -> Mapping[str, re.Pattern[str]]:
        """Facet name -> compiled lexical cue (read-only)."""
        return self._cues

    def cued_facets(self, text: str) -> frozenset[str]:
        """The facets whose lexical cue ``text`` matches."""
        return frozenset(f for f, rx in self._cues.items() if rx.search(text))

    @property
    def edges(self) -> Mapping[str, frozenset[str]]:
        """Trigger facet -> the facets that depend on it (read-only)."""
        return self._edges

    @property
    def descriptions(self) -> Mapping[str, str]:
        """Facet name -> description (read-only)."""
        return self._descriptions

    def __repr__(self) -> str:
        body = ", ".join(f"{t!r}: {sorted(d)!r}" for t, d in self._edges.items())
        return f"DependencyMap({{{body}}})"

    def dependents(self, facet: str) -> frozenset[str]:
        """The facets that depend on ``facet`` (empty for an unknown or leaf facet)."""
        return self.edges.get(facet, frozenset())

    def depends(self, trigger: str, dependent: str) -> bool:
        """True when a change on ``trigger`` can invalidate a memory on ``dependent``."""
        return dependent in self.dependents(trigger)

    @property
    def triggers(self) -> frozenset[str]:
        """Facets a change on which can invalidate another facet."""
        return frozenset(t for t, d in self.edges.items() if d)

    @property
    def linked(self) -> frozenset[str]:
        """Every facet that is a trigger or a dependent."""
        return self.triggers | frozenset().union(*self.edges.values())

    def extended(
        self,
        edges: Mapping[str, Iterable[str]],
        descriptions: Mapping[str, str] | None = None,
        cues: Mapping[str, str] | None = None,
    ) -> DependencyMap:
        """A new map with more dependencies (and new facets' descriptions) added.

        Example::

            deps = DEFAULT_DEPENDENCIES.extended(
                {"pets": ["residence"], "boat": ["travel"]},
                descriptions={"boat": "owning or selling a sailing boat"},
            )
        """
        merged: dict[str, set[str]] = {t: set(d) for t, d in self.edges.items()}
        for t, d in edges.items():
            if isinstance(d, str):
                raise ValueError(
                    f"dependents of {t!r} must be a collection of facet names, not the string {d!r}"
                )
            merged.setdefault(t, set()).update(d)
        return DependencyMap(
            merged,
            {**self.descriptions, **dict(descriptions or {})},
            {**{f: rx.pattern for f, rx in self._cues.items()}, **dict(cues or {})},
        )


#: The default map. Physical limits change how someone can move; where someone lives changes
#: the places and services they use; a job sets the schedule, the budget and the commute; a
#: family change moves care and custody; a diagnosis changes food, drink and exercise; losing a
#: vehicle changes how someone gets around.
DEFAULT_DEPENDENCIES = DependencyMap(
    {
        "injury": ["exercise", "commute", "travel"],
        "diagnosis": ["diet", "alcohol", "caffeine", "exercise"],
        "residence": ["commute", "local_places", "local_services"],
        "employment": ["work_schedule", "budgeting", "commute"],
        "family_status": ["childcare", "elder_care", "legal"],
        "vehicle": ["commute", "travel"],
    }
)


_cache: dict[tuple[int, tuple[str, ...]], npt.NDArray[np.float32]] = {}
_lock = threading.Lock()


def facet_matrix(embedder: Embedder, deps: DependencyMap) -> npt.NDArray[np.float32]:
    """Similarity-ready rows for the map's facets: one unit vector per phrasing of each
    description, cached per embedder and description set. Use :func:`facet_similarities`
    to read a memory's similarity to each facet off it."""
    texts = tuple(p for _, p in _phrasings(deps))
    key = (id(embedder), texts)
    with _lock:
        if key not in _cache:
            _cache[key] = embedder.encode(list(texts))
        return _cache[key]


def _phrasings(deps: DependencyMap) -> tuple[tuple[int, str], ...]:
    """``(description position, phrasing)`` for each ``;``-separated phrasing, in order."""
    return _phrasings_of(tuple(deps.descriptions.values()))


@functools.lru_cache(maxsize=64)
def _phrasings_of(descriptions: tuple[str, ...]) -> tuple[tuple[int, str], ...]:
    return tuple(
        (pos, p.strip())
        for pos, text in enumerate(descriptions)
        for p in text.split(";")
        if p.strip()
    )


@functools.lru_cache(maxsize=64)
def _phrasing_runs(
    phrasings: tuple[tuple[int, str], ...],
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """The descriptions that have phrasings, and the row where each one's run of them starts
    (:func:`_phrasings` lists them description by description)."""
    starts: dict[int, int] = {}
    for row, (pos, _) in enumerate(phrasings):
        starts.setdefault(pos, row)
    return (
        np.asarray(list(starts), dtype=np.intp),
        np.asarray(list(starts.values()), dtype=np.intp),
    )


def facet_similarities(
    matrix: npt.NDArray[np.float32], deps: DependencyMap, vector: npt.NDArray[np.float32]
) -> npt.NDArray[np.float32]:
    """A memory's similarity to each facet (in ``deps.descriptions`` order): the best of the
    facet's phrasings (-1 for a facet without any)."""
    sims = (matrix @ vector).astype(np.float32)
    present, starts = _phrasing_runs(_phrasings(deps))
    out = np.full(len(deps.descriptions), -1.0, dtype=np.float32)
    if len(present):
        # Each facet's phrasings are one contiguous run of rows: a max per run.
        out[present] = np.maximum(np.maximum.reduceat(sims, starts), -1.0)
    return out


def facets_of(
    sims: Sequence[float] | npt.NDArray[np.float32],
    names: Sequence[str],
    *,
    minimum: float = 0.35,
    margin: float = 0.08,
) -> frozenset[str]:
    """The facets a memory sits on, from its similarity to each facet description.

    The best facet and any within ``margin`` of it, each of them at least ``minimum``: "goes
    to the climbing gym" sits on both local places and exercise.
    """
    if len(sims) != len(names):
        raise ValueError(f"got {len(sims)} similarities for {len(names)} facet names")
    if not len(names):
        return frozenset()
    best = float(max(sims))
    floor = max(minimum, best - margin)
    return frozenset(n for n, s in zip(names, sims, strict=True) if float(s) >= floor)


def primary_facets(
    sims: Sequence[float] | npt.NDArray[np.float32],
    names: Sequence[str],
    *,
    minimum: float = 0.35,
    margin: float = 0.03,
) -> frozenset[str]:
    """The facets a memory is most about: the best one and any in a near tie with it (at
    least ``minimum``). A change is a trigger on these only, not on every facet it touches."""
    return facets_of(sims, names, minimum=minimum, margin=margin)


def is_later(newer: Node, older: Node) -> bool | None:
    """Whether ``newer`` holds from a strictly later point than ``older``.

    World time (``when``) is compared when both have it; system order (``order``, the write
    time) only when neither has it. One dated and one undated memory cannot be ordered:
    ``None``. Equal times are not "later".
    """
    if newer.when is not None and older.when is not None:
        return newer.when > older.when
    if newer.when is None and older.when is None:
        return newer.order > older.order
    return None


_EVENT = re.compile(
    r"\b(?:broke|broken|fractured?|sprain(?:ed)?|tore|torn|injur(?:ed|y)|dislocated|"
    r"surgery|operation|in a cast|on crutches|hospitali[sz]ed|diagnosed|pregnant|"
    r"moved|relocated|signed a lease|bought a (?:house|flat|home|condo)|new (?:job|role|"
    r"position|employer|office|apartment|flat|house|place)|hired|laid off|fired|resigned|"
    r"retired|promoted|let go|sold (?:my|his|her|their|the) (?:car|bike|motorbike|van)|"
    r"totall?ed|stolen|licen[cs]e (?:was )?(?:suspended|revoked)|married|divorced?|"
    r"separated|had a baby|gave birth|was born|passed away|moved in|moved out|"
    r"now|no longer|stopped|quit|switched|started|began|changed|gave up|took up|"
    r"anymore|any more|since then|these days|instead)\b",
    re.I,
)


@functools.lru_cache(maxsize=65536)
def is_change_event(text: str) -> bool:
    """The text reports that something changed (an event or a new state), not a standing
    habit: "broke my leg", "moved to Portland", "started a new job", "no longer drives"."""
    return bool(_EVENT.search(text))


_CERTAIN = re.compile(
    r"\b(?:for (?:at least |about |another )?(?:\d+|one|two|three|four|five|six|seven|eight|"
    r"nine|ten|twelve|a few|several|a couple of) (?:days?|weeks?|months?|years?)|until|"
    r"permanent(?:ly)?|for good|no longer|not allowed|can't|cannot|won't be able|"
    r"banned from|sold|gave up|told (?:me|him|her|them) not to|must not|no (?:cycling|running|"
    r"driving|flying|alcohol|caffeine|sugar))\b",
    re.I,
)


@functools.lru_cache(maxsize=65536)
def invalidation_certain(text: str) -> bool:
    """Whether a change states how far it reaches (a duration, a ban, finality).

    "Broke my leg" leaves open how long and how badly; "in a cast for six weeks, no cycling"
    does not. An uncertain propagated invalidation is a question, not a conclusion.
    """
    return bool(_CERTAIN.search(text))


def state_supersessions(
    nodes: Sequence[Node],
    sim: PairSimilarity | Mapping[tuple[str, str], float],
    cfg: GraphConfig,
    *,
    oscillates: bool = False,
) -> list[TimelineEdge]:
    """Type I: a reported change of one aspect supersedes the earlier states.

    ``nodes`` are the memories of one aspect. Only the user's own statements without a stated
    condition take part (a condition is a context partition, a named source a source
    conflict). Each node that reports a change (:func:`is_change_event`) supersedes every
    strictly earlier node (:func:`is_later`) that does not say the same thing (value
    similarity below ``cfg.corroborate``). Nothing is returned when the aspect oscillates, or
    when the first change or anything after it says it went back (a return is a reversal, not
    a supersession).
    """
    if oscillates:
        return []
    own = [n for n in nodes if _self_source(n.source) and not n.context]
    changes = [n for n in own if is_change_event(n.text)]
    out: list[TimelineEdge] = []
    for change in sorted(changes, key=lambda n: (n.order, n.id)):
        older = [n for n in own if n.id != change.id and is_later(change, n) is True]
        if not older:
            continue
        after = [n for n in own if n.id != change.id and is_later(n, change) is True]
        if any(n.extraction.returns for n in [change, *after]):
            return []
        for old in older:
            if sim.get((change.id, old.id), 0.0) >= cfg.corroborate:
                continue
            out.append(
                TimelineEdge.between(
                    EdgeKind.SUPERSEDES,
                    change,
                    old,
                    "a later report of a change replaces this state",
                )
            )
    return out


_WEEKDAYS = frozenset(
    ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
)
_OTHER_PERSON = re.compile(
    rf"^\s*(?:my|our)\s+(?:[\w'-]+\s+)?{_text._PERSON_NOUN}\b(?!\s+and\s+I\b)", re.I
)


@functools.lru_cache(maxsize=65536)
def about_someone_else(text: str) -> bool:
    """The statement is about another person ("My brother moved to Denver"), not the user:
    its changes are not the user's, and its states are not the user's to replace."""
    return bool(_OTHER_PERSON.search(text))


@functools.lru_cache(maxsize=65536)
def entities(text: str) -> frozenset[str]:
    """Named things a text mentions: capitalised words that are not function words, months,
    weekdays or "I" ("Miso", "Civic", "Portland")."""
    out = set()
    for w in re.findall(r"\b([A-Z][\w'-]+)", text):
        low = w.lower().removesuffix("'s")
        if low in _text.STOPWORDS or low in _text.MONTHS or low in _WEEKDAYS or len(low) < 3:
            continue
        out.add(low)
    return frozenset(out)


def _own_about_self(nodes: Sequence[Node]) -> list[Node]:
    """The user's own statements with no stated condition that are about the user, not
    someone else: the pool every cross-aspect supersession is drawn from."""
    return [
        n
        for n in nodes
        if _self_source(n.source) and not n.context and not about_someone_else(n.text)
    ]


def _partners(pool: Sequence[Node], change: Node, focus: str | None) -> Sequence[Node]:
    """The nodes to pair with ``change``: all of ``pool``, or only the focus node when a
    focus is set and ``change`` is not it (incremental use: only pairs with the new memory)."""
    if focus is None or change.id == focus:
        return pool
    return [n for n in pool if n.id == focus]


def entity_supersessions(
    nodes: Sequence[Node],
    aspects: Mapping[str, str],
    facets: Mapping[str, frozenset[str]],
    sim: PairSimilarity | Mapping[tuple[str, str], float],
    cfg: GraphConfig,
    subject: frozenset[str] = frozenset(),
    focus: str | None = None,
) -> list[TimelineEdge]:
    """Type I across aspects, by the thing named: a later reported change that names the same
    entity as an earlier memory and sits on a life facet with it ("Miso passed away" after
    "my cat Miso sleeps on my keyboard") replaces it. Same conditions as
    :func:`state_supersessions` otherwise; the user's own name is not an entity. With
    ``focus``, only pairs that include that node are returned.
    """
    skip = {s.lower() for s in subject}
    own = _own_about_self(nodes)
    ents = {n.id: entities(n.text) - skip for n in own}
    out: list[TimelineEdge] = []
    for change in own:
        if not ents[change.id] or not is_change_event(change.text):
            continue
        for old in _partners(own, change, focus):
            if old.id == change.id or aspects.get(old.id) == aspects.get(change.id):
                continue
            shared = ents[change.id] & ents[old.id]
            if not shared or not (
                facets.get(change.id, frozenset()) & facets.get(old.id, frozenset())
            ):
                continue
            if is_later(change, old) is not True:
                continue
            if old.extraction.returns or change.extraction.returns:
                continue
            if sim.get((change.id, old.id), 0.0) >= cfg.corroborate:
                continue
            out.append(
                TimelineEdge.between(
                    EdgeKind.SUPERSEDES,
                    change,
                    old,
                    f"a later reported change about {', '.join(sorted(shared))} replaces this",
                )
            )
    return out


def exclusive_supersessions(
    nodes: Sequence[Node],
    aspects: Mapping[str, str],
    facets: Mapping[str, frozenset[str]],
    sim: PairSimilarity | Mapping[tuple[str, str], float],
    cfg: GraphConfig,
    exclusive: frozenset[str] = EXCLUSIVE_FACETS,
    focus: str | None = None,
) -> list[TimelineEdge]:
    """Type I across aspects: a reported change on a one-value facet (where someone lives,
    works, how they commute) supersedes earlier memories on that facet filed under another
    aspect. The same conditions as :func:`state_supersessions` apply (own statements, no
    stated condition, strictly later, not the same value); a later "went back" on the facet
    makes it a reversal, and nothing is drawn for that facet. With ``focus``, only pairs
    that include that node are returned.
    """
    own = _own_about_self(nodes)
    out: list[TimelineEdge] = []
    for facet in sorted(exclusive):
        on = [n for n in own if facet in facets.get(n.id, frozenset())]
        changes = sorted((n for n in on if is_change_event(n.text)), key=lambda n: n.order)
        if not changes:
            continue
        first = changes[0]
        if any(n.extraction.returns for n in on if is_later(n, first) is not False):
            continue
        for change in changes:
            for old in _partners(on, change, focus):
                if old.id == change.id or aspects.get(old.id) == aspects.get(change.id):
                    continue
                if is_later(change, old) is not True:
                    continue
                if sim.get((change.id, old.id), 0.0) >= cfg.corroborate:
                    continue
                out.append(
                    TimelineEdge.between(
                        EdgeKind.SUPERSEDES,
                        change,
                        old,
                        f"a later reported change of {facet.replace('_', ' ')} replaces this",
                    )
                )
    return list({(e.source_id, e.target_id): e for e in out}.values())


def reports_own_change(node: Node) -> bool:
    """The user's own statement reporting a change of their own (not about someone else).

    Every cross-aspect stale rule here (:func:`propagated_invalidations`,
    :func:`exclusive_supersessions`, :func:`entity_supersessions`) draws its edges from such a
    node only: a pool without one yields nothing.
    """
    return (
        _self_source(node.source)
        and is_change_event(node.text)
        and not about_someone_else(node.text)
    )


def trigger_reach(change: Node, trigger: frozenset[str], deps: DependencyMap) -> frozenset[str]:
    """The facets a memory can invalidate as a change on its ``trigger`` facets: empty unless
    it is the user's own statement reporting a change (:func:`reports_own_change`) and the map
    lists dependents of one of those facets."""
    if not trigger or not reports_own_change(change):
        return frozenset()
    return frozenset().union(*(deps.dependents(t) for t in trigger))


def propagated_invalidations(
    nodes: Sequence[Node],
    aspects: Mapping[str, str],
    facets: Mapping[str, frozenset[str]],
    deps: DependencyMap,
    primary: Mapping[str, frozenset[str]] | None = None,
    focus: str | None = None,
) -> list[TimelineEdge]:
    """Type II: a change on a trigger facet invalidates earlier memories on dependent facets.

    ``aspects`` and ``facets`` give each node's aspect and life facets; ``primary`` the
    facets each is most about (a change triggers on those only; default: on all of its
    facets). An edge ``change -> memory`` is drawn when all hold:

    - the change is the user's own statement reporting a change (:func:`is_change_event`) and
      its facet is one the map lists as a trigger of one of the memory's facets;
    - the two are in different aspects (within one aspect a change is a supersession);
    - the change is strictly later than the memory (:func:`is_later`);
    - the memory's aspect was not observed again after the change: a later memory of that
      aspect shows its state after the change, which lifts the invalidation.

    Memories on facets the map does not link are never touched. With ``focus``, only pairs
    that include that node are returned.
    """
    by_aspect: dict[str, list[Node]] = {}
    for n in nodes:
        by_aspect.setdefault(aspects.get(n.id, ""), []).append(n)
    out: list[TimelineEdge] = []
    for change in nodes:
        if primary is not None:
            trig = primary.get(change.id, frozenset())
        else:
            trig = facets.get(change.id, frozenset())
        reach = trigger_reach(change, trig, deps)
        if not reach:
            continue
        for old in _partners(nodes, change, focus):
            if old.id == change.id or aspects.get(old.id) == aspects.get(change.id):
                continue
            own = facets.get(old.id, frozenset())
            # A memory on the trigger facet itself is another report of the change's kind.
            if not (own & reach) or own & trig:
                continue
            if is_later(change, old) is not True:
                continue
            peers = by_aspect.get(aspects.get(old.id, ""), [])
            if any(is_later(p, change) is True for p in peers if p.id != old.id):
                continue
            shared = sorted(own & reach)
            out.append(
                TimelineEdge.between(
                    EdgeKind.PROPAGATED_INVALIDATION,
                    change,
                    old,
                    f"a later change ({', '.join(sorted(trig))}) affects what this memory "
                    f"says about {', '.join(shared)}",
                )
            )
    return out


@dataclass(frozen=True)
class Validity:
    """How long a memory's state held in the world, read off its incoming edges."""

    valid_at: datetime | None
    """When it started holding (its own observation time, if known)."""
    invalid_at: datetime | None
    """When a later memory stopped it (``None``: still current, or not known when)."""
    superseded_by: tuple[str, ...] = ()
    """Ids of same-aspect memories that replace it."""
    invalidated_by: tuple[str, ...] = ()
    """Ids of changes in other aspects it depends on."""

    @property
    def current(self) -> bool:
        """Nothing later replaces or invalidates it."""
        return not (self.superseded_by or self.invalidated_by)


def validity(
    memory_id: str, observed_at: datetime | None, edges: Iterable[ConflictEdge]
) -> Validity:
    """The validity of one memory from the graph's active edges (closed edges are history)."""
    sup: list[str] = []
    inv: list[str] = []
    ends: list[datetime] = []
    for e in edges:
        if not e.active or e.target_id != memory_id:
            continue
        if e.kind is EdgeKind.SUPERSEDES:
            sup.append(e.source_id)
        elif e.kind is EdgeKind.PROPAGATED_INVALIDATION:
            inv.append(e.source_id)
        else:
            continue
        if e.invalid_at is not None:
            ends.append(e.invalid_at)
    return Validity(
        valid_at=observed_at,
        invalid_at=min(ends) if ends else None,
        superseded_by=tuple(dict.fromkeys(sup)),
        invalidated_by=tuple(dict.fromkeys(inv)),
    )


def verdict_stale_edges(
    new: Node,
    others: Sequence[Node],
    verdict: VerdictLookup,
    aspects: Mapping[str, str],
    cfg: GraphConfig,
) -> list[TimelineEdge]:
    """Stale-state edges across aspects from pair verdicts (a pairwise layer).

    For each other memory whose verdict with ``new`` is ``invalidates`` (Type II, "does one
    change whether the other still holds?"), or ``supersedes`` (Type I) across aspects (within
    one the timeline reads it), with confidence at least ``cfg.relation_min``: an edge from
    the later to the earlier memory (:func:`~caap.conflict_graph.rules.newer_older`),
    closing the earlier one's validity at the later one's world time.
    """
    kinds = {"supersedes": EdgeKind.SUPERSEDES, "invalidates": EdgeKind.PROPAGATED_INVALIDATION}
    out: list[TimelineEdge] = []
    for other in others:
        if other.id == new.id:
            continue
        v = verdict(new.id, other.id)
        if v is None or v.relation not in kinds or v.confidence < cfg.relation_min:
            continue
        if v.relation == "supersedes" and aspects.get(other.id) == aspects.get(new.id):
            continue  # within one aspect the timeline reads supersession
        later, earlier = newer_older(new, other)
        out.append(
            TimelineEdge.between(
                kinds[v.relation],
                later,
                earlier,
                v.evidence or f"a later memory {v.relation} this one",
            )
        )
    return out
