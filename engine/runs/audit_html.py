"""``amber audit --html``: one self-contained page generated from the audit by one template.

The page (``audit_template.html``, shipped with the package) holds inline CSS and JS and
the run's data as JSON inside a ``<script type="application/json">`` element; it makes no
request (a Content-Security-Policy of ``default-src 'none'`` forbids any), works from
``file://``, and renders a report only when it is clicked and a claim's evidence only when
that claim is clicked, so large runs open quickly. Captured pages and reports are
attacker-controlled text: the JSON is escaped so no ``</script>`` can end the data
element, and the script only ever sets ``textContent``, never HTML.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from ambereval.engine.runs.audit_data import Audit
from ambereval.engine.runs.run_dir import write_atomic

PLACEHOLDER = "__AMBER_DATA__"
_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028",
            "\u2029": "\\u2029"}


def template() -> str:
    return resources.files("ambereval.engine.runs").joinpath(
        "audit_template.html").read_text(encoding="utf-8")


def embed_json(obj: Any) -> str:
    """JSON safe inside a ``<script>`` element: no ``<``, ``>`` or ``&`` left raw (they
    only occur inside strings, where the ``\\u`` escapes mean the same)."""
    text = json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    for raw, esc in _ESCAPES.items():  # str.replace is far faster than str.translate here
        text = text.replace(raw, esc)
    return text


def render_audit_html(audit: Audit) -> str:
    page = template()
    head, sep, tail = page.partition(PLACEHOLDER)
    if not sep:
        raise RuntimeError("audit template lacks its data placeholder")
    return head + embed_json(audit.as_dict()) + tail


def write_audit_html(audit: Audit, path: str | Path) -> Path:
    """Write the page atomically; returns its path.

    Example: ``write_audit_html(load_audit("run/"), "run/audit.html")``
    """
    path = Path(path)
    write_atomic(path, render_audit_html(audit))
    return path
