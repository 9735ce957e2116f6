"""Allow ``python -m dedup_cli``."""

from dedup_cli.cli import cli

if __name__ == "__main__":
    cli(prog_name="dedup")
