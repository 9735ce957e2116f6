"""The Dask engine: sign as tasks that each write a part of the store, find as array stages meeting in exchanges.

Only this package imports Dask (the ``dask`` extra); its stages call the same functions as the local engine, so
both give the same answers (docs/scaling.md, "The Dask engine").
"""
