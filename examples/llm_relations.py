"""Read memory relations with an LLM (any OpenAI-compatible endpoint), falling back offline.

    CAAP_LLM_BASE_URL=http://localhost:11434/v1 python examples/llm_relations.py openai:llama3.1
    OPENAI_API_KEY=sk-... python examples/llm_relations.py openai:gpt-4o-mini

``--selftest`` runs the same code against a local scripted chat-completions server: the first
reply is used, the second call gets a 503 and falls back to the offline layer.
"""

from __future__ import annotations

import argparse
import json

from caap.conflict_graph._relations_llm import LLMRelations
from caap.conflict_graph.relations import MemoryView
from caap.llm import OpenAIChatModel
from caap.llm.testing import ChatCompletionsServer, Reply

PAIRS = [
    (
        MemoryView("m1", "The pharmacy label says one tablet twice a day."),
        MemoryView("m2", "Her sister insists it is two tablets each morning."),
    ),
    (
        MemoryView("m3", "On demo days Jo wears a suit."),
        MemoryView("m4", "Jo is in jeans at the office."),
    ),
]


def show(layer: LLMRelations) -> None:
    for (a, b), v in zip(PAIRS, layer.relate(PAIRS), strict=True):
        print(f"{a.id}-{b.id}: {v.relation} ({v.confidence:.2f}) {v.evidence}")
    if layer.last_fault:
        print("fell back:", layer.last_fault.kind, "-", layer.last_fault.message)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default="openai:gpt-4o-mini")
    parser.add_argument("--selftest", action="store_true", help="offline, scripted server")
    args = parser.parse_args()
    if not args.selftest:
        show(LLMRelations(args.model))
        return
    answer = {
        "pairs": [
            {"pair": 0, "relation": "source_contradiction", "confidence": 0.9},
            {"pair": 1, "relation": "context_partition", "confidence": 0.8},
        ]
    }
    with ChatCompletionsServer([Reply(json.dumps(answer)), Reply(status=503)]) as server:
        model = OpenAIChatModel("scripted", base_url=server.base_url, max_retries=0)
        show(LLMRelations(model, fallback="rules"))  # the model's answer
        show(LLMRelations(model, fallback="rules"))  # a 503: the offline layer's answer


if __name__ == "__main__":
    main()
