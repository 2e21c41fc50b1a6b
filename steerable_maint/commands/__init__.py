"""One module per steerable-maint subcommand, each exposing ``command``."""
