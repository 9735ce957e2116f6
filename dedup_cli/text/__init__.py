"""Text to shingle sets: normalisation, tokens and their hashes, w-shingles."""
