"""ContextFragment: markers, render, the cap ladder at class creation, degradation."""

from __future__ import annotations

import pytest
from steerable_agent_runtime.compaction import estimate_text_tokens
from steerable_agent_runtime.context import TRUNCATION_NOTICE, ContextFragment
from steerable_agent_runtime.errors import ConfigValueError


class Memo(ContextFragment):
    content_kind = "memo"
    start_marker = "<memo>\n"
    end_marker = "\n</memo>"
    max_tokens = 50


def test_render_wraps_the_content_in_its_markers():
    fragment = Memo("remember the milk")
    assert fragment.render() == "<memo>\nremember the milk\n</memo>"
    assert not fragment.truncated
    message = fragment.to_message()
    assert (message.role, message.content) == ("user", fragment.render())
    assert Memo.recognises(message.content) and not Memo.recognises("remember the milk")


def test_content_over_the_cap_is_cut_to_the_cap_and_ends_with_the_notice():
    fragment = Memo("word " * 400)
    text = fragment.render()
    assert fragment.truncated
    assert estimate_text_tokens(text) <= 50
    assert text.startswith("<memo>\nword word") and text.endswith(TRUNCATION_NOTICE + "\n</memo>")


def test_cut_is_as_long_as_the_cap_allows():
    fragment = Memo("a" * 1000)
    body = fragment.render()[len("<memo>\n"):-len(TRUNCATION_NOTICE + "\n</memo>")]
    frame = "<memo>\n" + TRUNCATION_NOTICE + "\n</memo>"
    assert estimate_text_tokens(frame + body) <= 50 < estimate_text_tokens(frame + body + "aaaa")


def test_cjk_content_is_cut_by_its_heavier_weight():
    text = Memo("漢" * 500).render()
    assert estimate_text_tokens(text) <= 50 and text.count("漢") < 80


def test_default_cap_is_1024():
    class Plain(ContextFragment):
        pass

    assert Plain.max_tokens == 1024


def test_a_cap_above_1024_needs_a_review_note():
    with pytest.raises(ConfigValueError, match="max_tokens.*review_note") as caught:
        class Big(ContextFragment):
            max_tokens = 2048
    assert isinstance(caught.value, ValueError) and caught.value.parameter == "max_tokens"

    class Reviewed(ContextFragment):
        max_tokens = 2048
        review_note = "a reviewed payload"

    assert Reviewed.max_tokens == 2048


def test_no_cap_above_10000_even_with_a_review_note():
    with pytest.raises(ValueError, match="10,000"):
        class Huge(ContextFragment):
            max_tokens = 10_001
            review_note = "please"


def test_markers_are_required():
    with pytest.raises(ValueError, match="start_marker"):
        class Unmarked(ContextFragment):
            start_marker = ""


def test_an_unknown_role_is_refused():
    with pytest.raises(ValueError, match="role"):
        class Odd(ContextFragment):
            role = "narrator"
