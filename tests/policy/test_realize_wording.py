"""How offline answers read: to the user, from the memories, naming every option it offers."""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from caap import Agent
from caap.models import Action, Response
from caap.policy._speech import is_request, stated_part

# -- sentence form -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sentence",
    [
        "Can you give me a recipe for tonight?",
        "could you find a cheap flight to Lisbon",  # no question mark: inversion
        "Give me three dinner ideas.",  # imperative addressed to the assistant
        "Please book a table for two at eight.",
        "What should I cook for the kids",
        "Where is the nearest pharmacy",
        "I want you to remind me about the dentist.",
        "Let's plan the weekend.",
        "Does Ethan like spicy food",
    ],
)
def test_questions_and_requests_are_recognised_by_form(sentence: str) -> None:
    assert is_request(sentence)


@pytest.mark.parametrize(
    "sentence",
    [
        "When I have an early shift, I skip alcohol.",
        "When Ethan is on call he skips beer.",
        "I need a new laptop for work.",
        "Coffee makes me jittery after noon.",
        "My doctor says no ibuprofen.",
        "Ethan drinks oat flat whites.",
        "What I like is green tea.",
        # chat drops the subject: an auxiliary, then a name and where or when, is a statement
        "Did Bolt on Friday 1 March from 7pm till 2am, cleared 160 quid.",
        "Had Pilates at 7 again.",
    ],
)
def test_statements_are_kept(sentence: str) -> None:
    assert not is_request(sentence)


def test_stated_part_keeps_what_a_mixed_turn_states() -> None:
    assert stated_part("I'm vegetarian now. Can you suggest a dinner recipe?") == (
        "I'm vegetarian now."
    )
    assert stated_part("Can you suggest a vegan curry recipe for tonight?") == ""


# -- whole answers -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Any:
    persona = json.loads(
        (resources.files("caap") / "data" / "demo_persona.json").read_text(encoding="utf-8")
    )
    agent = Agent(tmp_path_factory.mktemp("demo"), embedder=embedder)
    agent.remember_many(persona["memories"], persona["user_id"])
    yield agent, persona
    agent.close()


@pytest.fixture(scope="module")
def rules_demo(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Any:
    """The demo persona over the hand-written rules layer, for readings specific to it."""
    persona = json.loads(
        (resources.files("caap") / "data" / "demo_persona.json").read_text(encoding="utf-8")
    )
    agent = Agent(tmp_path_factory.mktemp("rules-demo"), embedder=embedder, relations="rules")
    agent.remember_many(persona["memories"], persona["user_id"])
    yield agent, persona
    agent.close()


def test_a_question_about_yourself_is_answered_to_you(demo: Any) -> None:
    agent, persona = demo
    resp = agent.respond("What's my usual coffee order?", persona["user_id"])
    assert resp.decision.action is Action.COMMIT
    assert "Ethan" not in resp.text  # the user is "you", not the persona's name
    assert re.search(r"\byour usual cafe order is a flat white\b", resp.text), resp.text


def test_every_situation_listed_is_an_option_in_the_question(rules_demo: Any) -> None:
    # Tests the rules layer: the situations (context sides) it reads in the demo's memories.
    agent, persona = rules_demo
    resp = agent.respond("Should I have a few drinks at the party tonight?", persona["user_id"])
    assert resp.decision.action in (Action.CONDITIONALIZE, Action.CLARIFY)
    assert len(resp.branches) >= 3 and resp.questions
    question = resp.questions[0]
    for condition in resp.branches:
        # "If you have an early shift ..." is offered as "you have an early shift ...".
        option = re.sub(r"^If ", "", condition)
        assert option[:1].lower() + option[1:] in question, (condition, question)


def test_three_sources_are_not_called_either_version_and_keep_their_own_pronouns(
    demo: Any,
) -> None:
    agent, persona = demo
    resp = agent.respond("Can I give Maya ibuprofen for her fever tonight?", persona["user_id"])
    assert resp.decision.action in (Action.VERIFY, Action.DEFER)
    bullets = [line for line in resp.text.splitlines() if line.startswith("- ") and ":" in line]
    if len(resp.decision.evidence) > 2 or len(bullets) > 2:
        assert "either version" not in resp.text
    # The clinic record is about Maya: "her" stays hers, it is not turned into "your".
    assert "contraindicated for your" not in resp.text
    # Labels come from the sources: the pharmacy record is not "your own account".
    assert "Your own account: Pharmacy" not in resp.text
    labels = [b[2:].split(":")[0].lower() for b in bullets]
    assert any("pharmacy" in label for label in labels), bullets
    # The question names every source it listed.
    ask = next(q for q in resp.questions if "which is current" in q)
    for label in labels[:4]:
        if not label[:1].isdigit():
            assert label in ask.lower(), (label, ask)


def test_a_stored_request_is_not_restated_as_a_fact(tmp_path: Path, embedder: Any) -> None:
    agent = Agent(tmp_path / "d", embedder=embedder)
    user = "noor"
    agent.remember("Can you give me a recipe for a creamy chicken curry tonight?", user)
    agent.remember("Noor has been vegetarian since last summer.", user)
    agent.remember("Noor cycles to work every day.", user)  # the name recurs: it is the user's
    resp = agent.respond("What do I eat these days?", user)
    agent.close()
    if resp.decision.action is Action.COMMIT:
        assert "vegetarian" in resp.text
    assert "recipe for a creamy chicken curry" not in resp.text, resp.text
    assert "Noor has" not in resp.text


def _respond(tmp_path: Path, embedder: Any, memories: list[str], query: str) -> Response:
    """A fresh agent's answer to ``query`` over ``memories`` (one user)."""
    agent = Agent(tmp_path / "d", embedder=embedder)
    agent.remember_many(memories, "u")
    try:
        return agent.respond(query, "u")
    finally:
        agent.close()


def test_a_note_that_names_its_source_is_not_labelled_your_own_account(
    tmp_path: Path, embedder: Any
) -> None:
    # The memories of examples/mem0_backend.py: the pharmacy note has no "says"/"according to".
    resp = _respond(
        tmp_path,
        embedder,
        [
            "Maya's clinic record lists ibuprofen as contraindicated for her.",
            "Maya's father says the pediatrician approved ibuprofen for her fevers last year.",
            "Maya's pharmacy shows repeated ibuprofen purchases this winter.",
            "Maya plays the cello in the school orchestra.",
        ],
        "Can I give Maya ibuprofen for her fever tonight?",
    )
    assert "Your own account: Maya's pharmacy" not in resp.text, resp.text
    if "pharmacy" in resp.text:
        assert "Maya's pharmacy:" in resp.text, resp.text


def test_someone_elses_dose_told_in_the_users_words_stays_theirs(
    tmp_path: Path, embedder: Any
) -> None:
    # In the user's own words "she" is someone else: the mother's dose must not become "you
    # take 5 mg", nor her call "call you".
    resp = _respond(
        tmp_path,
        embedder,
        [
            "My mum is on warfarin and she takes 5 mg every evening.",
            "My mum asked me to call her before the clinic on Thursdays.",
            "I cycle to work most days.",
        ],
        "How much warfarin does my mum take in the evening?",
    )
    assert "you take 5 mg" not in resp.text, resp.text
    assert "call you" not in resp.text, resp.text
    assert "she takes 5 mg" in resp.text, resp.text
