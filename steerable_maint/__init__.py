"""steerable-maint: the command line of the maintenance and forensics toolkit."""

__all__: list[str] = []
