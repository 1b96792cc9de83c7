"""Fault injection for the Ray and process-pool tests, installed in every worker process
(Ray's ``worker_process_setup_hook``, ProcessExecutor's ``setup_hook``): when the file
named by ``AMBER_FAULT_CONTROL`` holds a number K, the first worker process to start its
(K+1)-th judge request since then dies on the spot (``os._exit``), once per run
(``AMBER_FAULT_MARKER`` records that it did). The K answers before it are already in the
report's ledger shard. With ``AMBER_FAULT_EVERY_TIME`` set, every worker dies that way (a
worker that cannot live)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

_seen = 0


def install() -> None:
    from ambereval.models.openai_backend import OpenAIBackend

    original = OpenAIBackend.complete

    def complete(self: Any, *args: Any, **kwargs: Any) -> Any:
        global _seen
        control = Path(os.environ["AMBER_FAULT_CONTROL"])
        armed = control.read_text().strip() if control.exists() else ""
        if armed:
            if _seen >= int(armed):
                if os.environ.get("AMBER_FAULT_EVERY_TIME"):
                    os._exit(1)
                try:
                    fd = os.open(os.environ["AMBER_FAULT_MARKER"],
                                 os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                except FileExistsError:
                    pass  # someone already died for this run
                else:
                    os.write(fd, str(os.getpid()).encode())
                    os.close(fd)
                    os._exit(1)
            _seen += 1
        return original(self, *args, **kwargs)

    OpenAIBackend.complete = complete  # type: ignore[method-assign]
