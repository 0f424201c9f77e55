"""Source reliability: per-question x per-source confusion matrices, naive-Bayes fusion.

When named sources disagree on a closed-class question, how far to trust each one depends on
the source *and* on the question (plans are optimistic about plans, self-reports about healthy
habits, device logs drop out). :class:`ReliabilityModel` learns, from labelled outcomes,
``P(source reports v | truth is t)`` for every question and source, fuses the claims of one
case into a posterior over the answer, and answers selectively: it abstains when the margin
between the two most probable answers is below a threshold calibrated on held-out data.

Counts are Dirichlet pseudo-counts, so fitting is just :meth:`ReliabilityModel.observe` called
once per labelled case; the same call is the online update the agent makes when a user
confirms which source was right. A question with few observations borrows from each source's
pooled accuracy over all questions (a hierarchical prior), and the prior spreads a source's
errors over nearby answers on an ordinal scale.

What the model does not see: a case's difficulty or persona; only the claims.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field, model_validator

from caap.conflict_graph._text import normalize_source
from caap.models import Memory

__all__ = [
    "OUTCOME_KEY",
    "AnswerSpace",
    "LabelledCase",
    "Posterior",
    "ReliabilityModel",
    "best_threshold",
    "claim_of",
    "f_beta",
    "source_key",
]

#: Metadata key on a resolution memory holding the labelled source outcome it recorded
#: (``question``, ``claims``, ``truth``), so the outcome can be rebuilt from the memory.
OUTCOME_KEY = "caap_source_outcome"


def source_key(label: str) -> str:
    """The name a source is tracked under across topics: lowercase, without the owner's
    possessive ("Maya's clinic record" -> "clinic record")."""
    return normalize_source(label) or label.strip().lower()


def claim_of(memory: Memory) -> str:
    """A memory's claim as an answer label: its value facet, else its text, normalised."""
    text = (memory.value or memory.text).strip().lower().rstrip(".")
    return " ".join(text.split())


class AnswerSpace(BaseModel):
    """The answers a question admits.

    An empty ``labels`` list makes the space *open*: answers are added as they are seen (the
    agent's aspects, whose values are free text). A closed space rejects an unknown truth and
    ignores an unknown claim (it is reported, not counted).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, description="Question (or aspect) id.")
    labels: tuple[str, ...] = Field(default=(), description="Every admissible answer.")
    ordered: tuple[str, ...] | None = Field(
        default=None, description="The ordinal scale, low to high, when the answers are ordered."
    )
    edge: tuple[str, ...] = Field(
        default=(),
        description="Answers outside the scale that are still answers (e.g. 'no_plans'), "
        "never abstentions.",
    )
    reasoning_type: str | None = Field(default=None, description="For reporting only.")
    topic: str | None = Field(default=None, description="For reporting only.")

    @model_validator(mode="after")
    def _check(self) -> AnswerSpace:
        if len(set(self.labels)) != len(self.labels):
            raise ValueError(f"question {self.id!r}: labels must be unique")
        known = set(self.labels)
        for name, values in (("ordered", self.ordered or ()), ("edge", self.edge)):
            bad = [v for v in values if v not in known]
            if bad and known:
                raise ValueError(
                    f"question {self.id!r}: {name} value {bad[0]!r} is not among its labels"
                )
        return self

    @property
    def closed(self) -> bool:
        """Whether the answer set is fixed."""
        return bool(self.labels)


@dataclass(frozen=True)
class LabelledCase:
    """One labelled outcome: what each source claimed, and the confirmed answer."""

    question: str
    claims: Mapping[str, str | None]
    truth: str


@dataclass(frozen=True)
class Posterior:
    """The fused belief about one question's answer."""

    question: str
    probs: dict[str, float]
    """Answer -> posterior probability (sums to 1 over the answer set)."""
    answer: str | None
    """The most probable answer (``None`` only when no answer is known at all)."""
    margin: float
    """Top probability minus the runner-up's."""
    threshold: float
    """The margin needed to answer (the model's calibrated threshold)."""
    used: dict[str, str] = field(default_factory=dict)
    """Source -> the claim that counted as evidence."""
    ignored: dict[str, str] = field(default_factory=dict)
    """Source -> a claim outside a closed answer set (not counted)."""

    @property
    def abstain(self) -> bool:
        """Whether selective answering holds back (margin below the threshold)."""
        return self.answer is None or self.margin < self.threshold

    @property
    def runner_up(self) -> str | None:
        """The second most probable answer."""
        ranked = sorted(self.probs, key=lambda a: -self.probs[a])
        return ranked[1] if len(ranked) > 1 else None


