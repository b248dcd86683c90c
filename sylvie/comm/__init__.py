"""Communication between ranks (Sylvie's side of training). Knows nothing of models.

- ``halo_plan``: per peer, which inner rows to send and where received rows go; derived once from the shards.
- ``halo_exchange``: a layer's halo rows forward and their gradients backward, fresh or one epoch stale
  (``halo_rows``, ``halo_wire``, ``stale_halo``), with the epoch's account; ``boundary_drift`` measures how far
  stale rows are from fresh ones.
- ``staleness``: the Bounded Staleness Adaptor (which epochs are synchronous); ``boundary_sampling``: BNS-GCN's
  per-epoch sample of the halo rows.
- ``lowbit``: the Low-bit Module (1/2/4/8-bit stochastic quantization; numba CPU and numba-cuda kernels).
- ``remote_rows``: rows fetched by id from their owners (sampled training); ``collective``: the all-reduce and
  all-to-all these use; ``stats``: bytes and seconds.
- ``gather_cpu``: the row-gather kernel (numba): an owner's rows for the wire, and the feature store's host tier.
"""
