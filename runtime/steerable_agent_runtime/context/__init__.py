"""Context fragments: typed, marked, capped injected context, and the notes states.

``ContextFragment`` and its cap ladder; ``FilesystemState`` (one notes file) and
``DiscoveredNotesState`` (managed, user, project and local AGENTS.md discovery), both
LoopHooks that inject once per run as a pre_step append. See docs/compaction.md.
"""

from __future__ import annotations

from .fragment import (
    CEILING_TOKENS,
    DEFAULT_MAX_TOKENS,
    TRUNCATION_NOTICE,
    ContextFragment,
    all_fragment_classes,
)
from .notes import (
    DISCLAIMER,
    MANAGED_NOTES_ENV,
    DiscoveredNotesState,
    FilesystemState,
    NotesFragment,
    NoteSource,
)

__all__ = [
    "CEILING_TOKENS",
    "DEFAULT_MAX_TOKENS",
    "DISCLAIMER",
    "MANAGED_NOTES_ENV",
    "TRUNCATION_NOTICE",
    "ContextFragment",
    "DiscoveredNotesState",
    "FilesystemState",
    "NoteSource",
    "NotesFragment",
    "all_fragment_classes",
]
