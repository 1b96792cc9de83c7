"""The warcio names Amber uses, imported with fsspec kept out.

warcio imports fsspec when it is installed (huggingface_hub installs it here) only so its
command-line tools can open remote URLs (``warcio.utils.fsspec_open``); importing fsspec
(asyncio and all) costs more CPU than the rest of ``amber bundle verify``. Amber hands
warcio open file objects and local paths, which warcio then opens with the built-in
``open``, so warcio is imported with ``fsspec`` hidden; fsspec itself stays importable for
everything else. If warcio or fsspec is already imported this changes nothing.
"""

from __future__ import annotations

import sys

if "warcio" not in sys.modules and "fsspec" not in sys.modules:
    sys.modules["fsspec"] = None  # type: ignore[assignment]  # `import fsspec` -> ImportError
    try:
        import warcio  # noqa: F401
    finally:
        del sys.modules["fsspec"]

from warcio.archiveiterator import ArchiveIterator  # noqa: E402
from warcio.recordloader import ArcWarcRecord  # noqa: E402
from warcio.statusandheaders import StatusAndHeaders  # noqa: E402
from warcio.timeutils import datetime_to_iso_date  # noqa: E402
from warcio.warcwriter import WARCWriter  # noqa: E402

__all__ = ["ArcWarcRecord", "ArchiveIterator", "StatusAndHeaders", "WARCWriter",
           "datetime_to_iso_date"]
