"""steerable-sidecar: the runtime as a child process of a desktop app, speaking
newline-delimited JSON-RPC 2.0 on stdin/stdout (see docs/sidecar.md).

``python -m steerable_agent_runtime.sidecar [--storage-path PATH] [--log-level L]``. The
method table and life cycle are in ``app``; the chat streams in ``streams``. This package
imports nothing heavy: the loop, httpx and the providers load when a stream needs them.
"""

__all__: list[str] = []  # the entry point is steerable_agent_runtime.sidecar.__main__:main
