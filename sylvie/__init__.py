"""Sylvie: distributed GNN training on partitioned graphs.

The pipeline's stages, in the order data flows (each a ``sylvie`` subcommand, ``cli``): ``data`` (download: one
canonical graph format) -> ``partition`` (METIS shards) -> ``sampling.vip_stage`` (VIP per part) -> ``train`` (one
rank per part) -> ``evaluate`` -> ``report``. What a rank of a run uses: ``runtime`` (its process group and part
of the graph), ``comm`` (Sylvie: halo exchange, Low-bit Module, staleness), ``sampling`` and ``features``
(SALIENT++: minibatches, VIP cache; PyTorch-Direct: the zero-copy feature store), ``models`` (GNN layers over
blocks). ``launch`` starts and supervises ranks; ``formats`` owns every file the stages hand each other; ``bench``
emulates a bandwidth-limited cluster. Base modules: ``config`` (schema-checked typed sections), ``errors``,
``atomic`` (atomic writes), ``output_dir`` (which directories a stage may replace), ``arrow_arrays``
(Arrow columns as numpy arrays without importing pandas).
"""
__version__ = "0.1.0"
