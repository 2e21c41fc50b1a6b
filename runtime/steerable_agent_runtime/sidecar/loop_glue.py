"""The one place the sidecar touches CoreLoop: building it from a stream's params, and
choosing ``run`` or ``resume``. Imported when the first stream starts (it pulls in the loop,
a provider and httpx)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from ..models import AgentSession
from ..storage import StorageAdapter
from .params import ChatStream
from .providers import build_provider, compaction_hooks


def make_loop(args: ChatStream, *, tools: Any, approver: Any, storage: StorageAdapter, recorder: Any,
              client: Any = None, text_sink: Any = None) -> Any:
    """A CoreLoop for one stream: the provider (on the shared HTTP ``client`` when given), the
    host's tools, the record, the recorder, and the relay's ``text_sink`` (when given, the
    deltas go to it instead of coming as events)."""
    from ..loop import CoreLoop, LoopConfig

    provider = build_provider(args.provider, client=client)
    config = LoopConfig(max_rounds=args.max_rounds or LoopConfig.max_rounds,
                        tool_timeout_s=args.tool_timeout_s + 1.0, temperature=args.temperature,
                        max_tokens=args.provider.max_tokens)
    return CoreLoop(provider, tools, config=config, hooks=compaction_hooks(args.max_context_tokens),
                    storage=storage, record_id=args.chat_id, recorder=recorder, approver=approver,
                    text_sink=text_sink)


def events_of(loop: Any, args: ChatStream, session: AgentSession) -> AsyncIterator[Any]:
    """The loop's events: ``resume`` from the record, or ``run`` on the given messages (the
    trace is recorded under ``session``). Raises UsageError at once for an empty transcript."""
    messages = list(args.messages)
    if args.resume:
        return loop.resume(args.chat_id, messages, chat_id=args.chat_id, session=session)
    return loop.run(messages, chat_id=args.chat_id, session=session)
