"""Candidates: which pairs (and triples) are worth estimating — LSH banding, every pair, triangles."""
