"""Engines: the interface the commands call (:mod:`.engines`), the stages both engines run as functions from arrays
to arrays (:mod:`.stages`), the local engine that runs them in this process and in workers forked from it
(:mod:`.local`), and the Dask engine that maps them over partitions on a cluster (:mod:`.dask`)."""
