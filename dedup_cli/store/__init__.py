"""The signature store: a directory of Parquet parts and a manifest, grown by sign runs and read as a snapshot
(docs/store-format.md)."""
