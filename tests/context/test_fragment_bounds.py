"""The cap-ladder gate: every ContextFragment subclass in the package obeys the ladder.

Imports every module of the library first, so a fragment class anywhere is found; a class
whose cap was raised after its definition (bypassing the class-creation check) still fails here.
"""

from __future__ import annotations

import importlib
import pkgutil

import pytest
import steerable_agent_runtime
from steerable_agent_runtime.context import (
    CEILING_TOKENS,
    DEFAULT_MAX_TOKENS,
    ContextFragment,
    all_fragment_classes,
)
from steerable_agent_runtime.context.fragment import check_ladder

# Modules whose import needs an optional extra or starts something: skipped only if missing.
_OPTIONAL = ("steerable_agent_runtime.storage.sqlalchemy",)


def _import_everything() -> None:
    for info in pkgutil.walk_packages(steerable_agent_runtime.__path__, "steerable_agent_runtime."):
        if info.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(info.name)
        except ImportError:
            if not info.name.startswith(_OPTIONAL):
                raise


def _library_fragments() -> list[type[ContextFragment]]:
    _import_everything()
    return [c for c in all_fragment_classes() if c.__module__.startswith("steerable_agent_runtime.")]


def test_the_library_defines_fragments_to_check():
    names = {c.__name__ for c in _library_fragments()}
    assert {"CompactionThrashingReminder", "NotesFragment"} <= names


@pytest.mark.parametrize("cls", _library_fragments(), ids=lambda c: c.__qualname__)
def test_every_fragment_class_is_on_the_cap_ladder(cls):
    assert 0 < cls.max_tokens <= CEILING_TOKENS
    if cls.max_tokens > DEFAULT_MAX_TOKENS:
        assert (cls.review_note or "").strip(), f"{cls.__qualname__} is above {DEFAULT_MAX_TOKENS} without a review"
    assert cls.start_marker and cls.end_marker and cls.content_kind
    check_ladder(cls)


def test_the_gate_catches_a_cap_raised_after_definition():
    class Sneaky(ContextFragment):
        start_marker, end_marker = "<s>", "</s>"

    Sneaky.max_tokens = 50_000
    with pytest.raises(ValueError, match="max_tokens"):
        check_ladder(Sneaky)
