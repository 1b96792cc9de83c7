"""What a reader returns for one page: the exchanges to archive and the text."""

from __future__ import annotations

from dataclasses import dataclass, field

from ambereval.snapshots.capture.transport import Exchange


@dataclass
class PageFetch:
    """The outcome of reading one URL.

    ``exchanges`` are every HTTP exchange in order (redirect hops first); the last one
    is the final response. ``error`` is set when no usable page came back; then
    ``text`` is ``None`` and is never passed on as page text.
    """

    url: str
    exchanges: list[Exchange] = field(default_factory=list)
    text: str | None = None
    title: str | None = None
    extractor: str = "none"
    text_status: str | None = None
    status: int | None = None
    error: str | None = None
    permanent: bool = False
    final_url: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def final(self) -> Exchange | None:
        return self.exchanges[-1] if self.exchanges else None

    def body_of(self, exchange: Exchange) -> bytes | None:
        """The decoded body, or None with this fetch marked failed (permanently: the same
        bytes will not decode next time either)."""
        try:
            return exchange.decoded_body()
        except ValueError as exc:
            self.error = str(exc)
            self.permanent = True
            return None
