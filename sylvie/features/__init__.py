"""A rank's feature rows for sampled training, and where each minibatch row comes from (SALIENT++, PyTorch-Direct).

- ``cache_policy``: which remote vertices a rank caches (vip, simulation, degree, halo, random, none) within
  ``cache.alpha``, and the order of its own rows;
- ``rank_features``: own rows, cached rows, or a fetch from their owners, per minibatch, with the epoch's account;
- ``tiered_rows``: the rank's table of rows in tiers (device memory, pinned host memory read zero-copy, host memory);
- ``host_memory``; ``gather_cuda``: the zero-copy gather kernel (numba-cuda); the CPU one is ``sylvie.comm.gather_cpu``
  (the owner of a row gathers it for the wire too).
"""
