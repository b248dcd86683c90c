"""Launching: starting a run's ranks and watching them, on one machine or many.

- ``torchrun``: ``sylvie launch``: the torchrun command line (standalone, or one per node under Slurm with c10d
  rendezvous), the placement of ranks on nodes, CPUs and GPUs (``plan_geometry``), the Slurm resources of a job.
- ``supervise``: runs torchrun so that the first rank failure is printed last, and torchrun dies with its parent.
- ``process_tree``: processes that die with their parent, and whether a pid is still the process it was.

The ranks' side of a run (their process group, their watchdog) is ``sylvie.runtime``.
"""