def f_beta(accuracy: float, coverage: float, beta: float = 0.5) -> float:
    """F-beta of selective answering: precision = accuracy on answered items, recall =
    coverage. ``beta < 1`` weighs a wrong answer above an abstention."""
    if accuracy <= 0 or coverage <= 0:
        return 0.0
    b2 = beta * beta
    return (1 + b2) * accuracy * coverage / (b2 * accuracy + coverage)


class ReliabilityModel:
    """Naive-Bayes fusion over per-question x per-source confusion matrices.

    Args:
        spaces: The questions' answer spaces; a question not listed gets an open space on
            first use.
        alpha: Dirichlet pseudo-counts per confusion-matrix row (spread by the prior shape).
        ordinal_decay: How fast the prior's error mass falls with distance on an ordinal scale
            (0 = errors equally likely to any wrong answer).
        source_prior: Beta pseudo-counts ``(right, wrong)`` of a source's pooled accuracy
            before any outcome is seen.
        threshold: Margin needed to answer in selective mode until :meth:`calibrate` sets it.
        recalibrate_after: Online calibration. When set, every :meth:`observe` first scores
            the case with the model as it stood (a prediction made before the answer was
            known, so held out by construction) and, once this many such predictions exist,
            sets ``threshold`` to the F-``beta`` optimum over them.
        beta: The F-beta used by online calibration.
    """

    def __init__(
        self,
        spaces: Iterable[AnswerSpace] = (),
        *,
        alpha: float = 1.0,
        ordinal_decay: float = 1.0,
        source_prior: tuple[float, float] = (1.0, 1.0),
        threshold: float = 0.5,
        recalibrate_after: int | None = None,
        beta: float = 0.5,
    ) -> None:
        if not alpha > 0:
            raise ValueError(f"alpha must be > 0, got {alpha!r}")
        if ordinal_decay < 0:
            raise ValueError(f"ordinal_decay must be >= 0, got {ordinal_decay!r}")
        if len(source_prior) != 2 or min(source_prior) <= 0:
            raise ValueError(f"source_prior must be two positive numbers, got {source_prior!r}")
        if not 0 <= threshold <= 1:
            raise ValueError(f"threshold must be in [0, 1], got {threshold!r}")
        self.alpha = float(alpha)
        self.ordinal_decay = float(ordinal_decay)
        self.source_prior = (float(source_prior[0]), float(source_prior[1]))
        self.threshold = float(threshold)
        if recalibrate_after is not None and recalibrate_after < 1:
            raise ValueError(f"recalibrate_after must be >= 1, got {recalibrate_after!r}")
        if not beta > 0:
            raise ValueError(f"beta must be > 0, got {beta!r}")
        self.recalibrate_after = recalibrate_after
        self.beta = float(beta)
        self.predictions: list[tuple[float, bool]] = []
        """Online calibration: ``(margin, correct)`` of each case, scored before it was
        learned."""
        self.temperature: dict[str, float] = {}
        self._spaces: dict[str, AnswerSpace] = {}
        self._labels: dict[str, list[str]] = {}
        # question -> truth -> count
        self._truth: dict[str, dict[str, float]] = {}
        # question -> source -> (truth, claim) -> count
        self._conf: dict[str, dict[str, dict[tuple[str, str], float]]] = {}
        # source -> [right, wrong] over every question
        self._pooled: dict[str, list[float]] = {}
        for s in spaces:
            self.add_space(s)

    # -- answer spaces ---------------------------------------------------------------------
    def add_space(self, space: AnswerSpace) -> None:
        """Declare a question's answer space (replacing an open one of the same id)."""
        if not isinstance(space, AnswerSpace):
            raise TypeError(f"space must be an AnswerSpace, got {type(space).__name__}")
        old = self._labels.get(space.id, [])
        self._spaces[space.id] = space
        self._labels[space.id] = list(space.labels) + [v for v in old if v not in space.labels]

    def space(self, question: str) -> AnswerSpace:
        """The answer space of ``question`` (an open one if never declared)."""
        return self._spaces.get(question) or AnswerSpace(id=question)

    def labels(self, question: str) -> list[str]:
        """The answers known for ``question`` (a closed space's labels, or those seen)."""
        return list(self._labels.get(question, []))

    @property
    def questions(self) -> list[str]:
        """Every question with a declared space or an observation."""
        return list(self._labels)

    @property
    def sources(self) -> list[str]:
        """Every source with at least one labelled outcome."""
        return list(self._pooled)

    def _admit(self, question: str, value: str, field_name: str, *, strict: bool) -> bool:
        labels = self._labels.setdefault(question, [])
        if value in labels:
            return True
        if self.space(question).closed:
            if strict:
                raise ValueError(
                    f"{field_name} {value!r} is not an answer of question {question!r} "
                    f"(answers: {', '.join(labels)})"
                )
            return False
        labels.append(value)
        return True

    # -- learning --------------------------------------------------------------------------
    def observe(
        self,
        question: str,
        claims: Mapping[str, str | None],
        truth: str,
        *,
        weight: float = 1.0,
    ) -> None:
        """Learn from one labelled outcome (also the online update).

        ``claims`` maps source -> claimed answer; ``None`` means the source said nothing and
        teaches nothing. A claim outside a closed answer set is skipped.
        """
        _check_question(question)
        if not isinstance(truth, str) or not truth:
            raise ValueError(f"truth must be a non-empty string, got {truth!r}")
        if not weight > 0:
            raise ValueError(f"weight must be > 0, got {weight!r}")
        _check_claims(claims)
        if self.space(question).closed:
            # Validate first: a bad truth must neither teach nor be scored.
            self._admit(question, truth, "truth", strict=True)
        if self.recalibrate_after is not None:
            # Scored before an open space learns the truth exists: no peeking at the answer.
            before = self.posterior(question, claims)
            self.predictions.append((before.margin, before.answer == truth))
            if len(self.predictions) >= self.recalibrate_after:
                self.threshold = best_threshold(self.predictions, beta=self.beta)
        self._admit(question, truth, "truth", strict=True)
        tq = self._truth.setdefault(question, {})
        tq[truth] = tq.get(truth, 0.0) + weight
        conf = self._conf.setdefault(question, {})
        for source, value in claims.items():
            if value is None or not self._admit(question, value, "claim", strict=False):
                continue
            cell = conf.setdefault(source, {})
            cell[(truth, value)] = cell.get((truth, value), 0.0) + weight
            pooled = self._pooled.setdefault(source, [0.0, 0.0])
            pooled[0 if value == truth else 1] += weight

    def fit(self, cases: Iterable[LabelledCase]) -> ReliabilityModel:
        """Observe every case; returns ``self``."""
        for c in cases:
            self.observe(c.question, c.claims, c.truth)
        return self

    # -- reading ---------------------------------------------------------------------------
    def source_accuracy(self, source: str) -> float:
        """A source's pooled chance of being right (posterior mean over every question)."""
        right, wrong = self._pooled.get(source, [0.0, 0.0])
        a, b = self.source_prior
        return (right + a) / (right + wrong + a + b)

    def outcomes(self, source: str) -> tuple[int, int]:
        """How often ``source`` was right and wrong in the labelled outcomes seen."""
        right, wrong = self._pooled.get(source, [0.0, 0.0])
        return round(right), round(wrong)

    def _prior_row(self, question: str, source: str, truth: str, labels: list[str]) -> list[float]:
        """Pseudo-counts of one confusion row: the pooled accuracy on the diagonal, the rest
        spread over wrong answers, less to farther ones on an ordinal scale."""
        k = len(labels)
        if k == 1:
            return [self.alpha]
        acc = self.source_accuracy(source)
        order = {v: i for i, v in enumerate(self.space(question).ordered or ())}
        weights = []
        for v in labels:
            if v == truth:
                weights.append(0.0)
            elif truth in order and v in order:
                weights.append(math.exp(-self.ordinal_decay * (abs(order[truth] - order[v]) - 1)))
            else:
                weights.append(math.exp(-self.ordinal_decay))
        total = sum(weights) or 1.0
        return [
            self.alpha * k * (acc if v == truth else (1 - acc) * w / total)
            for v, w in zip(labels, weights, strict=True)
        ]

    def log_likelihoods(
        self, question: str, claims: Mapping[str, str | None]
    ) -> tuple[list[str], list[float], dict[str, str], dict[str, str]]:
        """Unnormalised log posterior per answer, before temperature.

        Returns ``(answers, scores, used, ignored)``.
        """
        _check_question(question)
        _check_claims(claims)
        labels = list(self._labels.get(question, []))
        used: dict[str, str] = {}
        ignored: dict[str, str] = {}
        for source, value in claims.items():
            if value is None:
                continue
            if value in labels:
                used[source] = value
            elif self.space(question).closed:
                ignored[source] = value
            else:
                # An open space: a claim never seen is still a candidate answer.
                labels.append(value)
                used[source] = value
        if not labels:
            return [], [], used, ignored
        tq = self._truth.get(question, {})
        n = sum(tq.values())
        scores = [math.log((tq.get(t, 0.0) + 1.0) / (n + len(labels))) for t in labels]
        conf = self._conf.get(question, {})
        for source, value in used.items():
            cell = conf.get(source, {})
            for i, t in enumerate(labels):
                prior = self._prior_row(question, source, t, labels)
                row = sum(cell.get((t, v), 0.0) for v in labels) + sum(prior)
                j = labels.index(value)
                scores[i] += math.log((cell.get((t, value), 0.0) + prior[j]) / row)
        return labels, scores, used, ignored

    def posterior(self, question: str, claims: Mapping[str, str | None]) -> Posterior:
        """Fuse ``claims`` into a posterior over ``question``'s answers."""
        labels, scores, used, ignored = self.log_likelihoods(question, claims)
        if not labels:
            return Posterior(question, {}, None, 0.0, self.threshold, used, ignored)
        probs = _softmax(scores, self.temperature.get(question, 1.0))
        ranked = sorted(range(len(labels)), key=lambda i: -probs[i])
        top = probs[ranked[0]]
        second = probs[ranked[1]] if len(ranked) > 1 else 0.0
        return Posterior(
            question,
            dict(zip(labels, probs, strict=True)),
            labels[ranked[0]],
            top - second,
            self.threshold,
            used,
            ignored,
        )

    # -- calibration -----------------------------------------------------------------------
    def calibrate(
        self,
        cases: Sequence[LabelledCase],
        *,
        beta: float = 0.5,
        target_accuracy: float | None = None,
        temperatures: bool = True,
    ) -> float:
        """Fit per-question temperatures (held-out log loss) and the margin threshold that
        maximises F-beta of selective answering on ``cases``; returns the threshold.

        With ``target_accuracy`` the threshold is instead the lowest one whose accuracy on the
        answered cases reaches the target (most coverage at a stated error rate).

        Naive Bayes counts correlated sources as independent and so is over-confident; a
        temperature per question undoes that before margins of different questions are
        compared against one threshold.
        """
        if not cases:
            raise ValueError("calibrate needs at least one labelled case")
        if target_accuracy is not None and not 0 < target_accuracy <= 1:
            raise ValueError(f"target_accuracy must be in (0, 1], got {target_accuracy!r}")
        if not beta > 0:
            raise ValueError(f"beta must be > 0, got {beta!r}")
        by_q: dict[str, list[tuple[list[str], list[float], str]]] = {}
        for c in cases:
            labels, scores, _, _ = self.log_likelihoods(c.question, c.claims)
            if c.truth in labels:
                by_q.setdefault(c.question, []).append((labels, scores, c.truth))
        if temperatures:
            grid = [
                math.exp(math.log(0.25) + i * (math.log(8.0) - math.log(0.25)) / 60)
                for i in range(61)
            ]
            for q, rows in by_q.items():
                self.temperature[q] = min(grid, key=functools.partial(_nll, rows))
        scored: list[tuple[float, bool]] = []
        for q, rows in by_q.items():
            for labels, scores, truth in rows:
                probs = _softmax(scores, self.temperature.get(q, 1.0))
                ranked = sorted(range(len(labels)), key=lambda i: -probs[i])
                second = probs[ranked[1]] if len(ranked) > 1 else 0.0
                scored.append((probs[ranked[0]] - second, labels[ranked[0]] == truth))
        self.threshold = best_threshold(scored, beta=beta, target_accuracy=target_accuracy)
        return self.threshold


