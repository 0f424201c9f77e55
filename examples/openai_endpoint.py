"""Plug the LLM backbone into any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, ...).

    CAAP_LLM_BASE_URL=http://localhost:11434/v1 python examples/openai_endpoint.py llama3.1
    OPENAI_API_KEY=sk-... python examples/openai_endpoint.py gpt-4o-mini

``--selftest`` runs the same code against a local scripted chat-completions server, offline.
Any model failure falls back to the offline backbone; the decision record says so.
"""

from __future__ import annotations

import argparse
import json
import tempfile

from caap import Agent
from caap.llm import OpenAIChatModel
from caap.llm.testing import ChatCompletionsServer, Reply

MEMORIES = [
    "Maya's clinic record lists ibuprofen as contraindicated for her.",
    "Maya's father says the pediatrician approved ibuprofen for her fevers last spring.",
]
QUERY = "Can Maya have ibuprofen for her fever tonight?"


def ask(model: OpenAIChatModel) -> None:
    with tempfile.TemporaryDirectory() as data:
        agent = Agent(data, llm=model)
        agent.remember_many(MEMORIES, "maya")
        r = agent.respond(QUERY, "maya")
        print("action:", r.decision.action.value, "| backbone:", r.decision.backbone)
        if r.decision.fallback_reason:
            print("fallback:", r.decision.fallback_reason)
        print(r.text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default="gpt-4o-mini")
    parser.add_argument("--base-url", default=None)
    parser.add_argument("--selftest", action="store_true")
    args = parser.parse_args()
    if not args.selftest:
        ask(OpenAIChatModel(args.model, base_url=args.base_url))
        return
    decision = {
        "action": "verify",
        "conflict_type": "SCC",
        "unresolved": "which source is current",
        "missing_information": "whether the clinic record or the pediatrician's approval is newer",
        "evidence": {},
        "risk": "high",
        "rationale": "sources disagree about a medication",
    }
    script = [
        Reply(content=json.dumps(decision)),
        Reply(content="The clinic record and the pediatrician disagree; please call the clinic."),
    ]
    with ChatCompletionsServer(script) as server:
        ask(OpenAIChatModel("local-test", base_url=server.base_url, max_retries=0))


if __name__ == "__main__":
    main()
