"""The retry policy for provider requests (used by ``loop.RetryHooks``).

3 attempts in all, a delay of 200 ms doubling up to 5 s with +-20 % jitter, a server's
Retry-After honoured up to 180 s (a longer one is not waited for: the request fails), and
only retryable kinds (transport, rate_limit, server) retried.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from .errors import LLMError


@dataclass
class RetryPolicy:
    """When and how long to wait before trying a failed request again."""

    max_attempts: int = 3
    base_delay_ms: int = 200
    max_delay_ms: int = 5_000
    jitter: float = 0.2
    max_retry_after_ms: int = 180_000
    rng: random.Random = field(default_factory=random.Random, repr=False)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if not 0 <= self.jitter < 1:
            raise ValueError("jitter must be in [0, 1)")

    def delay_ms(self, error: BaseException, attempt: int) -> int | None:
        """Milliseconds to wait before attempt ``attempt + 1``, or None for no retry.

        ``attempt`` is the 1-based number of the attempt that just failed. None when the
        error is not a retryable LLMError, the attempts are used up, or the server asks for
        a wait longer than ``max_retry_after_ms``.
        """
        if not isinstance(error, LLMError) or not error.retryable or attempt >= self.max_attempts:
            return None
        if error.retry_after_ms is not None:
            if error.retry_after_ms > self.max_retry_after_ms:
                return None
            return max(0, int(error.retry_after_ms))
        backoff = min(self.max_delay_ms, self.base_delay_ms * (2 ** (attempt - 1)))
        spread = backoff * self.jitter
        return max(0, int(round(backoff + self.rng.uniform(-spread, spread))))