def best_threshold(
    scored: Sequence[tuple[float, bool]],
    *,
    beta: float = 0.5,
    target_accuracy: float | None = None,
) -> float:
    """The margin threshold (answer when margin >= threshold) over ``(margin, correct)``
    pairs: the one maximising F-beta, or with ``target_accuracy`` the lowest one whose
    answered accuracy reaches it (1.0, i.e. answer only certainties, if none does). Ties go to
    the lower threshold (more coverage)."""
    if not scored:
        return 0.0
    ranked = sorted(scored, key=lambda mc: -mc[0])
    best, best_t = -1.0, 1.0
    right = 0
    for i, (m, ok) in enumerate(ranked):
        right += ok
        if i + 1 < len(ranked) and ranked[i + 1][0] == m:
            continue
        acc = right / (i + 1)
        if target_accuracy is not None:
            if acc >= target_accuracy:
                best_t = m
            continue
        f = f_beta(acc, (i + 1) / len(ranked), beta)
        if f >= best:
            best, best_t = f, m
    return float(best_t)


def _softmax(scores: Sequence[float], temperature: float) -> list[float]:
    z = [s / temperature for s in scores]
    top = max(z)
    e = [math.exp(v - top) for v in z]
    total = sum(e)
    return [v / total for v in e]


def _nll(rows: Sequence[tuple[list[str], list[float], str]], t: float) -> float:
    """Negative log likelihood of the truths at temperature ``t``."""
    total = 0.0
    for labels, scores, truth in rows:
        total -= math.log(max(_softmax(scores, t)[labels.index(truth)], 1e-300))
    return total


def _check_question(question: object) -> None:
    if not isinstance(question, str) or not question:
        raise ValueError(f"question must be a non-empty string, got {question!r}")


def _check_claims(claims: object) -> None:
    if not isinstance(claims, Mapping):
        raise TypeError(
            f"claims must be a mapping of source -> answer, got {type(claims).__name__}"
        )
    for source, value in claims.items():
        if not isinstance(source, str) or not source:
            raise ValueError(f"claims: source must be a non-empty string, got {source!r}")
        if value is not None and not isinstance(value, str):
            raise ValueError(
                f"claims[{source!r}] must be a string or None, got {type(value).__name__}"
            )
