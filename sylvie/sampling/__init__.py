"""Sampled minibatches (SALIENT++'s side of training): which vertices a minibatch touches, and when.

``neighbor_sampler`` (minibatches and their blocks, every draw a function of the minibatch, so any thread count
draws the same), ``neighbor_picks`` (the parallel draw), ``sampled_blocks`` (the blocks models take), ``pipeline``
(the sampling thread), ``vip`` and ``vip_stage`` (``sylvie vip``). Where rows come from is ``sylvie.features``.
"""
