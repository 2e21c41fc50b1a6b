"""docs/providers.md's opening example runs as written against a real replay server on 127.0.0.1.

Only the two endpoints are rewritten (the Ollama URL, and a ``base_url`` for the Responses
provider, which would otherwise reach api.openai.com); every name, keyword and attribute the
example uses is the library's, so a rename in the API breaks this test instead of the reader.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

from tests.llm.streams import make_openai_streams as gen
from tests.replay_server import ReplayServer, Reply, split_events

DOC = Path(__file__).resolve().parents[2] / "docs" / "providers.md"
OLLAMA = 'base_url="http://127.0.0.1:11434/v1"'
OPENAI_KEY = 'api_key=os.environ["OPENAI_API_KEY"])'


def first_example() -> str:
    return re.search(r"```python\n(.*?)```", DOC.read_text(), re.S).group(1)


def test_the_opening_example_runs_as_written(monkeypatch):
    code = first_example()
    assert OLLAMA in code and OPENAI_KEY in code, "the example's endpoints moved: update this test"
    replies = [Reply(chunks=split_events(gen.chat_text("Four.").encode())),
               Reply(chunks=split_events(gen.responses_text(cached=1024).encode()))]
    with ReplayServer(replies) as server:
        code = code.replace(OLLAMA, f'base_url="{server.url}/v1"')
        code = code.replace(OPENAI_KEY, f'api_key=os.environ["OPENAI_API_KEY"], base_url="{server.url}/v1")')
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-docs")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, str(DOC), "exec"), {"__name__": "docs_example"})
        paths = [r.path for r in server.requests]
        bodies = [r.json() for r in server.requests]
    assert paths == ["/v1/chat/completions", "/v1/responses"]
    assert bodies[0]["model"] == "qwen2.5:7b" and bodies[0]["temperature"] == 0
    assert bodies[1]["model"] == "gpt-4.1-mini" and bodies[1]["max_output_tokens"] == 50
    assert server.requests[1].headers["authorization"] == "Bearer sk-test-docs"
    assert out.getvalue() == "Four.Lisbon is the capital of Portugal; it sits on the Tagus. 1240 1024\n"
