"""Messages the dashboard's worker threads post to its screens (``post_message`` is thread-safe)."""

from __future__ import annotations

from textual.message import Message

from esdash.view.campaign import CampaignReading
from esdash.view.model import Snapshot, ViewParams


class SnapshotReady(Message):
    """A new snapshot of a run; a newer one replaces an older one still in the queue."""

    def __init__(self, snapshot: Snapshot, params: ViewParams, source: str = "") -> None:
        super().__init__()
        self.snapshot = snapshot
        self.params = params
        self.source = source

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SnapshotReady) and message.source == self.source


class SourceFailed(Message):
    """Polling the run directory raised: shown as a notification, polling goes on."""

    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error


class CampaignRead(Message):
    """A new reading of a ``campaign.json``; a newer one replaces an older one still queued."""

    def __init__(self, reading: CampaignReading) -> None:
        super().__init__()
        self.reading = reading

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, CampaignRead)
