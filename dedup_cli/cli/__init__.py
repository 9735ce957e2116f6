"""The command line, one module per command; :mod:`dedup_cli.cli` gathers them into ``dedup``."""
