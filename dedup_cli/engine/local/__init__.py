"""The local engine: every stage in this machine's processes, forked from the driver."""
