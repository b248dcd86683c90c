"""Training: process group set-up, local graphs, the full-graph trainer, checkpoints, metrics."""
