"""Engines: the stages of sign and find as functions from arrays to arrays, and the local engine that runs
them in this process (and its workers); a distributed engine maps the same stages over partitions."""
