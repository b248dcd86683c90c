"""Datasets: loaders for Planetoid, OGB and synthetic graphs, and the canonical on-disk graph format."""
