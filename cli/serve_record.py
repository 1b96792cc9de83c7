"""``amber serve --record``: the recording session's start and stop reports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ambereval.cli.output import fail
from ambereval.cli.serve_lines import emit as _emit
from ambereval.cli.serve_lines import note as _note


def serve_record(root: Path, bundles: list[Path] | None, host: str, port: int, proxy: bool,
                 ca_dir: Path, allow_private_addresses: bool, as_json: bool) -> None:
    """Record into ``root`` until SIGINT/SIGTERM, then print what was recorded."""
    from ambereval.engine.serve.ca import export_lines
    from ambereval.engine.serve.recording import record_session

    if bundles:
        fail("--record writes one bundle and replays none; bundles given too",
             hint=f"amber serve --record {root} (replay it later: amber serve {root})",
             exit_code=2)
    mode = "proxy" if proxy else "base-url"

    def announce(env: list[tuple[str, str]], url: str) -> None:
        if as_json:
            _emit(json.dumps({"event": "start", "mode": mode, "record": str(root), "url": url,
                              "env": dict(env)}, sort_keys=True) + "\n")
            return
        _emit(export_lines(env))
        _note(f"recording into {root}; listening on {url} (Ctrl-C to stop and finish)")

    summary: dict[str, Any] = record_session(root, host, port, proxy, ca_dir,
                                             allow_private_addresses, announce)
    if as_json:
        _emit(json.dumps({"event": "stop", **summary}, sort_keys=True) + "\n")
        return
    s = summary
    line = (f"stopped: {s['recorded']} exchanges recorded, {s['repeated']} repeats answered "
            f"from the recording, {s['failed']} without an upstream answer")
    if s["unrecorded"]:
        line += f", {s['unrecorded']} not recorded (left early or after the stop)"
    _note(line + f"; {root} finished")
