"""steerable-maint history DB CHAT [--resume] [--json]: a chat's record as stored, or what resume gives."""

from __future__ import annotations

import json

import click

from steerable_agent_runtime.maintenance import history, HistoryReport

from ..render import render_findings, run_job, stdout

_PREVIEW = 70


@click.command(help="Show a chat's history record read-only: every entry with its version, or with --resume "
                    "the transcript the app would resume from. Entries this build cannot read are shown as far "
                    "as possible and named. Exit: 0 all readable; 1 unreadable entries; 2 unknown chat or bad "
                    "arguments; 3 cannot run (not a store, newer schema).")
@click.argument("db", type=click.Path(path_type=str, readable=False))  # the library says why it cannot read
@click.argument("chat")
@click.option("--resume", is_flag=True, help="Show the transcript resume gives (newest checkpoint + tail).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON on stdout.")
def command(db: str, chat: str, resume: bool, as_json: bool) -> None:
    run_job(lambda progress: history(db, chat, resume=resume, progress=progress), as_json=as_json, render=_render)


def _preview(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= _PREVIEW else text[:_PREVIEW - 1] + "…"


def _content(entry: dict | None) -> str:
    if entry is None:
        return "(bytes not shown: not trustworthy)"
    message = entry.get("message")
    if isinstance(message, dict):
        return _preview(f"{message.get('role')}: {_preview(message.get('content'))}")
    if entry.get("type") == "compaction_boundary" and isinstance(entry.get("replacement"), list):
        figures = f"{entry.get('trigger')} {entry.get('preTokens')} -> {entry.get('postTokens')} tokens"
        return figures + f", {len(entry['replacement'])} message(s): " + _preview(entry["replacement"])
    for key in ("replacement", "messages"):
        if isinstance(entry.get(key), list):
            return _preview(f"{len(entry[key])} message(s): {_preview(entry[key])}")
    return _preview({k: v for k, v in entry.items() if k not in ("v", "type", "seq", "at")})


def _render(r: HistoryReport) -> None:
    since = f" from checkpoint seq {r.checkpoint_seq}" if r.resume and r.checkpoint_seq else ""
    stdout.print(f"record {r.record_id}: {len(r.entries)} entries{since}", markup=False, highlight=False)
    for e in r.entries:
        at = e.at[:19] + "Z" if isinstance(e.at, str) and len(e.at) > 19 else str(e.at)
        mark = "  " if e.readable else "[red]NO[/]"
        stdout.print(f"{mark} seq {e.seq:<5} v{e.v!s:<3} {e.type!s:<19} {at}  ", end="", highlight=False)
        stdout.print(_content(e.entry), markup=False, highlight=False)
    if r.resume:
        _render_transcript(r)
    render_findings(r.findings)


def _render_transcript(r: HistoryReport) -> None:
    stdout.print(f"resume transcript ({len(r.transcript or [])} messages):", markup=False)
    for message in r.transcript or []:
        stdout.print(f"  {message['role']}: {_preview(message.get('content'))}", markup=False, highlight=False)
    if r.resume_blocked_at is not None:
        stdout.print(f"[red]resume stops at seq {r.resume_blocked_at}[/]: the app cannot read that entry, so"
                     " its resume of this chat fails there")
