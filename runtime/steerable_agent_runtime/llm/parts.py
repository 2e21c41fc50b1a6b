"""Message content parts, read once for every provider.

``LLMMessage.content`` is a string or a list of parts in OpenAI chat form: ``{"type": "text",
"text"}`` and ``{"type": "image_url", "image_url": {"url", "detail"?}}`` (the url an https URL
or a ``data:<mime>;base64,<data>`` URL). Also read: Responses' ``input_text``/``output_text``/
``input_image`` and a neutral ``{"type": "image", "url" | ("data", "mime_type")}``. Each
provider turns the :class:`TextPart`/:class:`ImagePart` list into its own wire form. A part of
another type raises :class:`~.errors.ProviderConfigError` naming it; nothing is sent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import ProviderConfigError

_TEXT_TYPES = frozenset({"text", "input_text", "output_text"})
_IMAGE_TYPES = frozenset({"image_url", "input_image", "image"})


@dataclass(frozen=True, slots=True)
class TextPart:
    text: str


@dataclass(frozen=True, slots=True)
class ImagePart:
    """An image by URL, or inline as base64 ``data`` with its ``mime_type``."""

    url: str | None = None
    data: str | None = None
    mime_type: str | None = None
    detail: str | None = None

    def as_url(self) -> str:
        """An https URL or a data URL (what the OpenAI wires take)."""
        if self.url is not None:
            return self.url
        return f"data:{self.mime_type or 'image/png'};base64,{self.data}"


Part = TextPart | ImagePart


def parse_parts(content: str | list[dict[str, Any]] | None, *, provider: str) -> list[Part]:
    """``content`` as parts (a string is one text part, None none)."""
    if content is None:
        return []
    if isinstance(content, str):
        return [TextPart(content)]
    return [_part(raw, provider) for raw in content]


def text_of(content: str | list[dict[str, Any]] | None, *, provider: str) -> str:
    """The text of ``content`` (text parts joined; raises when it holds an image)."""
    if isinstance(content, str) or content is None:
        return content or ""
    out = []
    for part in parse_parts(content, provider=provider):
        if isinstance(part, ImagePart):
            raise ProviderConfigError(f"{provider}: an image part where only text is accepted",
                                      provider=provider, hint="send images in user messages only")
        out.append(part.text)
    return "".join(out)


def _part(raw: Any, provider: str) -> Part:
    kind = raw.get("type") if isinstance(raw, dict) else None
    if kind in _TEXT_TYPES and isinstance(raw.get("text"), str):
        return TextPart(raw["text"])
    if kind in _IMAGE_TYPES:
        image = _image(raw)
        if image is not None:
            return image
    raise ProviderConfigError(f"{provider}: content part of type {kind!r} is not supported", provider=provider,
                              hint='use {"type": "text", "text": ...} or {"type": "image_url", "image_url": {"url": ...}}')


def _image(raw: dict[str, Any]) -> ImagePart | None:
    ref = raw.get("image_url", raw.get("url"))
    detail = raw.get("detail")
    if isinstance(ref, dict):
        detail = ref.get("detail", detail)
        ref = ref.get("url")
    if isinstance(ref, str) and ref:
        if ref.startswith("data:") and ";base64," in ref:
            head, data = ref[5:].split(";base64,", 1)
            return ImagePart(data=data, mime_type=head or None, detail=detail)
        return ImagePart(url=ref, detail=detail)
    data = raw.get("data")
    if isinstance(data, str) and data:
        return ImagePart(data=data, mime_type=raw.get("mime_type") or raw.get("media_type"), detail=detail)
    return None
