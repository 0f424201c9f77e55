"""Training the ``learned`` relation layer from TANGLE-format data (needs scikit-learn).

Examples come from four kinds of JSONL line, found anywhere under a directory:

- **instances** (:class:`caap.benchmark.dataset.Instance`): their judge-only ``pairs`` label
  memory pairs; an instance without ``pairs`` gets labels derived from its type (its core
  memories pairwise: CPC ``context_partition``, BOC ``temporal_change``, SCC
  ``source_contradiction``, NONE ``agree``); core and distractor memories are ``unrelated``
  (a few per instance). ``high_risk`` labels the query risk model.
- **stale scenarios** (:class:`caap.benchmark.stale.StaleScenario`): user turns by tag: an
  ``old`` turn and an ``update`` are ``supersedes`` (kind ``direct``) or ``invalidates`` (kind
  ``propagated``); two ``old`` turns ``agree``; ``old`` or ``update`` against a
  ``distractor`` is ``unrelated``. Background turns are left out (how they relate is unsaid).
- **labelled pairs**: ``{"a": TEXT, "b": TEXT, "relation": RELATION, "persona": ID}`` (the
  ``pairs/`` part of the blind corpus; what the pair reader is trained on).
- **risk items**: ``{"query": TEXT, "memories": [TEXT, ...], "high_risk": BOOL, "persona":
  {"id": ID, ...}}`` (the ``risk/`` part of the blind corpus): a question and what is
  remembered beside it, labelled by what is at stake; they train the risk model only.

Models: multinomial logistic regression on standardised features
(:mod:`caap.conflict_graph._relations_features`, among them the pair reader's probabilities:
:mod:`caap.conflict_graph._pair_reader`, trained beforehand on other pairs with ``caap
relations train-reader``) for the pair relations, binary logistic
regression for high risk. Regularisation is chosen on the dev data (macro F1 / log loss), the
risk thresholds on dev so that nearly every high-risk dev query is caught. Weights are written
as ``.npz`` with a JSON card (data checksum, seed, metrics) next to it.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from caap._argtypes import positive, positive_float
from caap._embeddings import Embedder, get_embedder
from caap.conflict_graph._pair_reader import PairReader, default_reader_path, train_pair_reader
from caap.conflict_graph._relations_features import (
    FACET_CLASSES,
    N_PAIR_TAIL,
    SITUATION_K,
    SITUATIONS,
    nested_values_read,
    pair_features,
    pair_surface,
    risk_features,
    situation_features,
    text_features,
)
from caap.conflict_graph.relations import CONFLICT_RELATIONS, RELATIONS, RelationLayer

__all__ = [
    "Corpus",
    "add_relations_parser",
    "evaluate_pairs",
    "labelled_pairs",
    "load_corpus",
    "score_pair_readings",
    "train_reader",
    "train_relations",
]

#: The facet a core memory of an instance of each type shows (the facet model's labels).
_FACET_OF = {
    "CPC": "conditional",
    "BOC": "time_ordered",
    "SCC": "attributed",
    "NONE": "plain",
}
_DERIVED = {
    "CPC": "context_partition",
    "BOC": "temporal_change",
    "SCC": "source_contradiction",
    "NONE": "agree",
}


@dataclass
class PairExample:
    a: str
    b: str
    relation: str
    group: str
    """Persona id (dev splits never share one with train)."""
    derived: bool


@dataclass
class RiskExample:
    query: str
    texts: list[str]
    high: bool
    group: str


@dataclass
class MemoryExample:
    text: str
    facet: str
    """One of FACET_CLASSES, from the instance's type (core) or role (distractor)."""
    group: str


@dataclass
class SituationExample:
    query: str
    texts: list[str]
    """Every memory of the instance, distractors included (what a policy is shown)."""
    situation: str
    """The instance's type, one of SITUATIONS."""
    group: str


@dataclass
class Corpus:
    """Examples read from a directory, and the SHA-256 of the files they came from."""

    pairs: list[PairExample] = field(default_factory=list)
    risks: list[RiskExample] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    memories: list[MemoryExample] = field(default_factory=list)
    situations: list[SituationExample] = field(default_factory=list)

    @property
    def checksum(self) -> str:
        """One SHA-256 over the files' names and hashes."""
        h = hashlib.sha256()
        for name, digest in sorted(self.files.items()):
            h.update(f"{name}\0{digest}\n".encode())
        return h.hexdigest()


def load_corpus(path: str | Path, *, seed: int = 0) -> Corpus:
    """Read every ``.jsonl`` under ``path`` (a file or a directory, recursively).

    Raises:
        ValueError: no JSONL file, or a line that is neither an instance nor a scenario.
    """
    from caap.benchmark.dataset import Instance
    from caap.benchmark.stale import StaleScenario

    root = Path(path)
    files = sorted(root.rglob("*.jsonl")) if root.is_dir() else [root]
    if not files or not all(f.is_file() for f in files):
        raise ValueError(f"--data {root}: no .jsonl files found")
    rng = random.Random(seed)
    corpus = Corpus()
    for f in files:
        raw = f.read_bytes()
        corpus.files[str(f.relative_to(root) if root.is_dir() else f.name)] = hashlib.sha256(
            raw
        ).hexdigest()
        for n, line in enumerate(raw.decode("utf-8").splitlines(), 1):
            if not line.strip():
                continue
            data = json.loads(line)
            if "probes" in data:
                _scenario_pairs(StaleScenario.model_validate(data), corpus)
            elif _is_risk_item(data):
                corpus.risks.append(_risk_item(data, f"{f}:{n}"))
            elif "memories" in data:
                _instance_examples(Instance.model_validate(data), corpus, rng)
            elif {"a", "b", "relation"} <= set(data):
                if data["relation"] not in RELATIONS:
                    raise ValueError(f"{f}:{n}: unknown relation {data['relation']!r}")
                group = str(data.get("persona") or data.get("group") or f.stem)
                corpus.pairs.append(
                    PairExample(str(data["a"]), str(data["b"]), data["relation"], group, False)
                )
            else:
                raise ValueError(
                    f"{f}:{n}: neither an instance, a stale scenario, a labelled pair nor a "
                    "risk item"
                )
    return corpus


def _is_risk_item(data: dict[str, Any]) -> bool:
    """A risk item's memories are plain texts (an instance's are objects with ids and roles)."""
    memories = data.get("memories")
    return (
        "high_risk" in data
        and "conflict_type" not in data
        and isinstance(memories, list)
        and all(isinstance(m, str) for m in memories)
    )


