"""Estimates: the 2-way and 3-way b-bit estimators, their variances and intervals, the dense-set model, exact
resemblance, and the scoring of candidate pairs and triples with them (see docs/estimators.md)."""
