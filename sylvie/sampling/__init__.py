"""Sampled minibatches (SALIENT++'s side of training): which vertices a minibatch touches, and when.

- ``neighbor_sampler``: minibatches of a part's training vertices, sampled with DGL's neighbour sampler over the
  replicated topology, seeded per (run, epoch, rank, minibatch).
- ``pipeline``: the sampling thread that prepares minibatches ahead of the model, by a bounded depth.
- ``vip``: the vertex inclusion probability (VIP) of every vertex for a part's minibatches, the formula of
  SALIENT++; ``vip_stage``: ``sylvie vip``, VIP per part of a partition, written once and reused.

Where a minibatch's rows come from (own, cached, remote) is ``sylvie.features``.
"""
