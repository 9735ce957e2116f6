"""Minwise hashing: k hash functions (kperm), one permutation in k bins (oph), permutations of a stated
universe (integer sets), and keeping and packing the lowest b bits of each value."""
