"""The round skeleton: the one async generator of a turn.

Every event of a turn passes through this one generator layer: the common round (its events, the
provider's stream, a single tool call) runs inline here, with the turn's state in locals and in
:class:`.turn.Turn`; a step that yields nothing while it works is a coroutine returning its events
(:mod:`.turn`, :class:`.toolbatch.ToolBatch`), called only when it has work: a guard, a hook, a
retry, a steer, a cancel, several tool calls. What does not change within a turn (tracing, the
text sink, the storage, the config's limits) is read once per turn.

A round: take steer messages -> cancel check -> max_rounds / budget_tokens guard ->
``hooks.pre_step`` (reject, rewrite, appends) -> a pending ``request_compact`` -> flush to the
record -> stream the provider (retries through ``hooks.on_request_error``) -> the assistant
message; with tool calls: flush (so a crash mid-tool leaves a call resume can repair), run them,
flush -> next round; without: ``hooks.before_completion`` -> flush -> completion.

An attempt streams the provider with ``async for``: an exception raised while the provider's
iterator is asked for its next chunk is the attempt's (``pulling``), anything raised by the
loop's own step on a chunk or thrown in at a yield propagates. The reply and a lone tool result
are flushed, when the storage offers it, with the values they were just built from
(``RecordWriter.append_built``). Events are made as LoopEvent's own ``__init__`` makes them,
without the call (events.py).
"""

from __future__ import annotations

from asyncio import get_running_loop
from types import AsyncGeneratorType
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from ..llm.cancel import CancelSignal
from ..llm.types import LLMUsage
from ..models import AgentSession, LLMMessage, ToolCall
from ..tools import ToolResult
from .events import LoopEvent
from .hooks import LoopContext
from .messages import tool_message
from .record import RecordWriter
from .request import (SinkCancel, close_stream, deltas, error_data, provider_sink, response_data, span_attrs,
                      span_start)
from .spans import null_run
from .toolbatch import ToolBatch
from .turn import Turn, default_session, open_transcript, sunk

_new = object.__new__

if TYPE_CHECKING:
    from .core import CoreLoop


