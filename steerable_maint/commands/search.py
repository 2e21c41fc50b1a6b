"""steerable-maint search DB QUERY [--limit N] [--order recent|relevance] [--json]: which sessions' chats mention QUERY."""

from __future__ import annotations

import click
from rich.table import Table

from steerable_agent_runtime.maintenance import SEARCH_ORDERS, search, SearchReport

from ..render import render_findings, run_job, stdout

_ORDER_TITLE = {"recent": "newest match first", "relevance": "best match first"}


@click.command(help="Find the sessions whose chat messages match QUERY (FTS5 syntax; chats with the newest "
                    "match first, or the best bm25 match with --order relevance), "
                    "read-only. Exit: 0 shown; 1 damaged rows were left out; 2 bad query or arguments; "
                    "3 cannot run (not a store, newer schema).")
@click.argument("db", type=click.Path(path_type=str, readable=False))  # the library says why it cannot read
@click.argument("query")
@click.option("--limit", type=int, default=20, show_default=True, help="At most this many chats.")
@click.option("--order", type=click.Choice(SEARCH_ORDERS), default="recent", show_default=True,
              help="recent: chats by their newest matching message; relevance: by bm25 over the newest 500 matches.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON on stdout.")
def command(db: str, query: str, limit: int, order: str, as_json: bool) -> None:
    run_job(lambda progress: search(db, query, limit=limit, order=order, progress=progress), as_json=as_json,
            render=_render)


def _render(r: SearchReport) -> None:
    if not r.chats:
        stdout.print(f"no chat matches {r.query!r} ({r.engine})", markup=False, highlight=False)
    else:
        table = Table(title=f"{len(r.chats)} chat(s) match {r.query!r} ({r.engine}, {_ORDER_TITLE[r.order]})")
        for column in ("#", "chat", "session", "user", "stage", "active"):
            table.add_column(column)
        table.add_column("updated", no_wrap=True, min_width=20)
        rank = {chat: i + 1 for i, chat in enumerate(r.chats)}
        for s in r.sessions:
            table.add_row(str(rank[s["chatId"]]), s["chatId"], s["sessionId"], s["userId"], s["currentStage"],
                          "yes" if s["isActive"] else "no", s["updatedAt"][:19] + "Z")
        stdout.print(table)
    render_findings(r.findings)
