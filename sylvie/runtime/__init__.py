"""What a rank runs on, in training and in partition-parallel evaluation alike: ``process_group`` (joining the other
ranks with every wait bounded; ``Context``), ``peer_watchdog`` (heartbeats, so that a frozen or lost peer is named
instead of waited for), ``rank_graph`` (a rank's part of the graph as one block with its halo exchange, for
full-neighbourhood passes) and ``freed_memory`` (freed memory handed back to the system).
"""
