"""Datasets: every source a graph comes from, and the canonical on-disk graph they all become (``graph``).

- ``registry``: which loader builds which dataset (``sylvie download``);
- ``planetoid``, ``ogb``, ``synthetic`` (+ ``nested_communities``): the published and the generated graphs;
- a graph of the user's own: ``files_source`` (``source: files``) reads ``table_files`` (Parquet, Arrow, CSV/TSV, .npy
  in chunks) through ``node_table`` and ``edge_files``; ``dgl_file`` (``source: dgl``); both end in ``own_graph``;
- ``export``: a canonical graph written back out as such files (``sylvie export``);
- ``edge_form``: whether an edge list is already in the sorted undirected form.
"""
