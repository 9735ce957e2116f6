"""The options of every command, their defaults and the one place they are validated (one module each).

Each command of the public API takes one frozen dataclass of options (:class:`SignOptions` with its
:class:`InputOptions`, :class:`FindOptions`, :class:`EstimateOptions`, :class:`PlanOptions`). Their defaults
are the command line's (``dedup_cli.cli`` reads them from here), and constructing one validates every value
that can be judged alone, before any I/O; what depends on a store (``bits`` against the stored bits, a
banding against ``num_perm``) is checked by :meth:`FindOptions.check_store` and
:meth:`EstimateOptions.check_store` from the store's manifest, before the store itself is read.

A refused value raises :class:`dedup_cli.errors.OptionError` naming the parameter; its message names options
as ``{parameter}`` so that the library says ``bits 9 exceeds …`` and the command line ``--bits 9 exceeds …``.

Only the standard library is imported here (and :mod:`dedup_cli.candidates.triple_recall`, which is pure
Python), so that ``dedup --help`` needs no numpy.
"""
