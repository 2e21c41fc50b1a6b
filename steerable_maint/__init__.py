"""steerable-maint: the command line of the maintenance and forensics toolkit."""
