"""The sections of a run's configuration as checked-in classes: each knob with its Python type, default, one-line
description and bounds in place, so that an editor follows ``run.train.lr`` to its field.
``tests/test_config_schema.py`` keeps every field equal to its knob in the schema
(``sylvie/schema/config.schema.yaml``), which validates a config and defines the CLI flags. Build a section with
``sylvie.config.section``, which validates the values and applies presets.
"""
# The schema also carries what JSON Schema says beyond one knob (the items of a list, presets, ``oneOf``); the test
# compares type, enum, default, description, bounds and ``resumable``. A rule between knobs of one section is the
# section's ``__post_init__``; a rule between sections is a function of ``sylvie.config`` (``check_run``).
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Literal

from sylvie.errors import SylvieError

_BOUNDS = {"minimum": "minimum", "maximum": "maximum", "exclusive_minimum": "exclusiveMinimum",
           "exclusive_maximum": "exclusiveMaximum"}


class SectionRuleError(SylvieError):
    """Values of one section that the rules between its knobs refuse; the message names each knob in full
    (``train.boundary_sampling``), and ``sylvie.config.section`` prefixes where the section was given."""


def knob(default: Any, description: str, *, minimum: float | None = None, maximum: float | None = None,
         exclusive_minimum: float | None = None, exclusive_maximum: float | None = None,
         resumable: bool = False) -> Any:
    """A field of a section: its default, its one-line description and bounds (JSON Schema's words, in the field's
    metadata), and ``resumable``: whether it may change between a killed run and its rerun without starting afresh.
    A list or mapping default is copied for each instance."""
    given = {"minimum": minimum, "maximum": maximum, "exclusive_minimum": exclusive_minimum,
             "exclusive_maximum": exclusive_maximum}
    metadata = {"description": description, **{_BOUNDS[k]: v for k, v in given.items() if v is not None}}
    if resumable:
        metadata["resumable"] = True
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: copy.deepcopy(default), metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass(frozen=True)
class PartitionConfig:
    """The ``partition`` section: how the dataset is split into parts, one per training rank."""

    method: Literal["metis", "random"] = knob("metis", "partitioner")
    parts: int = knob(4, "number of partitions (= training processes)", minimum=1, maximum=2147483647)
    seed: int = knob(
        0,
        "partitioner seed (0 to 2^32-1; METIS gets seed + 1, since the C library it seeds takes 0 and 1 for the "
        "same seed, so 2^32-1 wraps to seed 0's partition)",
        minimum=0, maximum=4294967295)
    balance: Literal["auto", "full", "sampled"] = knob(
        "auto",
        "what METIS keeps within tolerance of the mean part (multi-constraint k-way). full: inner nodes, training "
        "nodes and edges (in-degree sum), what a full-graph rank's epoch grows with; sampled: SALIENT++'s four, "
        "training, validation and other nodes and degree; auto: the run's train.mode (sylvie partition alone: "
        "full). method random balances nodes in expectation only; the manifest records every constraint's max/mean "
        "either way")
    tolerance: float = knob(
        1.03,
        "every balance constraint of every part at most this times its mean over the parts (METIS's ubvec; 1.03 is "
        "METIS's default). A part may exceed it by its heaviest node's share, which METIS cannot split",
        exclusive_minimum=1, maximum=2)


