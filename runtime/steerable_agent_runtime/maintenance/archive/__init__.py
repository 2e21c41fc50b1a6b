"""archive and restore: move whole chats between a store and an archive store."""

from .chatmove import CHAT_TABLES, RowCounts
from .job import ArchiveReport, RestoreReport, archive, restore

__all__ = ["CHAT_TABLES", "ArchiveReport", "RestoreReport", "RowCounts", "archive", "restore"]
