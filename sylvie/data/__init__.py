"""Datasets: every source a graph comes from, and the canonical on-disk graph they all become (``graph``).

``registry`` (which loader builds which dataset), ``planetoid``, ``ogb``, ``synthetic`` and its shaped presets; a
user's own graph through ``files_source`` or ``dgl_file``, both ending in ``own_graph``; ``export``; ``edge_form``.
"""