@dataclass(frozen=True)
class ModelConfig:
    """The ``model`` section: the GNN's architecture and sizes (``sylvie.models.registry`` builds it)."""

    arch: Literal["gcn", "sage", "gat", "rgcn", "rgat"] = knob(
        "gcn",
        "the convolution of every relation (sage = GraphSAGE-mean), summed over a typed graph's relations; rgcn: "
        "R-GCN (a mean per relation, a weight per relation or bases, a self-loop weight), rgat: R-GAT (GAT per "
        "relation and a self-loop weight). Every architecture trains on every graph (a homogeneous graph is one "
        "node type and one relation)")
    num_bases: int | None = knob(
        None,
        "rgcn: each relation's weight a combination of this many shared bases (basis decomposition); null: a weight "
        "per relation",
        minimum=1)
    embedding_width: int | None = knob(
        None,
        "columns of the learnt embedding of a node type without features (null: the widest feature width of the "
        "graph's types)",
        minimum=1)
    hidden: int = knob(16, "hidden units per layer (per head for gat)", minimum=1, maximum=2147483647)
    layers: int = knob(2, "number of GNN layers", minimum=1, maximum=2147483647)
    dropout: float = knob(0.5, "dropout probability between layers", minimum=0, exclusive_maximum=1)
    heads: int = knob(4, "gat: attention heads in hidden layers", minimum=1, maximum=2147483647)
    self_loop: bool | None = knob(
        None,
        "add one self-loop edge per node, counted in the degrees (on a typed graph: in every relation within one "
        "node type); null: the architecture's own (gcn, sage, gat: yes; rgcn, rgat: no)")
    loop_weight: bool | None = knob(
        None,
        "a self-loop weight per node type in every layer (x_v W_loop[type], DGL's RelGraphConv self_loop); null: "
        "the architecture's own (rgcn, rgat: yes; gcn, sage, gat: no)")


