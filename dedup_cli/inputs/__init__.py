"""Inputs: finding files, reading documents (text, lines, JSON Lines, Parquet, integer sets) with stable ids
and locations, and re-reading them for exact checks."""
