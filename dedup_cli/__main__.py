"""Allow ``python -m dedup_cli``."""

from dedup_cli.cli.main import cli

if __name__ == "__main__":
    cli(prog_name="dedup")
