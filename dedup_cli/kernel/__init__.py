"""The compiled signing kernel (numba, the ``fast`` extra), and when a run uses it instead of numpy."""
