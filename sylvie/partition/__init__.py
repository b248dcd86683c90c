"""Partitioning (``sylvie partition``): ``stage`` assigns nodes to parts (``metis``: balance constraints and
METIS's multi-constraint k-way through ``metis_library``; ``random_assign``), measures the cut and the balance
(``quality``) and writes one Arrow shard per part plus the manifest (``shard_writer``); ``shard_reader``
reads and verifies them (``shard_format``: the shard's columns and the replicated topology)."""
