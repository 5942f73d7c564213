"""Linearizability: is there one order of a history's operations that a single correct copy
of the object would have produced?

The checker (:mod:`.checker`) cuts the history into calls, splits it by independent object
(:mod:`.independent`: Jepsen's independent keys, or a log's partitions), and asks the
Wing–Gong–Lowe search (:mod:`.wgl`) for a linearization against a sequential model
(:mod:`.models`), comparing values as EDN and JSON define them (:mod:`.values`).
:mod:`.synthetic` makes correct concurrent histories for its tests and benchmarks.
"""
