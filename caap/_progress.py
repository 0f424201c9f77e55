"""A progress line on stderr while something slow runs (loading torch and the model)."""

from __future__ import annotations

import itertools
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

__all__ = ["spinner"]

_FRAMES = "|/-\\"


@contextmanager
def spinner(message: str, stream: TextIO | None = None) -> Iterator[None]:
    """Show ``message`` with a spinner while the block runs, then how long it took.

    On a terminal the spinner turns in place; elsewhere (a pipe, a log, a test) one line is
    printed before and one after, so logs stay readable. Always on stderr: stdout is output.
    """
    out = stream or sys.stderr
    start = time.monotonic()
    live = hasattr(out, "isatty") and out.isatty()
    done = threading.Event()

    def spin() -> None:
        for frame in itertools.cycle(_FRAMES):
            if done.wait(0.1):
                return
            out.write(f"\r{frame} {message} ({time.monotonic() - start:.0f} s)")
            out.flush()

    thread = threading.Thread(target=spin, daemon=True) if live else None
    if thread is not None:
        thread.start()
    else:
        print(f"{message} ...", file=out, flush=True)
    try:
        yield
    finally:
        done.set()
        if thread is not None:
            thread.join()
        took = f"{time.monotonic() - start:.1f} s"
        print(
            f"\r{message}: done in {took}" + " " * 8 if live else f"{message}: done in {took}",
            file=out,
            flush=True,
        )
