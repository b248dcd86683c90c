"""Communication between ranks (Sylvie's side of training); knows nothing of models.

``halo_plan`` (who sends which rows), ``halo_exchange`` (a layer's halo rows and gradients, fresh or stale, through
``halo_rows``, ``halo_wire``, ``stale_halo``), ``staleness`` and ``boundary_drift`` (when to sync),
``boundary_sampling`` (BNS-GCN), ``lowbit`` (the Low-bit Module), ``remote_rows`` (rows fetched by id),
``collective``, ``stats`` and ``gather_cpu``.
"""
