"""Training (``sylvie train``): one ``TrainingJob`` (``job``) run by every rank (``run``) under one loop (``loop``:
resume, epochs, best-validation weights, divergence, checkpoints) with one of two trainers behind one protocol
(``protocol``):

- ``fullgraph_trainer``: Sylvie's full-graph training, one step per epoch over the rank's whole part, halo rows
  exchanged per layer (``sylvie.comm``: fp32 or low-bit, synchronous or pipelined, boundary-sampled);
- ``sampled_trainer``: SALIENT++'s sampled minibatches (``sylvie.sampling``) with rows from the feature store
  (``sylvie.features``), prepared ahead by ``sampled_batches``.

Both take the same optimisation step (``step``: seeding, forward, loss, backward, gradient all-reduce, the stop on
a non-finite loss) and return one ``EpochRecord`` per epoch (``sylvie.formats.epoch_record``, ``metrics.jsonl``);
``checkpoint``, ``run_lock`` and ``log_line`` serve the loop; ``optimiser`` builds the ``torch.optim`` optimiser and
lr schedule the config names.
"""