@dataclass(frozen=True)
class TrainConfig:
    """The ``train`` section: the optimiser, the epochs and the run's safeguards (checkpoints, timeouts, divergence)."""

    mode: Literal["full", "sampled"] = knob(
        "full",
        "full: full-graph partition-parallel training (Sylvie: halo exchange per layer); sampled: minibatches of "
        "sampled neighbourhoods over the replicated topology, features partitioned and fetched from their owners, "
        "remote vertices cached (SALIENT++; see sampling and cache)")
    epochs: int = knob(
        200,
        "number of epochs (sampled: each a pass over every rank's training vertices)",
        minimum=1, resumable=True)
    lr: float = knob(0.01, "the optimiser's learning rate (after warm-up, before the schedule)", exclusive_minimum=0)
    weight_decay: float = knob(
        0.0,
        "the optimiser's weight decay (Adam: L2, added to the gradient; AdamW: decoupled); 0, as torch.optim's "
        "default, from a config and the command line alike (the default pipeline's node runs set 5e-4, as Kipf and "
        "Welling's GCN)",
        minimum=0)
    optimizer: str = knob(
        "Adam",
        "a torch.optim optimiser by class name (Adam, AdamW, SGD, RMSprop, ...), given lr, weight_decay and "
        "optimizer_args")
    optimizer_args: dict[str, Any] = knob(
        {},
        "more keyword arguments of the optimiser, e.g. {betas: [0.9, 0.98]} (Adam, AdamW) or {momentum: 0.9, "
        "nesterov: true} (SGD); on the command line as JSON")
    lr_schedule: str | None = knob(
        None,
        "a torch.optim.lr_scheduler schedule by class name, stepped once per epoch after the warm-up "
        "(CosineAnnealingLR, StepLR, ExponentialLR, MultiStepLR, PolynomialLR, ...); null: the lr stays")
    lr_schedule_args: dict[str, Any] = knob(
        {},
        "the schedule's keyword arguments, e.g. {step_size: 50, gamma: 0.5} (StepLR); CosineAnnealingLR's T_max and "
        "PolynomialLR's total_iters default to the epochs after the warm-up; on the command line as JSON")
    warmup_epochs: int = knob(
        0,
        "epochs of linear warm-up from warmup_start_factor x lr to lr (torch's LinearLR), before lr_schedule; 0 = "
        "none",
        minimum=0, maximum=2147483647)
    warmup_start_factor: float = knob(
        0.1,
        "the warm-up's first epoch trains at this times lr",
        exclusive_minimum=0, maximum=1)
    boundary_sampling: float = knob(
        1.0,
        "boundary-node sampling (BNS-GCN): share p of each part's halo (boundary) nodes kept per epoch, drawn "
        "afresh every epoch; the others and their edges drop out of that epoch's subgraph, so features and feature "
        "gradients travel only for the kept ones (bytes x p). 1 = off. Full-graph mode only (train.mode full); "
        "composes with comm.bits and comm.pipeline, not with comm.smoothing; evaluation uses the whole graph",
        exclusive_minimum=0, maximum=1)
    divergence_factor: float = knob(
        10,
        "stop training as diverged (no model.pt; failed.json, exit code 2) when the loss stays above this many "
        "times the first epoch's for divergence_patience epochs in a row; 0 = off, else above 1",
        minimum=0, resumable=True)
    divergence_patience: int = knob(
        5,
        "epochs in a row the loss must stay above divergence_factor x the first epoch's before training stops as "
        "diverged; 0 = off",
        minimum=0, resumable=True)
    seeds: list[int] = knob(
        [0],
        "one training run per seed, each seed once (0 to 2^32-1: dropout reseeds torch with seed x 1000003 + step, "
        "which must stay below 2^64)")
    checkpoint_every: int = knob(
        50,
        "save a resumable checkpoint every N epochs (0 = never)",
        minimum=0, resumable=True)
    log_every: int = knob(1, "log a line every N epochs on rank 0", minimum=1, resumable=True)
    eval_every: int = knob(
        1,
        "evaluate train/val/test accuracy (one fp32 forward with its halo exchange) every N epochs and after the "
        "last; the saved model is the best-validation one among evaluated epochs",
        minimum=1)
    device: Literal["auto", "cpu", "cuda"] = knob(
        "auto",
        "cuda (nccl) if available under auto, else cpu (gloo)",
        resumable=True)
    progress: bool = knob(True, "show a progress bar on a terminal", resumable=True)
    tensorboard: bool = knob(
        False,
        "also write each epoch's metrics as TensorBoard scalars in the run directory's tensorboard/ (rank 0; needs "
        "the tensorboard package: pip install 'sylvie[tensorboard]'); metrics.jsonl stays the record the report "
        "reads",
        resumable=True)
    timeout: float = knob(
        120,
        "seconds without a heartbeat from a peer (frozen, stopped, cut off) before the run fails naming it; a "
        "collective itself gives up after 1.25 x timeout + 5 s. Size it above the longest time one rank can keep "
        "the others waiting: its slowest epoch segment, rank 0 writing a checkpoint",
        minimum=5)
    startup_timeout: float = knob(
        60,
        "seconds a rank waits at start-up for every other rank to start (before they join the process group) before "
        "the run fails naming the ranks missing (frozen, stopped, never started); raise it if ranks start slowly (a "
        "busy machine or file system)",
        minimum=1, resumable=True)

    task: Literal["node", "link"] = knob(
        "node",
        "node: node classification (labels on nodes); link: link prediction, the dataset's edge split's pairs scored "
        "by link.decoder from the model's embeddings, against negatives (see link)")

    def __post_init__(self) -> None:
        """The rules between train's own knobs (with another section's: ``sylvie.config.check_run``)."""
        p = self.boundary_sampling
        if p < 1 and self.mode == "sampled":  # BNS samples the halo rows of full-graph training
            raise SectionRuleError(f"train.boundary_sampling is {p:g}, but boundary-node sampling is a setting of "
                                   f"full-graph training (train.mode full), which exchanges halo rows; train.mode "
                                   f"sampled has none to sample. Set train.boundary_sampling to 1 (the default) or "
                                   f"train.mode to full")
        factor = self.divergence_factor
        if 0 < factor <= 1:  # at or below 1 it would stop training whose loss falls
            raise SectionRuleError(f"train.divergence_factor {factor:g}: must be above 1 (training stops when the "
                                   f"loss stays above that many times the first epoch's), or 0 to turn the check off; "
                                   f"e.g. 10")


