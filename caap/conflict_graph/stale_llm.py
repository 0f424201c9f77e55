"""Optional LLM confirmation of stale-state edges.

The offline rules (:mod:`caap.conflict_graph.stale`) propose every ``supersedes`` and
``propagated_invalidation`` edge across aspects, with their times. A classifier may then veto a
proposal it judges wrong ("my brother broke his leg" is no reason to stop cycling). The model only
classifies one pair at a time; it never invents an edge the rules did not propose, and the time
rules stay pure. A model failure never loses the rules' answer: the edge is kept and its evidence
says the classifier was unavailable.
"""

from __future__ import annotations

from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from caap.llm import ChatModel, LLMError, Message, infer_model, structured_call

__all__ = ["InvalidationClassifier", "InvalidationVerdict", "LLMInvalidationClassifier"]


class InvalidationVerdict(BaseModel):
    """What a classifier says about one (newer, older) pair of memories."""

    model_config = ConfigDict(extra="forbid")

    relation: Literal["supersedes", "propagated_invalidation", "none"] = Field(
        description="supersedes: the newer statement replaces the older one's value for the "
        "same thing; propagated_invalidation: the newer statement changes something the older "
        "one depends on, so it may no longer hold; none: the older statement still holds."
    )
    certain: bool = Field(
        default=False,
        description="True when the newer statement says how far or how long the change "
        "reaches (a duration, a ban, a sale); false when that is left open.",
    )
    reason: str = Field(default="", description="One short sentence.")


@runtime_checkable
class InvalidationClassifier(Protocol):
    """Anything that judges whether a newer memory makes an older one stale."""

    def classify(self, newer: str, older: str) -> InvalidationVerdict | None:
        """The verdict for one pair, or ``None`` when no verdict could be had."""
        ...


_SYSTEM = """You check a memory system's bookkeeping about one person.
Given an OLDER and a NEWER statement by the same user, say whether the newer one makes the older
one stale: it replaces the same thing's value (supersedes), or it changes something the older
statement depends on so the older one may no longer hold (propagated_invalidation), or the older
statement still holds (none). Statements about other people do not change the user's state.
Reply with one JSON object matching the schema."""


class LLMInvalidationClassifier:
    """Confirms stale-state edges with one structured call per pair.

    Args:
        model: ``"openai:gpt-4o-mini"``-style string or a :class:`~caap.llm.ChatModel`.

    Attributes:
        last_error: The last model failure (``None`` if the last call succeeded).
    """

    def __init__(self, model: str | ChatModel) -> None:
        self.model: ChatModel = infer_model(model) if isinstance(model, str) else model
        self.last_error: LLMError | None = None

    def classify(self, newer: str, older: str) -> InvalidationVerdict | None:
        """Ask the model; ``None`` (and :attr:`last_error` set) on any model failure."""
        messages: list[Message] = [
            {"role": "system", "content": _SYSTEM},
            {"role": "user", "content": f"OLDER: {older}\nNEWER: {newer}"},
        ]
        try:
            verdict = structured_call(
                self.model, messages, InvalidationVerdict, schema_name="invalidation"
            )
        except LLMError as exc:
            self.last_error = exc
            return None
        self.last_error = None
        return verdict
