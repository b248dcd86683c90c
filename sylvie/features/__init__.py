"""A rank's feature rows for sampled training, and where each minibatch row comes from (SALIENT++, PyTorch-Direct).

``cache_policy`` (which remote rows to cache), ``rank_features`` (own, cached or fetched rows per minibatch),
``tiered_rows`` (the table in device, zero-copy host and host tiers), ``host_memory``, ``gather_cuda`` (the
zero-copy kernel; the CPU's is ``sylvie.comm.gather_cpu``).
"""
