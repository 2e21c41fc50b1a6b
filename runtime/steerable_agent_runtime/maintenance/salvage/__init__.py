"""salvage: every decodable row of a store to JSONL, also when SQLite refuses the file."""

from .job import SalvageReport, TableTally, UnplacedRow, salvage

__all__ = ["SalvageReport", "TableTally", "UnplacedRow", "salvage"]