async def turn_events(loop: CoreLoop, messages: list[LLMMessage], chat_id: str, session: AgentSession | None,
                      resume_id: str | None) -> AsyncIterator[LoopEvent]:
    """The events of one turn of ``loop`` (see the module docstring; CoreLoop.run / resume)."""
    loop._running = True
    loop._event_loop = get_running_loop()
    signal = loop._signal = CancelSignal()  # cancel() sets it: a provider's wait on the network ends at once
    try:
        record_id = resume_id or loop.record_id or chat_id
        writer = RecordWriter(loop.storage, record_id)
        recording = loop.storage is not None
        append_now, append_built = writer.append_now, writer.append_built
        if recording or resume_id is not None:
            transcript = await open_transcript(loop.storage, writer, messages, resume_id)
        else:
            transcript = messages  # a run without a record: run() made this list
        ctx = LoopContext(chat_id=chat_id, record_id=record_id, cancel=signal)
        config = loop.config
        batch = loop._batch = ToolBatch(loop.tools, config, loop.hooks, loop.approver, loop._cancel)
        tracing = loop.recorder.run(session or default_session(chat_id)) if loop.recorder else null_run()
        async with tracing as run:
            loop.trace_id = run.trace_id
            t = Turn(loop, transcript, writer, ctx, batch, run)
            loop.transcript = transcript
            provider, tools, sink = loop.provider, loop.tools, loop.text_sink
            options = config.request_options()
            options["cancel"] = signal  # (providers ignore options they do not know)
            cancel_only = len(options) == 1  # the commonest options: passed as a keyword, not unpacked
            traced = run.trace_id is not None
            span_cm = span = None  # an attempt's llm.request span (when traced)
            max_rounds, budget, max_tool_errors = config.max_rounds, config.budget_tokens, config.max_tool_errors
            try:
                while True:
                    # stage_start and each steer event go out before the next step runs, so a
                    # cancel() or steer() made on seeing them acts on this round
                    rnd = t.round
                    event = _new(LoopEvent)  # LoopEvent(kind, data), built as its __init__ builds it (module doc)
                    event.kind = "stage_start"
                    event.data = {"round": rnd}
                    yield event
                    if loop._steer:
                        for text in loop._take_steer():
                            transcript.append(LLMMessage(role="user", content=text))
                            yield LoopEvent("steer", {"content": text})
                    if (loop._cancel or rnd >= max_rounds or t.pre_step or loop._compact
                            or (budget is not None and t.usage.total_tokens >= budget)):
                        for event in await t.open_round():  # a guard or a hook has work to do
                            yield event
                        if t.stopped:
                            return
                    else:
                        ctx.round_index = rnd
                    if recording and len(transcript) > writer.flushed and not writer.flush_now(transcript):
                        await writer.flush(transcript)
                    reply_calls: list[ToolCall] = []  # the calls of this round's reply
                    attempt = 1
                    while True:  # the attempts of this round's request
                        ctx.attempt = attempt
                        event = _new(LoopEvent)
                        event.kind = "llm_request"
                        event.data = {"round": rnd, "attempt": attempt}
                        yield event
                        text: list[str] = []
                        calls: list[ToolCall] = []
                        usage = finish = error = None
                        cancelled = False
                        if traced:  # the llm.request span, entered by hand: an untraced attempt enters none
                            span_cm = run.llm_request(span_start(provider, rnd), attempt=attempt)
                            span = await span_cm.__aenter__()
                            raised = False
                        try:
                            try:
                                described = tools.describe() or None
                                if sink is not None:
                                    # a provider taking the text_sink option hands it text-only chunks
                                    # as strings (request.provider_sink); the others ignore it
                                    stream = provider.stream(list(transcript), tools=described, **options,
                                                             text_sink=provider_sink(text, sink, loop._cancelled))
                                elif cancel_only:
                                    stream = provider.stream(list(transcript), tools=described, cancel=signal)
                                elif options:
                                    stream = provider.stream(list(transcript), tools=described, **options)
                                else:
                                    stream = provider.stream(list(transcript), tools=described)
                                stream = stream.__aiter__()
                                stream.__anext__  # (an iterator without it: the attempt's error, as before)
                            except Exception as exc:  # noqa: BLE001 - on_request_error decides
                                error, stream = exc, None
                            try:
                                if stream is not None:
                                    pulling = True  # an exception while True is the provider's (its __anext__)
                                    try:
                                        async for chunk in stream:
                                            pulling = False
                                            content = chunk.content_delta
                                            if (content and not chunk.reasoning_delta and chunk.tool_call is None
                                                    and chunk.usage is None and chunk.finish_reason is None):
                                                text.append(content)  # most chunks: text and nothing else
                                                if sink is None:
                                                    event = _new(LoopEvent)
                                                    event.kind = "content_delta"
                                                    event.data = {"delta": content}
                                                    yield event
                                                else:
                                                    try:
                                                        sink("content_delta", content)
                                                    except Exception as exc:  # noqa: BLE001 - fails the attempt
                                                        error = exc
                                                        break
                                            else:
                                                if content or chunk.reasoning_delta:
                                                    events = deltas(chunk, text)
                                                    if sink is None:
                                                        for event in events:
                                                            yield event
                                                    elif (error := sunk(sink, events)) is not None:
                                                        break
                                                if chunk.tool_call is not None:
                                                    calls.append(chunk.tool_call)
                                                if chunk.usage is not None:
                                                    usage = chunk.usage
                                                if chunk.finish_reason is not None:
                                                    finish = chunk.finish_reason
                                            if loop._cancel:
                                                cancelled = True
                                                break
                                            pulling = True
                                    except SinkCancel:  # a cancel seen at a chunk given to the text_sink
                                        if not pulling:
                                            raise
                                        cancelled = True
                                    except Exception as exc:  # noqa: BLE001 - on_request_error decides
                                        if not pulling:  # the loop's own step (or one thrown in at a yield)
                                            raise
                                        error = exc
                            finally:
                                if stream is not None and not (type(stream) is AsyncGeneratorType
                                                               and stream.ag_frame is None):
                                    await close_stream(stream)
                            if span_cm is not None and span.span_id is not None:
                                span.set_attrs(span_attrs(error, usage, finish, cancelled))
                        except BaseException as exc:  # what `async with span_cm` does on the way out
                            raised = True
                            if span_cm is None or not await span_cm.__aexit__(type(exc), exc, exc.__traceback__):
                                raise
                        finally:
                            if span_cm is not None and not raised:
                                await span_cm.__aexit__(None, None, None)
                        if error is None:
                            if usage is not None and not cancelled:  # request.response_data, inline
                                event = _new(LoopEvent)
                                event.kind = "llm_response"
                                event.data = {"round": rnd, "attempt": attempt, "promptTokens": usage.prompt_tokens,
                                              "cachedPromptTokens": usage.cached_prompt_tokens,
                                              "completionTokens": usage.completion_tokens}
                                yield event
                            else:
                                yield LoopEvent("llm_response", response_data(rnd, attempt, usage, cancelled))
                            t.take_reply(text, calls, usage, finish, cancelled)
                            reply_calls = calls
                            break
                        yield LoopEvent("llm_response", error_data(rnd, attempt, error))
                        events, retry = await t.after_error(error)
                        for event in events:
                            yield event
                        if not retry:
                            break
                        attempt += 1
                    calls = reply_calls
                    if calls:  # (a failed request has none: the turn ends in t.settle)
                        if recording:  # the calls are in the record before any runs (writer.flush_now, inline)
                            flushed, reply = writer.flushed, t.reply
                            if (append_built is not None and t.built_reply and len(transcript) == flushed + 1
                                    and transcript[flushed] is reply):  # the reply alone, as built (record.py)
                                fields = reply.__dict__
                                done = append_built(record_id, "assistant", fields["content"], None, None,
                                                    fields["tool_calls"])
                            else:
                                done = (append_now is not None and len(transcript) > flushed
                                        and append_now(record_id, transcript[flushed:]))
                            if done:
                                writer.flushed = len(transcript)
                            else:
                                await writer.flush(transcript)
                        results: list[tuple[ToolCall, ToolResult]] = []
                        if len(calls) == 1 and not loop._cancel:
                            call = calls[0]
                            event = _new(LoopEvent)
                            event.kind = "tool_call_start"
                            event.data = {"id": call.id, "name": call.name, "arguments": call.arguments}
                            yield event
                            event = batch.single(call, ctx, run, results)
                            yield event if type(event) is LoopEvent else await event
                        else:
                            for group in batch.groups(calls):
                                if loop._cancel:
                                    for event in batch.answer_cancelled(group, ctx, results):
                                        yield event
                                    continue
                                for call in group:
                                    yield LoopEvent("tool_call_start", {"id": call.id, "name": call.name,
                                                                        "arguments": call.arguments})
                                for event in await batch.run_group(group, ctx, run, results):
                                    yield event
                        if len(results) == 1:
                            call, result = results[0]
                            call_id, name, content = call.id, call.name, result.to_content()
                            message = tool_message(call_id, name, content)
                            transcript.append(message)
                        else:
                            message = None
                            for call, result in results:
                                transcript.append(tool_message(call.id, call.name, result.to_content()))
                        if recording:  # (writer.flush_now, inline)
                            flushed = writer.flushed
                            if (append_built is not None and message is not None and len(transcript) == flushed + 1
                                    and transcript[flushed] is message and type(call_id) is str
                                    and type(name) is str and type(content) is str):  # the result alone, as built
                                done = append_built(record_id, "tool", content, call_id, name, None)
                            else:
                                done = (append_now is not None and len(transcript) > flushed
                                        and append_now(record_id, transcript[flushed:]))
                            if done:
                                writer.flushed = len(transcript)
                            else:
                                await writer.flush(transcript)
                        spent = t.round_usage
                        event = _new(LoopEvent)
                        event.kind = "stage_complete"
                        event.data = {"round": rnd, "usage": {  # LLMUsage.to_wire, inline
                            "promptTokens": spent.prompt_tokens, "completionTokens": spent.completion_tokens,
                            "totalTokens": spent.total_tokens, "cachedPromptTokens": spent.cached_prompt_tokens,
                            "cacheCreationTokens": spent.cache_creation_tokens} if type(spent) is LLMUsage
                            else spent.to_wire()}
                        yield event
                        if loop._cancel or batch.consecutive_errors >= max_tool_errors:
                            for event in await t.tool_guards():
                                yield event
                            if t.stopped:
                                return
                    else:
                        for event in await t.settle():
                            yield event
                        if t.stopped:
                            return
                    t.round = rnd + 1
            except GeneratorExit:
                if t.stopped:
                    # the turn had ended (its outcome set, its completion event built) and the
                    # consumer stopped reading at or after it: leave normally, so the trace keeps
                    # that outcome instead of "cancelled" (a generator may return on aclose)
                    return
                run.set_outcome("cancelled")
                raise
    finally:
        loop._running = False
        loop._cancel = False
        loop._cancel_event = None
        loop._batch = None
        loop._event_loop = None
        loop._signal = None
