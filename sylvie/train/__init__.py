"""Training (``sylvie train``): one ``TrainingJob`` (``job``) run by every rank (``run``) under one loop (``loop``:
resume, epochs, best-validation weights, divergence, checkpoints), with one of two trainers behind one protocol
(``protocol``): ``fullgraph_trainer``, Sylvie's full-graph training with halo rows exchanged per layer, and
``sampled_trainer``, SALIENT++'s sampled minibatches. Both take the same optimisation step (``step``) and return one
``EpochRecord`` per epoch.
"""
# The full-graph trainer takes one step per epoch over the rank's whole part, its halo rows exchanged by ``sylvie.comm``
# (fp32 or low-bit, synchronous or pipelined, boundary-sampled). The sampled trainer's minibatches (``sylvie.sampling``)
# take rows from the feature store (``sylvie.features``), prepared ahead by ``sampled_batches``. ``step``: seeding,
# forward, loss, backward, gradient all-reduce, the stop on a non-finite loss. Records: ``sylvie.formats.epoch_record``,
# ``metrics.jsonl``. ``checkpoint``, ``run_lock`` and ``log_line`` serve the loop; ``optimiser`` builds the
# ``torch.optim`` optimiser and lr schedule the config names.
