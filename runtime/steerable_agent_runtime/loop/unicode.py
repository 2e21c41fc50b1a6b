"""Text the record cannot store: lone surrogates in what the model or a hook produced.

A lone UTF-16 surrogate (``\\ud800``) is not a character: no storage can encode it, so a record
append holding one is refused whole (RecordFormatError). A model can send one (a JSON ``\\u``
escape in its stream), a host's hook can build one (a file name decoded with surrogateescape).
:func:`clean_message` gives the message with each lone surrogate replaced by U+FFFD in every
string it holds (content, parts, tool-call arguments, names, ids); :func:`has_lone_surrogate`
says whether a string holds one. Tool results never need it: ``ToolResult.to_content`` writes
a lone surrogate as its JSON escape.
"""

from __future__ import annotations


from ..models import LLMMessage, has_lone_surrogate, replace_lone_surrogates

__all__ = ["clean_message", "has_lone_surrogate"]

def clean_message(message: LLMMessage) -> LLMMessage:
    """``message`` with every lone surrogate replaced by U+FFFD (the same instance when it has none)."""
    wire = message.to_wire()
    cleaned = replace_lone_surrogates(wire)
    return message if cleaned == wire else LLMMessage.model_validate(cleaned)
