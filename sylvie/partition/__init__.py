"""Partitioning: node-to-part assignment (METIS, random) and Arrow shards with a manifest."""