def _risk_item(data: dict[str, Any], where: str) -> RiskExample:
    """One risk item as the risk model's example: the question read beside its memories."""
    query, high = data.get("query"), data.get("high_risk")
    if not isinstance(query, str) or not query.strip():
        raise ValueError(f"{where}: a risk item needs a non-empty query")
    if not isinstance(high, bool):
        raise ValueError(f"{where}: high_risk must be true or false, not {high!r}")
    persona = data.get("persona")
    group = persona.get("id") if isinstance(persona, dict) else persona
    if not isinstance(group, str) or not group:
        raise ValueError(f"{where}: a risk item needs a persona id (dev splits are by persona)")
    return RiskExample(query, [m for m in data["memories"] if m.strip()], high, group)


def _instance_examples(inst: Any, corpus: Corpus, rng: random.Random) -> None:
    text = {m.id: m.text for m in inst.memories}
    group = inst.persona.id
    core = inst.core_ids
    labelled = {frozenset((p.a, p.b)) for p in inst.pairs}
    for p in inst.pairs:
        corpus.pairs.append(PairExample(text[p.a], text[p.b], p.relation, group, False))
    if not inst.pairs:
        rel = _DERIVED[inst.conflict_type]
        for i, a in enumerate(core):
            for b in core[i + 1 :]:
                corpus.pairs.append(PairExample(text[a], text[b], rel, group, True))
    if not any(p.relation == "unrelated" for p in inst.pairs):
        far = [(a, d.id) for a in core for d in inst.by_role("distractor")]
        far = [p for p in far if frozenset(p) not in labelled]
        for a, b in rng.sample(far, min(len(far), max(2, len(core)))):
            corpus.pairs.append(PairExample(text[a], text[b], "unrelated", group, True))
    for m in inst.memories:
        if m.role == "core":
            corpus.memories.append(MemoryExample(m.text, _FACET_OF[inst.conflict_type], group))
        elif m.role == "distractor":
            corpus.memories.append(MemoryExample(m.text, "off_topic", group))
    corpus.situations.append(
        SituationExample(inst.query, [m.text for m in inst.memories], inst.conflict_type, group)
    )
    # The same situation as an agent holds it: the user's own turns of the conversations.
    said = [t.content for s in inst.sessions for t in s.turns if t.role == "user"]
    if said:
        corpus.situations.append(SituationExample(inst.query, said, inst.conflict_type, group))
    # What a policy is shown: every memory; the risk model reads the ones nearest the query.
    shown = [m.text for m in inst.memories]
    corpus.risks.append(RiskExample(inst.query, shown, inst.high_risk, group))
    # The graph asks the risk of a cluster without a query: learn that reading too.
    corpus.risks.append(RiskExample("", [text[i] for i in core], inst.high_risk, group))


def _scenario_pairs(sc: Any, corpus: Corpus) -> None:
    by_tag: dict[str, list[str]] = {}
    for s in sc.sessions:
        for t in s.turns:
            if t.role == "user" and t.tag:
                by_tag.setdefault(t.tag, []).append(t.content)
    rel = "supersedes" if sc.kind == "direct" else "invalidates"
    group = sc.persona.id
    # Every probe reads a situation where a later state replaces or rules out an earlier one.
    said = [t.content for s in sc.sessions for t in s.turns if t.role == "user"]
    for probe in sc.probes:
        corpus.situations.append(SituationExample(probe.query, said, "STALE", group))
    old, upd, dis = by_tag.get("old", []), by_tag.get("update", []), by_tag.get("distractor", [])
    for o in old:
        for u in upd:
            corpus.pairs.append(PairExample(o, u, rel, group, True))
    for i, a in enumerate(old):
        for b in old[i + 1 :]:
            corpus.pairs.append(PairExample(a, b, "agree", group, True))
    for a in old + upd:
        for d in dis:
            corpus.pairs.append(PairExample(a, d, "unrelated", group, True))


def _embed(embedder: Embedder, texts: Iterable[str]) -> dict[str, npt.NDArray[np.float32]]:
    uniq = sorted(set(texts))
    vecs = embedder.encode(uniq) if uniq else np.zeros((0, embedder.dimension), np.float32)
    return dict(zip(uniq, vecs, strict=True))


