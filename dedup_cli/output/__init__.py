"""Output: the records find reports and their writers (JSON Lines, TSV, CSV, Parquet), and the text of the
summaries and reports the commands print."""
