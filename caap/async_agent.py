"""``caap.AsyncAgent``: the :class:`caap.Agent` API for asyncio code.

Every method runs the agent's (thread-safe) method in a worker thread, so the event loop is
never blocked by embedding, SQLite or the policy. Calls on one agent are serialised by its lock;
calls for different agents run in parallel.

>>> import asyncio
>>> from caap import AsyncAgent
>>> async def main():  # doctest: +SKIP
...     async with await AsyncAgent.create("./caap-data") as memory:
...         await memory.add([{"role": "user", "content": "I take my coffee black."}], "ana")
...         print(await memory.search("coffee", "ana"))
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime
from pathlib import Path
from typing import Any, TypeVar

from caap.agent import Agent
from caap.conflict_graph.reliability import ReliabilityModel
from caap.models import ConflictCluster, Decision, Memory, Recall, Response

__all__ = ["AsyncAgent"]

_R = TypeVar("_R")


class AsyncAgent:
    """An :class:`caap.Agent` behind ``async`` methods.

    Build it with ``await AsyncAgent.create(...)`` (the model loads in a worker thread), with
    ``await AsyncAgent.from_config(...)``, or wrap an existing agent: ``AsyncAgent(agent)``.
    The wrapped agent is :attr:`agent`.
    """

    def __init__(self, agent: Agent) -> None:
        if not isinstance(agent, Agent):
            raise TypeError(f"agent must be a caap.Agent, got {type(agent).__name__}")
        self.agent = agent

    @classmethod
    async def create(cls, *args: Any, **kwargs: Any) -> AsyncAgent:
        """Build the agent (same arguments as :class:`caap.Agent`) off the event loop."""
        return cls(await asyncio.to_thread(Agent, *args, **kwargs))

    @classmethod
    async def from_config(cls, config: Mapping[str, Any] | str | Path) -> AsyncAgent:
        """As :meth:`caap.Agent.from_config`, off the event loop."""
        return cls(await asyncio.to_thread(Agent.from_config, config))

    async def _run(self, fn: Callable[..., _R], *args: Any, **kwargs: Any) -> _R:
        return await asyncio.to_thread(fn, *args, **kwargs)

    # -- Mem0-shaped -------------------------------------------------------------------------
    async def add(
        self,
        messages: str | Mapping[str, Any] | Sequence[Mapping[str, Any] | str],
        user_id: str,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """See :meth:`caap.Agent.add`."""
        return await self._run(self.agent.add, messages, user_id, **kwargs)

    async def search(self, query: str, user_id: str, **kwargs: Any) -> dict[str, Any]:
        """See :meth:`caap.Agent.search`."""
        return await self._run(self.agent.search, query, user_id, **kwargs)

    async def get_all(self, user_id: str, **kwargs: Any) -> dict[str, Any]:
        """See :meth:`caap.Agent.get_all`."""
        return await self._run(self.agent.get_all, user_id, **kwargs)

    async def get(self, memory_id: str, user_id: str) -> dict[str, Any] | None:
        """See :meth:`caap.Agent.get`."""
        return await self._run(self.agent.get, memory_id, user_id)

    async def update(
        self, memory_id: str, text: str, user_id: str, **kwargs: Any
    ) -> dict[str, Any]:
        """See :meth:`caap.Agent.update`."""
        return await self._run(self.agent.update, memory_id, text, user_id, **kwargs)

    async def history(self, memory_id: str, user_id: str) -> list[dict[str, Any]]:
        """See :meth:`caap.Agent.history`."""
        return await self._run(self.agent.history, memory_id, user_id)

    async def delete(self, memory_id: str, user_id: str) -> bool:
        """See :meth:`caap.Agent.delete`."""
        return await self._run(self.agent.delete, memory_id, user_id)

    async def delete_all(self, user_id: str, **kwargs: Any) -> int:
        """See :meth:`caap.Agent.delete_all`."""
        return await self._run(self.agent.delete_all, user_id, **kwargs)

    # -- CAAP ----------------------------------------------------------------------------------
    async def remember(self, text: str, user_id: str, **kwargs: Any) -> Memory:
        """See :meth:`caap.Agent.remember`."""
        return await self._run(self.agent.remember, text, user_id, **kwargs)

    async def remember_many(
        self, items: Sequence[str | Mapping[str, Any]], user_id: str
    ) -> list[Memory]:
        """See :meth:`caap.Agent.remember_many`."""
        return await self._run(self.agent.remember_many, list(items), user_id)

    async def recall(
        self, query: str, user_id: str, k: int = 8, *, budget: int | None = None
    ) -> Recall:
        """See :meth:`caap.Agent.recall`."""
        return await self._run(self.agent.recall, query, user_id, k, budget=budget)

    async def respond(self, query: str, user_id: str, *, k: int = 8) -> Response:
        """See :meth:`caap.Agent.respond`."""
        return await self._run(self.agent.respond, query, user_id, k=k)

    async def resolve(
        self,
        settled: Response | Decision,
        answer: str,
        user_id: str,
        *,
        source: str = "the user",
        observed_at: datetime | date | str | None = None,
        confirms: str | None = None,
    ) -> Memory:
        """See :meth:`caap.Agent.resolve`."""
        return await self._run(
            self.agent.resolve,
            settled,
            answer,
            user_id,
            source=source,
            observed_at=observed_at,
            confirms=confirms,
        )

    async def forget(self, memory_id: str, user_id: str) -> bool:
        """See :meth:`caap.Agent.forget`."""
        return await self._run(self.agent.forget, memory_id, user_id)

    async def conflicts(self, user_id: str) -> list[ConflictCluster]:
        """See :meth:`caap.Agent.conflicts`."""
        return await self._run(self.agent.conflicts, user_id)

    async def memories(self, user_id: str) -> list[Memory]:
        """See :meth:`caap.Agent.memories`."""
        return await self._run(self.agent.memories, user_id)

    async def reliability(self, user_id: str) -> ReliabilityModel:
        """See :meth:`caap.Agent.reliability`."""
        return await self._run(self.agent.reliability, user_id)

    async def close(self) -> None:
        """Flush and release the stores."""
        await self._run(self.agent.close)

    async def __aenter__(self) -> AsyncAgent:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