def _pair_matrix(
    ex: Sequence[PairExample],
    vec: dict[str, npt.NDArray[np.float32]],
    facet: dict[str, npt.NDArray[np.float32]],
    reader: PairReader,
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
    va = np.stack([vec[e.a] for e in ex])
    vb = np.stack([vec[e.b] for e in ex])
    fa = np.stack([facet[e.a] for e in ex])
    fb = np.stack([facet[e.b] for e in ex])
    read = reader.probabilities([(e.a, e.b) for e in ex])
    x = pair_features(va, vb, [e.a for e in ex], [e.b for e in ex], fa, fb, read)
    y = np.array([RELATIONS.index(e.relation) for e in ex], dtype=np.int64)
    return x, y


def _risk_matrix(
    ex: Sequence[RiskExample], vec: dict[str, npt.NDArray[np.float32]], dim: int
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
    zero = np.zeros(dim, dtype=np.float32)
    rows = []
    for e in ex:
        q = vec[e.query] if e.query else zero
        mats = np.stack([vec[t] for t in e.texts]) if e.texts else np.zeros((0, dim), np.float32)
        rows.append(risk_features(q, mats))
    return np.stack(rows), np.array([int(e.high) for e in ex], dtype=np.int64)


def _split_by_group(corpus: Corpus, seed: int, share: float = 0.25) -> tuple[Corpus, Corpus]:
    groups = sorted({e.group for e in corpus.pairs} | {e.group for e in corpus.risks})
    rng = random.Random(seed)
    rng.shuffle(groups)
    dev = set(groups[: max(1, int(len(groups) * share))])
    a = Corpus(
        [e for e in corpus.pairs if e.group not in dev],
        [e for e in corpus.risks if e.group not in dev],
        corpus.files,
        [e for e in corpus.memories if e.group not in dev],
        [e for e in corpus.situations if e.group not in dev],
    )
    b = Corpus(
        [e for e in corpus.pairs if e.group in dev],
        [e for e in corpus.risks if e.group in dev],
        {},
        [e for e in corpus.memories if e.group in dev],
        [e for e in corpus.situations if e.group in dev],
    )
    return a, b


def _dense_weights(
    model: Any, n_features: int, n_classes: int
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """A fitted multinomial model's weights over every class, in class-index order: a class
    absent from training gets a bias of -30 (probability ~0)."""
    w = np.zeros((n_features, n_classes), dtype=np.float32)
    b = np.full(n_classes, -30.0, dtype=np.float32)
    for k, cls in enumerate(model.classes_):
        w[:, cls] = model.coef_[k]
        b[cls] = model.intercept_[k]
    return w, b


def _standardise(
    x: npt.NDArray[np.float32],
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    mu = x.mean(axis=0)
    sd = x.std(axis=0)
    sd[sd < 1e-6] = 1.0
    return mu.astype(np.float32), sd.astype(np.float32)


def _load_all(paths: Sequence[str | Path], seed: int) -> Corpus:
    """One corpus from several paths (file names keyed by their path, for the checksum)."""
    if len(paths) == 1:
        return load_corpus(paths[0], seed=seed)
    out = Corpus()
    for p in paths:
        c = load_corpus(p, seed=seed)
        out.pairs += c.pairs
        out.risks += c.risks
        out.memories += c.memories
        out.situations += c.situations
        out.files.update({f"{p}/{name}": digest for name, digest in c.files.items()})
    return out


def train_relations(
    data: str | Path | Sequence[str | Path],
    out: str | Path,
    *,
    dev: str | Path | Sequence[str | Path] | None = None,
    seed: int = 0,
    embedder: Embedder | None = None,
    recall: float = 1.0,
    surface_scales: Sequence[float] = (1.0, 3.0, 10.0),
    reader: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Fit the pair and risk models on ``data`` (one path or several), choose settings on
    ``dev`` (one path or several; default: a quarter of ``data``'s personas held out), write
    ``out`` (``.npz``) and ``out`` with ``.json`` (the card). Returns the card.

    ``recall``: the share of high-risk dev queries the HIGH threshold must catch.
    ``surface_scales``: how much more weight the pair model may give the direct comparisons
    (the pair reader's probabilities and the surface signals) than an embedding column (the
    best on dev is kept).
    ``reader``: the pair reader's weights (default: the shipped one). It should have been
    trained on pairs other than ``data``'s, or the pair model learns to trust readings of
    text the reader has already seen.
    ``progress``: called with a line at each stage (embedding, each model fitted, each fold of
    the situation model), since a run takes minutes.
    """
    say = progress or (lambda _msg: None)
    try:
        from sklearn.linear_model import LogisticRegression
        from sklearn.metrics import f1_score, log_loss
    except ImportError as exc:  # pragma: no cover - sklearn ships with sentence-transformers
        raise ImportError("training needs scikit-learn: pip install scikit-learn") from exc
    np.random.seed(seed)
    embedder = embedder or get_embedder()
    reader_path = Path(reader) if reader is not None else default_reader_path()
    pair_reader = PairReader(reader_path)
    paths = [data] if isinstance(data, (str, Path)) else list(data)
    if not paths:
        raise ValueError("no training data given")
    train = _load_all(paths, seed)
    if dev is None:
        train, held = _split_by_group(train, seed)
        names = ", ".join(Path(p).name for p in paths)
        dev_name = f"{names} (a quarter of its personas, seed {seed})"
    else:
        devs = [dev] if isinstance(dev, (str, Path)) else list(dev)
        held = _load_all(devs, seed)
        dev_name = ", ".join(str(d) for d in devs)
    if not train.pairs or not held.pairs:
        raise ValueError("training and dev data both need memory pairs")
    say(
        f"data: {len(train.pairs)} training pairs, {len(train.situations)} training queries; "
        f"dev: {len(held.pairs)} pairs, {len(held.situations)} queries"
    )
    texts = [t for c in (train, held) for e in c.pairs for t in (e.a, e.b)]
    texts += [e.text for c in (train, held) for e in c.memories]
    texts += [t for c in (train, held) for e in c.situations for t in (e.query, *e.texts)]
    risk_only = {t for c in (train, held) for e in c.risks for t in (e.query, *e.texts) if t}
    risk_only -= set(texts)
    say(f"embedding {len(set(texts)) + len(risk_only)} texts")
    vec = _embed(embedder, texts)
    # Texts only the risk model reads are embedded on their own: the batches the other models'
    # texts are embedded in stay the same, so adding risk items changes the risk model alone
    # (a batch's padding moves embeddings in the last digits, and the fits with them).
    vec.update(_embed(embedder, risk_only))
    dim = embedder.dimension

    grid = [0.001, 0.003, 0.01, 0.03, 0.1, 0.3]
    # -- facet model (per memory) --------------------------------------------------------
    if not train.memories:
        raise ValueError("training data needs instances (the facet model learns from them)")

    def mem_x(texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return text_features(np.stack([vec[t] for t in texts]), list(texts))

    mt = mem_x([e.text for e in train.memories])
    my = np.array([FACET_CLASSES.index(e.facet) for e in train.memories], dtype=np.int64)
    fmu, fsd = _standardise(mt)
    md = mem_x([e.text for e in held.memories]) if held.memories else None
    myd = np.array([FACET_CLASSES.index(e.facet) for e in held.memories], dtype=np.int64)
    fbest: tuple[float, float] | None = None
    for c in grid:
        m = LogisticRegression(C=c, max_iter=3000, class_weight="balanced", random_state=seed)
        m.fit((mt - fmu) / fsd, my)
        if md is None:
            fbest = (0.0, 0.01)
            break
        f1 = float(f1_score(myd, m.predict((md - fmu) / fsd), average="macro"))
        if fbest is None or f1 > fbest[0]:
            fbest = (f1, c)
    assert fbest is not None
    facet_f1, facet_c = fbest

    def fit_facets(rows: npt.NDArray[np.bool_]) -> Any:
        m = LogisticRegression(C=facet_c, max_iter=3000, class_weight="balanced", random_state=seed)
        return m.fit((mt[rows] - fmu) / fsd, my[rows])

    def facet_probs(model: Any, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        p = np.zeros((len(texts), len(FACET_CLASSES)), dtype=np.float32)
        p[:, model.classes_] = model.predict_proba((mem_x(texts) - fmu) / fsd)
        return p

    facet_model = fit_facets(np.ones(len(my), dtype=bool))
    say(f"facet model: dev macro F1 {facet_f1:.3f} (C={facet_c})")
    # Out-of-fold facet probabilities for the training pairs (folds by persona), so the pair
    # model learns from facet readings as noisy as the ones it will see.
    groups = sorted({e.group for e in train.memories} | {e.group for e in train.pairs})
    fold_of = {g: k % 5 for k, g in enumerate(random.Random(seed).sample(groups, len(groups)))}
    mem_fold = np.array([fold_of[e.group] for e in train.memories])
    facet: dict[str, npt.NDArray[np.float32]] = {}
    for k in range(5):
        texts_k = sorted({t for e in train.pairs if fold_of[e.group] == k for t in (e.a, e.b)})
        if texts_k:
            model_k = fit_facets(mem_fold != k)
            facet.update(zip(texts_k, facet_probs(model_k, texts_k), strict=True))
    dev_texts = sorted({t for e in held.pairs for t in (e.a, e.b)} - set(facet))
    if dev_texts:
        facet.update(zip(dev_texts, facet_probs(facet_model, dev_texts), strict=True))
    facet_w, facet_b = _dense_weights(facet_model, mt.shape[1], len(FACET_CLASSES))

    # -- pair model ----------------------------------------------------------------------
    say(f"pair model: the pair reader reads {len(train.pairs) + len(held.pairs)} pairs")
    xt, yt = _pair_matrix(train.pairs, vec, facet, pair_reader)
    xd, yd = _pair_matrix(held.pairs, vec, facet, pair_reader)
    mu, sd0 = _standardise(xt)
    # The few surface comparisons (pair_surface, the last columns) compete with hundreds of
    # embedding columns under one L2 penalty; scaling them up after standardising lets the
    # model lean on them more (chosen on dev; 1: no scaling). The scale lives in pair_sd.
    best: tuple[float, float, Any, float] | None = None
    for scale in surface_scales:
        sd_s = sd0.copy()
        sd_s[-N_PAIR_TAIL:] /= scale
        for c in grid:
            m = LogisticRegression(C=c, max_iter=3000, class_weight="balanced", random_state=seed)
            m.fit((xt - mu) / sd_s, yt)
            f1 = float(f1_score(yd, m.predict((xd - mu) / sd_s), average="macro"))
            if best is None or f1 > best[0]:
                best = (f1, c, m, scale)
    assert best is not None
    pair_f1, pair_c, pair_model, surface_scale = best
    sd = sd0.copy()
    sd[-N_PAIR_TAIL:] /= surface_scale
    pred = pair_model.predict((xd - mu) / sd)
    w, b = _dense_weights(pair_model, xt.shape[1], len(RELATIONS))
    say(f"pair model: dev macro F1 {pair_f1:.3f} (C={pair_c}, surface scale {surface_scale:g})")
    per_relation = {
        r: {
            "dev_support": int((yd == i).sum()),
            "dev_recall": float(((pred == i) & (yd == i)).sum() / max((yd == i).sum(), 1)),
            "train_support": int((yt == i).sum()),
        }
        for i, r in enumerate(RELATIONS)
    }

    # -- risk model ----------------------------------------------------------------------
    rt, ryt = _risk_matrix(train.risks, vec, dim)
    rd, ryd = _risk_matrix(held.risks, vec, dim)
    rmu, rsd = _standardise(rt)
    rbest: tuple[float, float, Any] | None = None
    for c in grid:
        m = LogisticRegression(C=c, max_iter=3000, class_weight="balanced", random_state=seed)
        m.fit((rt - rmu) / rsd, ryt)
        loss = float(log_loss(ryd, m.predict_proba((rd - rmu) / rsd)[:, 1], labels=[0, 1]))
        if rbest is None or loss < rbest[0]:
            rbest = (loss, c, m)
    assert rbest is not None
    risk_loss, risk_c, risk_model = rbest
    pd_all = risk_model.predict_proba((rd - rmu) / rsd)[:, 1]
    with_query = np.array([bool(e.query) for e in held.risks])

    def threshold(rows: npt.NDArray[np.bool_]) -> tuple[float, float, float]:
        """The highest threshold (at most 0.5) that still catches ``recall`` of the high-risk
        dev examples among ``rows``; the share caught and the low-risk share flagged."""
        p, y = pd_all[rows], ryd[rows]
        pos = np.sort(p[y == 1])
        high = float(pos[int(np.floor((1 - recall) * len(pos)))]) if len(pos) else 0.5
        # A hair below the weakest caught example, so inference in float32 still catches it.
        high = min(high - 1e-4, 0.5)
        caught = float((p[y == 1] >= high).mean()) if len(pos) else float("nan")
        false_high = float((p[y == 0] >= high).mean()) if (y == 0).any() else float("nan")
        return high, caught, false_high

    # A query's reading and a cluster's reading (no query) see different inputs, so each gets
    # its own threshold: the harder cluster readings must not lower the bar for queries.
    high, caught, false_high = threshold(with_query)
    high_cluster, caught_cluster, false_high_cluster = threshold(~with_query)
    say(f"risk model: dev log loss {risk_loss:.3f} (C={risk_c}), HIGH threshold {high:.3f}")

    # -- situation model (per query over its nearest memories) ---------------------------
    # Trained on out-of-fold facet and pair readings (folds by persona), so it learns how
    # far to trust readings as noisy as the ones it will get on text the models never saw.
    def pair_probs_with(
        model: Any, mu_: npt.NDArray[np.float32], sd_: npt.NDArray[np.float32], fmodel: Any
    ) -> Any:
        def probs(pairs: Sequence[tuple[str, str]]) -> npt.NDArray[np.float32]:
            p = np.zeros((len(pairs), len(RELATIONS)), dtype=np.float32)
            if not pairs:
                return p
            ta, tb = [a for a, _ in pairs], [b for _, b in pairs]
            x = pair_features(
                np.stack([vec[t] for t in ta]),
                np.stack([vec[t] for t in tb]),
                ta,
                tb,
                facet_probs(fmodel, ta),
                facet_probs(fmodel, tb),
                pair_reader.probabilities(list(pairs)),
            )
            p[:, model.classes_] = model.predict_proba((x - mu_) / sd_)
            # As the layer reads them (LearnedRelations.situation).
            return nested_values_read(p, pairs)

        return probs

    def situation_x(ex: Sequence[SituationExample], fmodel: Any, pprobs: Any) -> Any:
        rows = []
        for e in ex:
            texts = list(dict.fromkeys(e.texts))
            mat = np.stack([vec[t] for t in texts])
            sims = mat @ vec[e.query]
            order = np.argsort(-sims, kind="stable")[:SITUATION_K]
            top = [texts[int(j)] for j in order]
            pairs = [(top[a], top[b]) for a in range(len(top)) for b in range(a + 1, len(top))]
            surface = (
                np.hstack(
                    [
                        pair_reader.probabilities(pairs),
                        pair_surface(
                            np.stack([vec[a] for a, _ in pairs]),
                            np.stack([vec[b] for _, b in pairs]),
                            [a for a, _ in pairs],
                            [b for _, b in pairs],
                        ),
                    ]
                )
                if pairs
                else None
            )
            rows.append(
                situation_features(
                    sims[order], pprobs(pairs), facet_probs(fmodel, top), RELATIONS, surface
                )
            )
        return np.stack(rows) if rows else np.zeros((0, 1), dtype=np.float32)

    sit_best: tuple[float, float, Any] | None = None
    situation_card: dict[str, Any] = {"trained": False}
    sit_arrays: dict[str, Any] = {}
    if train.situations and held.situations:
        pair_fold = np.array([fold_of.get(e.group, -1) for e in train.pairs])
        sx_parts, sy_parts = [], []
        for k in range(5):
            fold_ex = [e for e in train.situations if fold_of.get(e.group) == k]
            if not fold_ex:
                continue
            say(f"situation model: out-of-fold readings, fold {k + 1}/5")
            fm_k = fit_facets(mem_fold != k)
            pm_k = LogisticRegression(
                C=pair_c, max_iter=3000, class_weight="balanced", random_state=seed
            ).fit((xt[pair_fold != k] - mu) / sd, yt[pair_fold != k])
            sx_parts.append(situation_x(fold_ex, fm_k, pair_probs_with(pm_k, mu, sd, fm_k)))
            sy_parts += [SITUATIONS.index(e.situation) for e in fold_ex]
        sx, sy = np.vstack(sx_parts), np.array(sy_parts, dtype=np.int64)
        sxd = situation_x(
            held.situations, facet_model, pair_probs_with(pair_model, mu, sd, facet_model)
        )
        syd = np.array([SITUATIONS.index(e.situation) for e in held.situations], dtype=np.int64)
        smu, ssd = _standardise(sx)
        for c in [*grid, 1.0]:
            m = LogisticRegression(
                C=c, max_iter=3000, class_weight="balanced", random_state=seed
            ).fit((sx - smu) / ssd, sy)
            pdv = np.zeros((len(syd), len(SITUATIONS)))
            pdv[:, m.classes_] = m.predict_proba((sxd - smu) / ssd)
            pdv /= pdv.sum(axis=1, keepdims=True)
            loss = float(log_loss(syd, pdv, labels=list(range(len(SITUATIONS)))))
            if sit_best is None or loss < sit_best[0]:
                sit_best = (loss, c, m)
        assert sit_best is not None
        sit_loss, sit_c, sit_model = sit_best
        spred = sit_model.predict((sxd - smu) / ssd)
        say(
            f"situation model: dev accuracy {float((spred == syd).mean()):.3f}, "
            f"log loss {sit_loss:.3f} (C={sit_c})"
        )
        sit_w, sit_b = _dense_weights(sit_model, sx.shape[1], len(SITUATIONS))
        sit_arrays = {"sit_w": sit_w, "sit_b": sit_b, "sit_mu": smu, "sit_sd": ssd}
        situation_card = {
            "trained": True,
            "kind": "multinomial logistic regression over out-of-fold pair and facet readings "
            f"of the {SITUATION_K} memories nearest the query",
            "classes": list(SITUATIONS),
            "C": sit_c,
            "train_queries": len(sy),
            "dev_queries": len(syd),
            "dev_log_loss": sit_loss,
            "dev_accuracy": float((spred == syd).mean()),
            "dev_recall": {
                s: float(((spred == i) & (syd == i)).sum() / max((syd == i).sum(), 1))
                for i, s in enumerate(SITUATIONS)
            },
        }

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        out,
        pair_w=w,
        pair_b=b,
        pair_mu=mu,
        pair_sd=sd,
        risk_w=risk_model.coef_[0].astype(np.float32),
        risk_b=np.float32(risk_model.intercept_[0]),
        risk_mu=rmu,
        risk_sd=rsd,
        risk_high=np.float32(high),
        risk_medium=np.float32(high / 2),
        risk_high_cluster=np.float32(high_cluster),
        risk_medium_cluster=np.float32(high_cluster / 2),
        facet_w=facet_w,
        facet_b=facet_b,
        facet_mu=fmu,
        facet_sd=fsd,
        **sit_arrays,
    )
    card: dict[str, Any] = {
        "format": 1,
        "relations": list(RELATIONS),
        "embedder": embedder.model_name,
        "seed": seed,
        "train_data": str(paths[0]) if len(paths) == 1 else [str(p) for p in paths],
        "train_sha256": train.checksum,
        "train_files": train.files,
        "dev_data": dev_name,
        "dev_sha256": held.checksum if held.files else None,
        "pair_reader": {
            "file": os.path.relpath(reader_path.resolve(), out.resolve().parent),
            "sha256": hashlib.sha256(reader_path.read_bytes()).hexdigest(),
            "dev_macro_f1": pair_reader.card.get("dev_macro_f1"),
        },
        "pair_model": {
            "kind": "multinomial logistic regression, balanced classes",
            "C": pair_c,
            "surface_scale": surface_scale,
            "train_pairs": len(train.pairs),
            "train_derived_pairs": sum(e.derived for e in train.pairs),
            "dev_pairs": len(held.pairs),
            "dev_macro_f1": pair_f1,
            "dev_accuracy": float((pred == yd).mean()),
            "per_relation": per_relation,
        },
        "facet_model": {
            "kind": "multinomial logistic regression over one memory, balanced",
            "classes": list(FACET_CLASSES),
            "labels": "core memories by their instance's type, distractors off_topic",
            "C": facet_c,
            "train_memories": len(train.memories),
            "dev_memories": len(held.memories),
            "dev_macro_f1": facet_f1,
        },
        "situation_model": situation_card,
        "risk_model": {
            "kind": "logistic regression (query and nearest memory embedding), balanced",
            "C": risk_c,
            "train_examples": len(train.risks),
            "dev_examples": len(held.risks),
            "dev_log_loss": risk_loss,
            "high_threshold": high,
            "medium_threshold": high / 2,
            "dev_high_recall": caught,
            "dev_false_high_rate": false_high,
            "cluster_high_threshold": high_cluster,
            "cluster_dev_high_recall": caught_cluster,
            "cluster_dev_false_high_rate": false_high_cluster,
        },
    }
    out.with_suffix(".json").write_text(json.dumps(card, indent=2, sort_keys=True) + "\n")
    return card


def _to_stderr(msg: str) -> None:
    """The commands' progress lines: on stderr, so stdout stays the result."""
    print(msg, file=sys.stderr, flush=True)


def calibrate_situations(
    data: str | Path | Sequence[str | Path],
    weights: str | Path,
    *,
    shift: Sequence[str] = ("SCC",),
    embedder: Embedder | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Fit a prior shift of the situation reading on ``data`` and write it into ``weights``.

    The situation model is fitted on text the pair reader was trained on, so on text neither
    has seen its readings lean (it reads agreeing sources as disagreeing more often than they
    do). The shift multiplies the probability of each situation in ``shift`` by one weight
    (the others keep theirs) and renormalises; the weights are chosen by maximum likelihood
    of the situations of ``data`` (TANGLE instances and stale scenarios, as for training; use
    data the reader and the models never trained on). Only the named situations move:
    situations that ``data`` lacks (a corpus of instances has no stale-state labels) would be
    pushed towards zero. The unshifted reading stays what the high-stakes guard reads
    (:attr:`~caap.conflict_graph.relations.SituationVerdict.unshifted`).

    Writes the shift into ``weights`` (array ``sit_prior``, log weights over
    :data:`SITUATIONS`) and its card (``situation_prior``), and returns that card entry.
    """
    from scipy.optimize import minimize

    from caap.conflict_graph._relations_learned import LearnedRelations

    say = progress or (lambda _msg: None)
    shift = list(dict.fromkeys(shift))
    unknown = sorted(set(shift) - set(SITUATIONS))
    if unknown or not shift:
        raise ValueError(f"shift names unknown situations {unknown}; choose from {SITUATIONS}")
    paths = [data] if isinstance(data, (str, Path)) else list(data)
    corpus = _load_all(paths, 0)
    examples = [e for e in corpus.situations if e.query.strip() and e.texts]
    if not examples:
        raise ValueError("calibration data holds no queries with memories")
    weights = Path(weights)
    layer = LearnedRelations(weights=weights, embedder=embedder)
    if not layer.reads_situations:
        raise ValueError(f"weights {weights} have no situation model to calibrate")
    say(f"reading {len(examples)} situations")
    rows = []
    for k, e in enumerate(examples):
        verdict = layer.situation(e.query, e.texts)
        assert verdict is not None
        rows.append([verdict.evidence_probs[s] for s in SITUATIONS])
        if progress is not None and (k + 1) % 50 == 0:
            say(f"read {k + 1}/{len(examples)}")
    logp = np.log(np.asarray(rows, dtype=np.float64) + 1e-6)
    y = np.array([SITUATIONS.index(e.situation) for e in examples])
    moved = [SITUATIONS.index(s) for s in shift]

    def loss(z: npt.NDArray[np.float64]) -> float:
        lw = np.zeros(len(SITUATIONS))
        lw[moved] = z
        q = logp + lw
        q = q - np.logaddexp.reduce(q, axis=1, keepdims=True)
        return float(-q[np.arange(len(y)), y].mean())

    fit = minimize(
        loss,
        np.zeros(len(moved)),
        method="Nelder-Mead",
        options={"maxiter": 4000, "xatol": 1e-5, "fatol": 1e-9},
    )
    prior = np.zeros(len(SITUATIONS), dtype=np.float32)
    prior[moved] = fit.x
    with np.load(weights) as z:
        arrays: dict[str, Any] = {k: np.asarray(z[k]) for k in z.files if k != "sit_prior"}
    arrays["sit_prior"] = prior
    np.savez_compressed(weights, **arrays)
    entry: dict[str, Any] = {
        "kind": "prior shift of the situation reading, fitted by maximum likelihood",
        "weights": {s: float(np.exp(prior[SITUATIONS.index(s)])) for s in shift},
        "data": [str(p) for p in paths],
        "data_sha256": corpus.checksum,
        "queries": len(examples),
        "log_loss_before": loss(np.zeros(len(moved))),
        "log_loss_after": float(fit.fun),
    }
    card_path = weights.with_suffix(".json")
    card = json.loads(card_path.read_text()) if card_path.exists() else {}
    card["situation_prior"] = entry
    card_path.write_text(json.dumps(card, indent=2, sort_keys=True) + "\n")
    say(
        "shift: "
        + ", ".join(f"{s} x {w:.3f}" for s, w in entry["weights"].items())
        + f" (log loss {entry['log_loss_before']:.3f} -> {entry['log_loss_after']:.3f})"
    )
    return entry


def _cmd_calibrate(args: Any) -> int:
    entry = calibrate_situations(
        args.data,
        args.weights,
        shift=args.shift or ("SCC",),
        progress=_to_stderr,
    )
    shifts = ", ".join(f"{s} x {w:.3f}" for s, w in entry["weights"].items())
    print(
        f"wrote the situation prior into {args.weights}: {shifts} over {entry['queries']} "
        f"queries, log loss {entry['log_loss_before']:.3f} -> {entry['log_loss_after']:.3f}"
    )
    return 0


def _cmd_train(args: Any) -> int:
    card = train_relations(
        args.data,
        args.out,
        dev=args.dev,
        seed=args.seed,
        reader=args.reader,
        progress=_to_stderr,
    )
    pm, rm, sm = card["pair_model"], card["risk_model"], card["situation_model"]
    print(
        f"wrote {args.out} and {Path(args.out).with_suffix('.json')}: pair model dev macro F1 "
        f"{pm['dev_macro_f1']:.3f} ({pm['dev_pairs']} pairs), facet model dev macro F1 "
        f"{card['facet_model']['dev_macro_f1']:.3f}, risk HIGH threshold "
        f"{rm['high_threshold']:.3f} (dev recall {rm['dev_high_recall']:.2f})"
        + (f", situation model dev accuracy {sm['dev_accuracy']:.2f}" if sm.get("trained") else "")
    )
    print(f"use it with: Agent(relations=LearnedRelations(weights={str(args.out)!r}))")
    return 0


def train_reader(
    data: str | Path | Sequence[str | Path],
    out: str | Path,
    *,
    dev: str | Path | None = None,
    epochs: int = 4,
    lr: float = 1e-3,
    seed: int = 0,
    progress: Any = None,
    device: str = "cpu",
) -> dict[str, Any]:
    """Fit the pair reader on every labelled pair under the ``data`` paths (labelled pair
    lines, and the pairs instances and stale scenarios give; see :func:`load_corpus`),
    measured on the pairs of ``dev`` when given; write ``out`` and its card. Training runs on
    ``device`` (``"cpu"`` or a CUDA device, see :func:`train_pair_reader`). Returns the
    card."""
    paths = [data] if isinstance(data, (str, Path)) else list(data)
    corpora = [load_corpus(p, seed=seed) for p in paths]
    train = [(e.a, e.b, e.relation) for c in corpora for e in c.pairs]
    held = [(e.a, e.b, e.relation) for e in load_corpus(dev, seed=seed).pairs] if dev else []
    card = {
        "train_data": [str(p) for p in paths],
        "train_sha256": [c.checksum for c in corpora],
        "train_personas": len({e.group for c in corpora for e in c.pairs}),
        "dev_data": str(dev) if dev else None,
    }
    return train_pair_reader(
        train,
        out,
        dev=held,
        epochs=epochs,
        lr=lr,
        seed=seed,
        card=card,
        progress=progress,
        device=device,
    )


def _cmd_train_reader(args: Any) -> int:
    card = train_reader(
        args.data,
        args.out,
        dev=args.dev,
        epochs=args.epochs,
        lr=args.lr,
        seed=args.seed,
        progress=_to_stderr,
        device=args.device,
    )
    dev = (
        f", dev macro F1 {card['dev_macro_f1']:.3f} ({card['dev_pairs']} pairs)"
        if "dev_macro_f1" in card
        else ""
    )
    print(
        f"wrote {args.out} and {Path(args.out).with_suffix('.json')}: "
        f"{card['train_pairs']} training pairs{dev}"
    )
    print(f"use it with: caap relations train --reader {args.out} ...")
    return 0


def _cmd_train_speaker(args: Any) -> int:
    from caap.conflict_graph._relations_learned import LearnedRelations
    from caap.conflict_graph._speaker import load_speaker_rows, train_speaker_head

    train = [r for path in args.data for r in load_speaker_rows(path)]
    dev = [r for path in args.dev for r in load_speaker_rows(path)]
    layer = LearnedRelations()
    layer.speaker = None  # the reading to do no worse than: the layer without a speaker head
    baseline = [f.source_confidence < 0.5 for f in layer.facets([r["text"] for r in dev])]
    card = train_speaker_head(
        train, dev, layer.embedder.encode, args.out, baseline_dev=baseline, seed=args.seed
    )
    print(
        f"wrote {args.out} and {Path(args.out).with_suffix('.json')}: C={card['C']}, clears at "
        f"{card['threshold']}, dev first-hand cleared {card['dev_first_hand_cleared']}/"
        f"{card['dev_first_hand']} (others wrongly cleared at most "
        f"{card['dev_others_wrongly_cleared_allowed']}, as the layer without it)"
    )
    return 0


def _cmd_train_request(args: Any) -> int:
    from caap._embeddings import get_embedder
    from caap.policy._request_head import load_request_rows, train_request_head

    train = [r for path in args.data for r in load_request_rows(path)]
    dev = [r for path in args.dev for r in load_request_rows(path)]
    card = train_request_head(train, dev, get_embedder().encode, args.out, seed=args.seed)
    card = {**card, "train_data": list(args.data), "dev_data": list(args.dev)}
    Path(args.out).with_suffix(".json").write_text(json.dumps(card, indent=2) + "\n")
    print(
        f"wrote {args.out} and {Path(args.out).with_suffix('.json')}: C={card['C']}, reads "
        f"a turn as only asking at {card['threshold']}, dev asking turns caught "
        f"{card['dev_asks_caught']}/{card['dev_asks']} (stating turns read as stating nothing "
        f"at most {card['dev_states_lost_allowed']}, as the rules alone)"
    )
    return 0


def evaluate_pairs(
    data: str | Path | Sequence[str | Path],
    layer: RelationLayer,
    *,
    embedder: Embedder | None = None,
) -> dict[str, Any]:
    """How ``layer`` reads the labelled pairs under ``data`` (pair lines and the labelled
    pairs of TANGLE instances; pairs a scenario or an instance only implies are left out):
    its verdicts through :meth:`RelationLayer.relate` on the memories as the graph shows them
    (the layer's facets, the value embedded by ``embedder``, default the packaged one), the
    reading the graph types edges from. (``rules`` reads agreement, sources and conditions pair
    by pair, but change and staleness only from a whole aspect's timeline: its pairs never
    say ``temporal_change``, ``supersedes`` or ``invalidates``.)

    Returns ``pairs``, ``accuracy``, ``macro_f1`` (over the relations present), ``recall``
    (per relation: ``[read right, labelled]``) and the two confusions that decide actions:
    ``agree_read_as_conflict`` and ``conflict_read_as_agree``, each ``[count, of]``.

    Raises:
        ValueError: no labelled pair under ``data``.
    """
    from caap.conflict_graph.relations import MemoryView

    paths = [data] if isinstance(data, (str, Path)) else list(data)
    pairs = labelled_pairs(paths)
    if not pairs:
        raise ValueError(f"no labelled pairs under {', '.join(str(p) for p in paths)}")
    # Each text as the graph shows it to a layer: its facets and its value's embedding.
    texts = list(dict.fromkeys(t for e in pairs for t in (e.a, e.b)))
    facets = dict(zip(texts, layer.facets(texts), strict=True))
    encoded = (embedder or get_embedder()).encode([facets[t].value or t for t in texts])
    vectors = dict(zip(texts, encoded, strict=True))

    def view(name: str, text: str) -> MemoryView:
        f = facets[text]
        return MemoryView(
            name, text, f.source, f.context, f.observed_at, facets=f, vector=vectors[text]
        )

    verdicts = layer.relate([(view(f"a{i}", e.a), view(f"b{i}", e.b)) for i, e in enumerate(pairs)])
    return score_pair_readings([e.relation for e in pairs], [v.relation for v in verdicts])


def labelled_pairs(paths: Sequence[str | Path]) -> list[PairExample]:
    """The pairs labelled as such under ``paths`` (pair lines and the labelled pairs of TANGLE
    instances; pairs a scenario or an instance only implies are left out)."""
    return [e for p in paths for e in load_corpus(p).pairs if not e.derived]


def score_pair_readings(gold: Sequence[str], read: Sequence[str]) -> dict[str, Any]:
    """Labelled relations ``gold`` against the relations ``read``: ``pairs``, ``accuracy``,
    ``macro_f1`` (over the relations present), ``recall`` (per relation: ``[read right,
    labelled]``) and the two confusions that decide actions, ``agree_read_as_conflict`` and
    ``conflict_read_as_agree``, each ``[count, of]``."""
    from sklearn.metrics import f1_score

    gold = list(gold)
    both = list(zip(gold, read, strict=True))
    present = [r for r in RELATIONS if r in gold]
    return {
        "pairs": len(both),
        "accuracy": sum(g == r for g, r in both) / len(both),
        "macro_f1": float(f1_score(gold, read, labels=present, average="macro", zero_division=0)),
        "recall": {rel: [sum(g == r == rel for g, r in both), gold.count(rel)] for rel in present},
        "agree_read_as_conflict": [
            sum(g == "agree" and r in CONFLICT_RELATIONS for g, r in both),
            gold.count("agree"),
        ],
        "conflict_read_as_agree": [
            sum(g in CONFLICT_RELATIONS and r == "agree" for g, r in both),
            sum(g in CONFLICT_RELATIONS for g in gold),
        ],
    }


def _cmd_eval(args: Any) -> int:
    from caap.conflict_graph.relations import get_relation_layer

    kwargs = {"weights": args.weights} if args.weights else {}
    if args.weights and args.relations != "learned":
        raise ValueError("--weights is for --relations learned")
    report = evaluate_pairs(args.data, get_relation_layer(args.relations, **kwargs))
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(
        f"{args.relations}: {report['pairs']} labelled pairs, accuracy {report['accuracy']:.2f}, "
        f"macro F1 {report['macro_f1']:.3f}"
    )
    for rel, (right, n) in report["recall"].items():
        print(f"  {rel:<21} {right:>4}/{n:<4} read right")
    a, na = report["agree_read_as_conflict"]
    c, nc = report["conflict_read_as_agree"]
    print(
        f"  agreeing pairs read as a conflict: {a}/{na}; "
        f"conflicting pairs read as agreeing: {c}/{nc}"
    )
    return 0


def _head_arguments(parser: Any, data_help: str) -> None:
    """The arguments every small head's training command takes (the speaker head, the request
    head): its data, its dev data, the weights file and the seed."""
    parser.add_argument("--data", required=True, action="append", help=data_help)
    parser.add_argument(
        "--dev",
        required=True,
        action="append",
        help="JSONL like --data, to choose C and the threshold; repeatable",
    )
    parser.add_argument(
        "--out", required=True, help="weights file to write (.npz; a .json card too)"
    )
    parser.add_argument("--seed", type=int, default=0)


def add_relations_parser(sub: Any) -> None:
    """Add ``caap relations train`` to the ``caap`` command's subparsers."""
    p = sub.add_parser("relations", help="the learned relation layer: train it on your data")
    rsub = p.add_subparsers(dest="relations_command", required=True)
    t = rsub.add_parser(
        "train",
        help="fit the learned relation layer on TANGLE-format JSONL (instances and stale "
        "scenarios) and write its weights",
    )
    t.add_argument(
        "--data",
        required=True,
        action="append",
        help="directory (searched recursively) or file; repeatable (labelled pair lines "
        "train the pair model only)",
    )
    t.add_argument("--out", required=True, help="weights file to write (.npz; a .json card too)")
    t.add_argument(
        "--dev",
        action="append",
        help="dev data for model settings; repeatable (default: a quarter of --data's personas)",
    )
    t.add_argument("--seed", type=int, default=0)
    t.add_argument(
        "--reader",
        help="pair reader weights (.npz from `caap relations train-reader`; default: the "
        "shipped one); train it on other data than --data",
    )
    t.set_defaults(handler=_cmd_train)
    r = rsub.add_parser(
        "train-reader",
        help="fit the pair reader (MiniLM read as a cross-encoder, LoRA adapters) on "
        "labelled memory pairs and write its weights",
    )
    r.add_argument(
        "--data",
        required=True,
        action="append",
        help="directory (searched recursively) or file: labelled pairs (JSONL lines with a, b "
        "and relation), TANGLE instances with pairs, stale scenarios; repeatable",
    )
    r.add_argument("--out", required=True, help="weights file to write (.npz; a .json card too)")
    r.add_argument("--dev", help="TANGLE-format data whose labelled pairs measure it (optional)")
    r.add_argument("--epochs", type=positive, default=4)
    r.add_argument("--lr", type=positive_float, default=1e-3)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument(
        "--device",
        default="cpu",
        help="where to train: cpu (default) or a CUDA device such as cuda or cuda:1; the "
        "weights are read on the CPU either way, and a GPU gives close, not identical, "
        "weights for the same seed",
    )
    r.set_defaults(handler=_cmd_train_reader)
    sp = rsub.add_parser(
        "train-speaker",
        help="fit the speaker head (who a memory's claim comes from: user, person, record, "
        "hearsay) that the guard's first-hand reading uses",
    )
    _head_arguments(sp, "JSONL of memories with text and speaker; repeatable")
    sp.set_defaults(handler=_cmd_train_speaker)
    rq = rsub.add_parser(
        "train-request",
        help="fit the request head (whether a stored turn only asks the assistant, or states "
        "something about the user) that the policy reads beside the sentence-form rules",
    )
    _head_arguments(
        rq,
        "JSONL of turns with text and label (states or asks), or a folder of TANGLE instances "
        "(their memories, as states); repeatable",
    )
    rq.set_defaults(handler=_cmd_train_request)
    c = rsub.add_parser(
        "calibrate",
        help="fit a prior shift of the situation reading on data the models never saw and "
        "write it into the weights",
    )
    c.add_argument(
        "--data",
        required=True,
        action="append",
        help="TANGLE-format instances or stale scenarios (directory or file); repeatable",
    )
    c.add_argument("--weights", required=True, help="weights to calibrate in place (.npz)")
    c.add_argument(
        "--shift",
        action="append",
        choices=list(SITUATIONS),
        help="a situation whose probability the shift may move (repeatable; default SCC)",
    )
    c.set_defaults(handler=_cmd_calibrate)
    e = rsub.add_parser(
        "eval",
        help="measure how a relation layer reads labelled memory pairs (per-relation recall, "
        "macro F1, agreement read as conflict and back)",
    )
    e.add_argument(
        "--data",
        required=True,
        action="append",
        help="labelled pairs (JSONL lines with a, b and relation) or TANGLE instances with "
        "pairs (directory or file); repeatable",
    )
    e.add_argument(
        "--relations",
        default="learned",
        help="the layer to measure: rules, learned or llm (default learned)",
    )
    e.add_argument("--weights", help="learned-layer weights (.npz; default: the shipped ones)")
    e.add_argument("--json", action="store_true", help="print the report as JSON")
    e.set_defaults(handler=_cmd_eval)
