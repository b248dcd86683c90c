"""What a rank runs on, in training and in partition-parallel evaluation alike.

- ``process_group``: joining the other ranks (gloo on CPU, nccl on GPU) with every wait bounded; ``Context``.
- ``peer_watchdog``: heartbeats between ranks, so that a frozen or lost peer is named instead of waited for.
- ``rank_graph``: a rank's part of the graph as one block (inner rows + 1-hop halo rows) with its halo exchange,
  for full-neighbourhood passes: full-graph training's forward and every evaluation.
- ``freed_memory``: memory a full-graph rank frees goes back to the system (glibc; the launcher preloads tcmalloc
  where it is installed: ``launch/allocator.py``).
"""
