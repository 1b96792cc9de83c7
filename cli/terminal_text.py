"""Text from captured pages and reports, made safe to print in a terminal."""

from __future__ import annotations

import re

# C0 and C1 control characters except tab and newline: an ESC in a captured page must
# not move the cursor, retitle the window or clear the auditor's screen.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def escape(text: str) -> str:
    """Rich markup escaped, control characters replaced by U+FFFD."""
    from rich.markup import escape as escape_markup  # rich is slow to import; --json needs none

    return escape_markup(_CONTROL.sub("\ufffd", text))
