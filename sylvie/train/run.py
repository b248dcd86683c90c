"""The train stage on one rank (``TrainingRun``): check the job's inputs, join the other ranks, build the trainer of
the job's mode (``build_trainer``), run the loop (``train/loop.py``), and on rank 0 write ``model.pt`` and
``metrics.jsonl``."""
from __future__ import annotations

import contextlib
import dataclasses
import os

import torch

from sylvie.config import check_run
from sylvie.errors import SylvieError
from sylvie.features.tiered_rows import check_store_options
from sylvie.formats.epoch_record import write_metrics
from sylvie.formats.model_file import BY_LAST_EPOCH, ModelFile, save_model
from sylvie.formats.partition_manifest import graph_layout, read_manifest
from sylvie.formats.run_failure import clear_run_failure
from sylvie.formats.vip_file import minibatch_seeds, read_vip
from sylvie.graph_types import GraphTypes
from sylvie.output_dir import RUN, check_replaceable
from sylvie.partition.shard_reader import read_shard, read_topology
from sylvie.runtime.freed_memory import release_free_memory
from sylvie.runtime.peer_watchdog import collective_timeout
from sylvie.runtime.process_group import Context, one_rank_per_part, peers_watched
from sylvie.runtime.rank_pairs import RankPairs
from sylvie.train.checkpoint import run_identity, run_key
from sylvie.train.fullgraph_trainer import FullGraphTrainer
from sylvie.train.job import TrainingJob
from sylvie.train.loop import BestEpoch, EpochLoop, log_info, no_nodes
from sylvie.train.memory_need import check_training_fits
from sylvie.train.optimiser import check_optimiser
from sylvie.train.protocol import Trainer
from sylvie.train.run_lock import RunLock
from sylvie.train.sampled_trainer import SampledTrainer, check_sampled_graph
from sylvie.train.tensorboard_metrics import TensorBoardMetrics


class TrainingRun:
    """Training ``job`` on this rank, from its checked inputs to rank 0's ``model.pt`` and ``metrics.jsonl`` in
    ``job.out_dir``; every rank runs one. Constructing it checks the job's inputs before any rank waits for another;
    entering it holds, in one ``ExitStack``, what the run holds until it ends: the peer watchdog, rank 0's lock on
    ``out_dir/train.lock``, the process group, the trainer (``build_trainer``), rank 0's TensorBoard writer and the run
    loop (``EpochLoop``, which resumes)."""
    # Its driver (``run_training``, and ``sylvie train``'s handler):
    #
    #     with TrainingRun(job) as run:
    #         for epoch in run.loop:
    #             run.loop.end_epoch(run.trainer.epoch(epoch, evaluate=run.loop.evaluates(epoch)))
    #         summary = run.finish()
    #
    # Checkpoints go to ``out_dir/checkpoints/last.pt`` every ``checkpoint_every`` epochs; a restart of the same run
    # resumes from there. Training that diverges (a non-finite loss, or a loss that stays above ``divergence_factor`` x
    # the first epoch's) stops on every rank at the same epoch; rank 0 then writes ``failed.json`` and ``metrics.jsonl``
    # of the epochs run, no ``model.pt``.

    def __init__(self, job: TrainingJob):
        # the process group of ranks that train several runs one after another (``seeds_group``), which the caller
        # sets before entering; None: the ranks join one of their own for this run
        self.group: Context | None = None
        check_run(job.model, job.train, job.comm, job.sampling, job.link, where="sylvie train options")
        check_optimiser(job.train)
        inputs = (job.partition_dir,) + ((job.vip_dir,) if job.vip_dir else ())
        check_replaceable(job.out_dir, RUN, inputs=inputs)  # a run directory, or one to become it
        self.job, self.manifest = job, read_manifest(job.partition_dir)
        if job.sampled:  # before any rank waits for another or writes
            layout = graph_layout(self.manifest)
            check_sampled_graph(GraphTypes.from_json(layout["types"], f"{job.partition_dir}/manifest.json"),
                                job.sampling)
        check_training_fits(job.model, self.manifest, int(os.environ.get("RANK", 0)), job.sampled, job.train.device)
        self.configs = job.configs()

    def __enter__(self) -> TrainingRun:
        job, train, manifest = self.job, self.job.train, self.manifest
        with contextlib.ExitStack() as stack:
            # counted in and beating while this rank reads and checks its inputs, which takes long on a large graph
            watch = None if self.group else stack.enter_context(_watched(train))
            sampled = _sampled_inputs(job, manifest) if job.sampled else None
            if int(os.environ.get("RANK", 0)) == 0:  # before joining the others: a second run fails at once
                stack.enter_context(RunLock(job.out_dir))
            self.ctx = self.group or stack.enter_context(_joined(job, manifest, watch))
            # what the epochs hold, let go before the outputs are written (finish) or on an error
            self._epochs = stack.enter_context(contextlib.ExitStack())
            self.trainer = build_trainer(job, self.ctx, manifest, sampled)
            self._epochs.callback(self.trainer.close)
            release_free_memory()  # what set-up freed and the epochs would not reuse (runtime/freed_memory.py)
            board = TensorBoardMetrics(job.out_dir) if train.tensorboard and self.ctx.rank == 0 else None
            if board:
                self._epochs.callback(board.close)
            extra = {k: self.configs[k] for k in ("sampling", "cache", "features", "link") if k in self.configs}
            identity = run_identity(self.configs["model"], self.configs["train"], self.configs["comm"], manifest,
                                    extra)
            self.run_key = run_key(identity)
            self.loop = self._epochs.enter_context(EpochLoop(self.trainer, self.ctx.rank, job.out_dir, train,
                                                             identity, on_record=board.add if board else None))
            self._stack = stack.pop_all()
        return self

    def __exit__(self, *exc) -> bool:
        return self._stack.__exit__(*exc)

    def finish(self) -> dict | None:
        """After the last epoch: let go of the trainer and the TensorBoard writer; rank 0 writes ``model.pt`` (the
        best epoch's weights), ``metrics.jsonl`` and its log line, and returns the run's summary, the others None."""
        job, configs, manifest = self.job, self.configs, self.manifest
        trained = self.loop.trained()  # nothing trained: a SylvieError
        self._epochs.close()
        best = trained.best
        if self.ctx.rank != 0:
            return None
        records = [dataclasses.replace(r, run=self.run_key) for r in trained.records]
        summary = {"best_epoch": best.epoch, "best_val_acc": best.val_acc, "test_acc_at_best_val": best.test_acc,
                   "model_chosen_by": best.chosen_by, **self.trainer.summary(), "num_parts": self.ctx.world,
                   "run": self.run_key, "epochs_recorded": len(records)}
        save_model(job.out_dir / "model.pt", ModelFile(
            weights=best.weights, **{f"{k}_cfg": v for k, v in configs.items()}, in_feats=manifest["num_features"],
            num_classes=manifest["num_classes"], dataset_fingerprint=manifest["dataset_fingerprint"],
            summary=summary, graph_types=graph_layout(manifest)))
        write_metrics(job.out_dir, records)
        clear_run_failure(job.out_dir)  # an earlier attempt's record: this run finished
        log_info(f"{kept_line(best)}; wrote {job.out_dir / 'model.pt'}")
        return summary