@dataclass(frozen=True)
class CommConfig:
    """The ``comm`` section: the halo exchange of full-graph training (bits, pipelining, staleness)."""

    bits: Literal[1, 2, 4, 8, 32] = knob(
        32,
        "bits per value of the halo features (forward) and feature gradients (backward) of layers >= 1, "
        "stochastically rounded per row; 32 = fp32. Layer-0 features are exchanged once, in fp32; evaluation "
        "exchanges in fp32")
    gradient_bits: Literal[0, 1, 2, 4, 8, 32] = knob(
        0,
        "bits per value of the halo feature gradients (backward) of layers >= 1, where they need more than the "
        "features: 0 = comm.bits. At 1 bit nearly every value of a gradient row rounds to the row's minimum or "
        "maximum, a noise that slows training where most rows are halo rows (typed graphs with learnt embeddings: "
        "docs/full-graph.md); 4 bits train as fast as fp32 gradients there")
    pipeline: bool = knob(
        False,
        "pipelined exchange: epoch t computes with the halo features and gradients received during epoch t-1 while "
        "its own exchange runs in the background; the first epoch is synchronous")
    staleness: int = knob(
        0,
        "Bounded Staleness Adaptor bound K (with pipeline): at least every K-th epoch is synchronous; 0 = no bound, "
        "1 = every epoch",
        minimum=0)
    staleness_policy: Literal["fixed", "adaptive"] = knob(
        "fixed",
        "fixed: synchronous only when the bound says so; adaptive: also when the boundary data changed by more than "
        "drift_tolerance over the last epoch")
    drift_tolerance: float = knob(
        0.1,
        "adaptive policy: relative per-epoch change of the boundary features (fp32, all ranks) above which the "
        "adaptor schedules a synchronous epoch",
        exclusive_minimum=0)
    smoothing: float = knob(
        0.0,
        "exponential smoothing of stale halo data (PipeGCN): used = s * previous used + (1 - s) * received; 0 = off",
        minimum=0, exclusive_maximum=1)


@dataclass(frozen=True)
class SamplingConfig:
    """The ``sampling`` section: minibatch sampling (SALIENT++, ``train.mode`` sampled); ``fanouts`` and
    ``batch_size`` also shape ``sylvie vip``."""

    fanouts: list[int | dict[str, int]] = knob(
        [10, 10],
        "neighbours sampled per layer, in DGL's order: the first for the input layer, the last next to the seeds; "
        "one per model layer. A typed graph samples each relation apart: a number is every relation's fanout, a map "
        "relation -> number (on the command line a JSON object) gives each relation its own and names every "
        "relation (by name, or src:name:dst where names repeat)")
    batch_size: int = knob(1024, "seed vertices per minibatch and rank", minimum=1, maximum=2147483647)
    prefetch: int = knob(
        2,
        "minibatches sampled and fetched ahead (a sampling thread with its own process group) while the current one "
        "computes; 0 = in line",
        minimum=0, resumable=True)
    remote_bits: Literal[1, 2, 4, 8, 16, 32] = knob(
        32,
        "width of feature rows fetched from their owners: 32 = fp32, 16 = fp16, 1-8 = the Low-bit Module's "
        "stochastic rounding per row; local and cached rows stay fp32")


@dataclass(frozen=True)
class CacheConfig:
    """The ``cache`` section: which remote vertices each rank caches at start-up in sampled training (SALIENT++)."""

    policy: Literal["vip", "simulation", "degree", "halo", "random", "none"] = knob(
        "vip",
        "vip: highest vertex inclusion probability for this part (SALIENT++); simulation: most accessed in 2 "
        "pre-sampled epochs (GNNLab); degree: highest out-degree (PaGraph); halo: 1-hop in-neighbours of local "
        "training vertices (DistDGL); random; none")
    alpha: float = knob(
        0.0,
        "replication factor: each rank caches up to alpha x (all nodes / parts) remote rows; 0 = no cache; with "
        "vip, degree or random, alpha = parts caches every row a minibatch can need (parts - 1 does when the parts "
        "are of equal size); halo never caches beyond the 1-hop halo, simulation beyond what pre-sampling saw",
        minimum=0)


