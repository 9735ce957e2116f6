"""dedup: near-duplicate detection with b-bit minwise hashing and LSH banding."""

__version__ = "0.1.0"
