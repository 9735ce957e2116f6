"""Groups: accepted pairs (and triples) turned into groups, each with its weakest link and representative."""