@dataclass(frozen=True)
class FeaturesConfig:
    """The ``features`` section: where a rank keeps the feature rows of sampled training (the feature store,
    PyTorch-Direct): tiers, fastest first."""

    gpu_fraction: float = knob(
        0.0,
        "share of the rank's rows (hottest first: own rows by VIP, then cached rows) resident in GPU memory; the "
        "rest stay in host memory (no effect without a GPU)",
        minimum=0, maximum=1, resumable=True)
    zero_copy: Literal["auto", "on", "off"] = knob(
        "auto",
        "GPU threads read host-tier rows straight from page-locked host memory (PyTorch-Direct); off: the CPU "
        "gathers them into a pinned buffer that is copied over; auto: on exactly when there is a GPU; on without a "
        "GPU is an error",
        resumable=True)


@dataclass(frozen=True)
class LinkConfig:
    """The ``link`` section: link prediction (``train.task`` link): how pairs are scored, the loss, the negatives."""

    decoder: Literal["dot", "mlp", "distmult"] = knob(
        "dot",
        "a pair's score from its ends' embeddings. dot: their dot product; mlp: an MLP (model.hidden units, ReLU) on "
        "their elementwise product, as OGB's link predictor; distmult: sum of h_u * w_r * h_v with a learnt vector "
        "w_r per relation")
    loss: Literal["bce", "contrastive"] = knob(
        "bce",
        "bce: binary cross-entropy, each positive pair against 1 and each negative against 0, the mean over all; "
        "contrastive: softmax cross-entropy of each positive among itself and its negatives (InfoNCE, GraphStorm's "
        "contrastive loss), the mean over the positives")
    negatives: int = knob(
        1,
        "negative pairs per positive (k): the positive's source with k destinations drawn by negative_sampler",
        minimum=1, maximum=2147483647)
    negative_sampler: Literal["uniform", "local", "joint"] = knob(
        "uniform",
        "uniform: each negative destination drawn uniformly from the nodes (of the relation's destination type); "
        "local: from the rank's own nodes, so that no remote rows travel for them (GraphStorm's localjoint); joint: "
        "k destinations drawn once per batch, shared by its positives. Each a hash of the seed and epoch with the "
        "pair (uniform), the rank and pair (local) or the rank and batch (joint), so the same on any number of "
        "threads")
    pair_bits: Literal[1, 2, 4, 8, 32] = knob(
        32,
        "full-graph: width of the pair ends' embeddings fetched from the ranks that own them, and of the gradients "
        "sent back: 32 = fp32, 1-8 = the Low-bit Module's stochastic rounding per row")


@dataclass(frozen=True)
class EvaluateConfig:
    """The ``evaluate`` section: how the evaluate stage runs inference on a trained model (full precision, full
    neighbourhoods)."""

    mode: Literal["auto", "whole", "partitioned"] = knob(
        "auto",
        "whole: the whole graph in one process (the reference); partitioned: one rank per part, launched like "
        "training, halo rows exchanged in fp32 per layer; auto: partitioned when the dataset has more than "
        "partitioned_above nodes")
    partitioned_above: int = knob(
        5000000,
        "auto's threshold in nodes. Whole-graph inference holds every feature row, the graph and a layer's "
        "activations for every node in one process, so its memory grows with the nodes and a large graph cannot "
        "fit; below the threshold one process is leaner than P ranks on one machine, which hold halo rows twice "
        "(the measurements: benchmarks/records/2026-11-29_scale_2core-vm.md)",
        minimum=0)
