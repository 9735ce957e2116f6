"""One OpenBLAS thread for the command line, set before anything it runs imports numpy.

dedup multiplies no matrices, but numpy's OpenBLAS starts a thread per core when numpy is loaded, and each spins a
while waiting for work that never comes: CPU that grows with the cores (on 2 cores, 0.13 s of the 0.42 s of CPU a
one-document command takes). The command and the processes it starts load numpy with one thread; a value the user
set is kept. The library leaves the setting alone: a program that imports it may multiply matrices of its own.
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
