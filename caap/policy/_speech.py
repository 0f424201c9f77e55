"""Sentence form: tell what a stored turn *states* from what it *asks*.

A chat turn stored as a memory may be a question or a request to the assistant ("Can you give
me a recipe for tonight?"). That is not a fact about the user, so an answer must not restate it
as one. The test is by sentence form, not by topic words: a question mark, subject-auxiliary
inversion at the start ("can you", "is the", "what should"), or a directive addressed to the
assistant (an imperative whose first object is "me"/"us", a "please", a "let's", or "I want you
to ..."). Best effort, and deliberately conservative: a declarative sentence is kept.
"""

from __future__ import annotations

import re

__all__ = ["is_request", "sentences", "stated_part"]

# Closed classes of English, not topic words: auxiliaries and modals, subject-like words.
_AUX = (
    r"(?:can|could|would|will|should|shall|may|might|must|do|does|did|is|are|was|were|am|"
    r"have|has|had|won't|can't|don't|doesn't|didn't|isn't|aren't|wouldn't|couldn't|shouldn't)"
)
_SUBJECT = r"(?:i|you|we|he|she|it|they|there|this|that|these|those|my|your|our|the|a|an|any)"

# "Can you ...", "Is the ...", "Does Ethan ..." (a name: capitalised, so matched case-sensitively),
# but not a name followed by a preposition, a time word, a number or punctuation: "Did Bolt on
# Friday till 2am, cleared 160 quid" is a statement with its subject dropped, as chat writes.
_AFTER_A_DROPPED_SUBJECT = (
    r"(?:on|at|in|for|from|with|till|until|to|by|after|before|this|last|yesterday|today|"
    r"tonight|again|all|\d)"
)
_INVERSION = re.compile(
    rf"^(?i:{_AUX})\s+(?:(?i:{_SUBJECT})\b|[A-Z][a-z]+\b"
    rf"(?!\s*[,.;:!]|\s*$|\s+(?i:{_AFTER_A_DROPPED_SUBJECT})\b))"
)
# "Where is ...", "What should ...", "Which wine goes ..." (but not "When I have ...").
_WH_QUESTION = re.compile(
    rf"^(?:(?:when|where|why|who|whom)\s+{_AUX}|(?:what|which|whose|how)"
    rf"(?:\s+(?!(?:{_SUBJECT})\b)[a-z]+)?\s+{_AUX})\b",
    re.I,
)
_DIRECTIVE = re.compile(
    r"^(?:please\b|let's\b|let\s+me\b|\w+\s+(?:me|us)\b(?!\s+(?:and|or)\b)|"
    r"(?:i|we)\s+(?:want|need|would like|'d like)\s+you\s+to\b)",
    re.I,
)
_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")


def sentences(text: str) -> list[str]:
    """``text`` split into sentences at ``.``, ``!`` or ``?`` followed by a capital."""
    return [s.strip() for s in _SPLIT.split(text.strip()) if s.strip()]


def is_request(sentence: str) -> bool:
    """Whether a sentence asks the assistant something rather than stating something."""
    s = sentence.strip().strip("\"'")
    if not s:
        return False
    if s.rstrip().endswith("?"):
        return True
    if re.search(r"\bplease\b", s, re.I) and not re.match(rf"^{_SUBJECT}\b", s, re.I):
        return True
    # A first-person declarative ("I skip ...", "My doctor ...") is a statement, whatever it
    # goes on to say; the other forms are checked on the sentence's opening words.
    if re.match(r"^(?:i|my|we|our)\b(?!\s+(?:want|need|would like|'d like)\s+you\s+to\b)", s, re.I):
        return False
    return bool(_INVERSION.match(s) or _WH_QUESTION.match(s) or _DIRECTIVE.match(s))


def stated_part(text: str) -> str:
    """The sentences of ``text`` that state something; ``""`` when it only asks."""
    return " ".join(s for s in sentences(text) if not is_request(s))
