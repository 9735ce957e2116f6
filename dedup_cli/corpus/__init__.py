"""Writing a corpus back: each input source's kept records in its own format (``dedup filter``)."""
