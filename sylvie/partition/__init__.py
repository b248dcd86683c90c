"""Partitioning (``sylvie partition``): ``stage`` assigns nodes to parts (``metis``, ``random_assign``), measures
the cut (``quality``) and writes one Arrow shard per part plus the manifest (``shard_writer``); ``shard_reader``
reads and verifies them (``shard_format``: the shard's columns and the replicated topology)."""
