"""check: find everything wrong with a store (the job in :mod:`.job`, its passes beside it)."""

from .job import DEFAULT_WAL_THRESHOLD, CheckReport, check
from .server import check_url

__all__ = ["DEFAULT_WAL_THRESHOLD", "CheckReport", "check", "check_url"]
