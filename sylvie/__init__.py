"""Sylvie: distributed GNN training on partitioned graphs.

Stages in the order data flows (``sylvie`` subcommands, ``cli``): ``data`` -> ``partition`` ->
``sampling.vip_stage`` -> ``train`` -> ``evaluate`` -> ``report``. A rank uses ``runtime``, ``comm`` (Sylvie),
``sampling`` and ``features`` (SALIENT++, PyTorch-Direct) and ``models``; ``launch`` starts ranks; ``formats`` owns
the files stages hand each other; ``bench`` emulates a cluster.
"""
__version__ = "0.1.0"
