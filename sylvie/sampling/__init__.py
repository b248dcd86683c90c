"""Sampled minibatches (SALIENT++'s side of training): which vertices a minibatch touches, and when.

- ``neighbor_sampler``: minibatches of a part's training vertices and their blocks, sampled over the replicated
  topology; every draw a function of (run, epoch, rank, minibatch, hop, vertex), so any number of threads draws
  the same minibatch. ``neighbor_picks``: the parallel, counter-based draw of each frontier vertex's in-neighbours
  (numba, GIL released); ``sampled_blocks``: the picks relabelled into the blocks (MFGs) the models take.
- ``pipeline``: the sampling thread that prepares minibatches ahead of the model, by a bounded depth.
- ``vip``: the vertex inclusion probability (VIP) of every vertex for a part's minibatches, the formula of
  SALIENT++; ``vip_stage``: ``sylvie vip``, VIP per part of a partition, written once and reused.

Where a minibatch's rows come from (own, cached, remote) is ``sylvie.features``.
"""
