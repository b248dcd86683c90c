"""Launching: starting a run's ranks and watching them, on one machine or many.

``torchrun`` (``sylvie launch``: the command line, standalone or under Slurm, and the ranks' placement),
``supervise`` (the first rank failure printed last; torchrun dies with its parent), ``process_tree``. The ranks'
side of a run is ``sylvie.runtime``.
"""