@contextlib.contextmanager
def seeds_group(job: TrainingJob, manifest: dict):
    """The process group the runs of one launch share, trained one after another (the seeds of a run: ``job`` is the
    first, the others differ in seed and directory alone; ``manifest`` its partition's), each in a ``TrainingRun``
    given it: one start-up and one join for them all. Yields the ``Context``."""
    with _watched(job.train) as watch, _joined(job, manifest, watch) as ctx:
        yield ctx


def _watched(train):
    """This rank counted in and beating (``peers_watched``) under the run's train section's bounds."""
    return peers_watched(train.timeout, "train", train.startup_timeout)


def _joined(job: TrainingJob, manifest: dict, watch):
    """The ranks of ``job``'s partition joined (``one_rank_per_part``), watched by ``watch``. A full-graph rank's
    tensors span its part, so the blocks it frees go back to the system at once (``part_sized_memory``)."""
    train = job.train
    return one_rank_per_part(train.device, train.timeout, manifest["num_parts"], job.partition_dir,
                             startup_timeout_s=train.startup_timeout, watchdog=watch,
                             part_sized_memory=not job.sampled)


def run_training(job: TrainingJob) -> dict | None:
    """Train ``job`` (every rank calls it); rank 0 writes ``model.pt`` and ``metrics.jsonl`` into ``job.out_dir``
    and returns the run's summary, the other ranks None (``TrainingRun``)."""
    with TrainingRun(job) as run:
        for epoch in run.loop:
            run.loop.end_epoch(run.trainer.epoch(epoch, evaluate=run.loop.evaluates(epoch)))
        return run.finish()


def build_trainer(job: TrainingJob, ctx: Context, manifest: dict, sampled=None) -> Trainer:
    """The trainer of ``job``'s mode on this rank (``ctx``), over its shard of the partition: the full-graph trainer,
    or the sampled one with ``sampled``, the topology and this rank's VIP (``_sampled_inputs``). The trainers copy
    what they keep: the shard is unmapped on return, so that the pages set-up read (the whole file, for its checksum)
    do not stay in this rank's memory for the whole run."""
    train, shard = job.train, read_shard(job.partition_dir, ctx.rank, manifest)
    pairs = RankPairs(ctx, job.partition_dir, manifest, shard, job.link, job.seed) if train.task == "link" else None
    if sampled:
        topology, vip = sampled
        return SampledTrainer(ctx, shard, topology, job.model, train, job.sampling, job.cache, job.seed, vip,
                              timeout=collective_timeout(train.timeout), features=job.features, pairs=pairs,
                              link=job.link)
    return FullGraphTrainer(ctx, shard, job.model, train, job.comm, job.seed, pairs, job.link)


def kept_line(best: BestEpoch) -> str:
    """The log's line on the model the run keeps, and why that one."""
    test = "n/a (no test nodes)" if no_nodes(best.test_acc) else f"{best.test_acc:.4f}"
    if best.chosen_by == BY_LAST_EPOCH:
        return f"no validation nodes: kept the last epoch's model (epoch {best.epoch + 1}), test {test}"
    return f"best val {best.val_acc:.4f} at epoch {best.epoch + 1}, test {test}"


def _sampled_inputs(job: TrainingJob, manifest: dict):
    """A sampled run's topology and this rank's VIP (or None), checked before any rank waits for another."""
    topology = read_topology(job.partition_dir, manifest)
    cuda = job.train.device == "cuda" or (job.train.device == "auto" and torch.cuda.is_available())
    check_store_options(job.features.gpu_fraction, job.features.zero_copy, cuda)
    if job.vip_dir is None and job.cache.policy == "vip" and job.cache.alpha > 0:
        raise SylvieError("cache.policy vip needs the VIP analysis: pass --vip DIR, written by `sylvie vip "
                          f"{job.partition_dir} --out DIR`, or choose another cache.policy")
    vip = None
    if job.vip_dir:
        vip = read_vip(job.vip_dir, int(os.environ.get("RANK", 0)), manifest["checksum"], job.sampling.fanouts,
                       job.sampling.batch_size, minibatch_seeds(job.train.task, job.link))
    return topology, vip
