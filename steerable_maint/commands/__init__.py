"""The subcommands of steerable-maint, one module each (registered in ``steerable_maint.cli``)."""

__all__: list[str] = []
