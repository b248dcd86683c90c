"""The train stage on one rank: read its shard, train, checkpoint, write the model and metrics."""
from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import torch
from tqdm import tqdm

from sylvie.atomic import atomic_path, write_jsonl
from sylvie.config import as_dict, check_boundary_sampling, check_sampling, section
from sylvie.errors import SylvieError
from sylvie.features.store import check_store_options
from sylvie.formats.run_failure import RunFailure, clear_run_failure, write_run_failure
from sylvie.output_dir import RUN, check_replaceable
from sylvie.partition.shard_reader import read_manifest, read_shard, read_topology
from sylvie.runtime.peer_watchdog import collective_timeout
from sylvie.runtime.process_group import one_rank_per_part, peers_watched
from sylvie.sampling.vip import read_vip
from sylvie.train.checkpoint import load_checkpoint, run_identity, save_checkpoint
from sylvie.train.fullgraph_trainer import FullGraphTrainer
from sylvie.train.protocol import Trainer
from sylvie.train.run_lock import RunLock
from sylvie.train.sampled_trainer import SampledTrainer
from sylvie.train.step import TrainingDiverged, check_divergence, check_divergence_settings


def _log(msg: str) -> None:
    tqdm.write(msg, file=sys.stderr)


def run_training(partition_dir: str | Path, out_dir: str | Path, model, train, comm, seed: int, sampling=None,
                 cache=None, vip_dir: str | Path | None = None, features=None) -> dict | None:
    """Train on the partition under ``partition_dir`` with the config's typed ``model``, ``train`` and ``comm``
    sections and ``seed``; rank 0 writes ``model.pt`` and ``metrics.jsonl``. ``train.mode`` sampled also reads
    ``sampling`` and ``cache`` (defaults if None) and the VIP analysis in ``vip_dir`` (``sylvie vip``; needed by
    the vip cache policy, and orders the local rows).

    Rank 0 holds ``out_dir/train.lock`` for the whole run. Checkpoints go to ``out_dir/checkpoints/last.pt``
    every ``checkpoint_every`` epochs; a restart of the same run resumes from there. Training that diverges (a
    non-finite loss, or a loss that stays above ``divergence_factor`` x the first epoch's) stops on every rank at
    the same epoch; rank 0 then writes ``failed.json`` and ``metrics.jsonl`` of the epochs run, no ``model.pt``.
    """
    out_dir = Path(out_dir)
    sampling, cache, features = section("sampling", sampling), section("cache", cache), section("features", features)
    check_sampling(model, train, sampling, where="sylvie train")
    check_boundary_sampling(train, comm, where="sylvie train")
    check_divergence_settings(train)
    inputs = (partition_dir,) + ((vip_dir,) if vip_dir else ())
    check_replaceable(out_dir, RUN, inputs=inputs)  # a run directory, or one to become it
    manifest = read_manifest(partition_dir)
    # counted in and beating while this rank reads and checks its inputs, which takes long on a large graph
    with peers_watched(train.timeout, "train", train.startup_timeout) as watch:
        return _train_checked(partition_dir, out_dir, manifest, model, train, comm, seed, sampling, cache, vip_dir,
                              features, watch)


def _train_checked(partition_dir, out_dir: Path, manifest: dict, model, train, comm, seed: int, sampling, cache,
                   vip_dir, features, watch) -> dict | None:
    sampled = train.mode == "sampled"
    topology = read_topology(partition_dir, manifest) if sampled else None  # before anything starts: a clear error
    if sampled:  # the store's settings against the device the ranks will train on
        check_store_options(features.gpu_fraction, features.zero_copy,
                            train.device == "cuda" or (train.device == "auto" and torch.cuda.is_available()))
    if sampled and vip_dir is None and cache.policy == "vip" and cache.alpha > 0:
        raise SylvieError("cache.policy vip needs the VIP analysis: pass --vip DIR, written by `sylvie vip "
                          f"{partition_dir} --out DIR`, or choose another cache.policy")
    vip = None
    if sampled and vip_dir:  # each rank its own part's, checked before any rank waits for another
        vip = read_vip(vip_dir, int(os.environ.get("RANK", 0)), manifest["checksum"], sampling.fanouts,
                       sampling.batch_size)
    with contextlib.ExitStack() as stack:
        if int(os.environ.get("RANK", 0)) == 0:  # before joining the others: a second run fails at once
            stack.enter_context(RunLock(out_dir))
        return _train_locked(partition_dir, out_dir, manifest, model, train, comm, seed,
                             (sampling, cache, topology, vip, features) if sampled else None, watch)


def _train_locked(partition_dir, out_dir: Path, manifest: dict, model, train, comm, seed: int,
                  sampled, watch) -> dict | None:
    # as the files record them (model.pt, eval.json, the checkpoint's identity): plain dicts, the run's seed in train
    model_cfg, comm_cfg = as_dict(model), as_dict(comm)
    # a sampled run is shaped by its sampling and cache; the halo exchange settings of full-graph training do not apply
    extra = {"sampling": as_dict(sampled[0]), "cache": as_dict(sampled[1]), "features": as_dict(sampled[4])} \
        if sampled else {}
    if sampled:
        comm_cfg = {}
    train_cfg = {**{k: v for k, v in as_dict(train).items() if k != "seeds"}, "seed": seed}
    with one_rank_per_part(train.device, train.timeout, manifest["num_parts"], partition_dir,
                           startup_timeout_s=train.startup_timeout, watchdog=watch) as ctx:
        shard = read_shard(partition_dir, ctx.rank, manifest)
        if sampled:
            sampling, cache, topology, vip, features = sampled
            trainer: Trainer = SampledTrainer(ctx, shard, topology, model, train, sampling, cache, seed, vip,
                                              timeout=collective_timeout(train.timeout), features=features)
        else:
            trainer = FullGraphTrainer(ctx, shard, model, train, comm, seed)
        # The trainers copy what they keep: unmap the shard, whose pages set-up read (the whole file, for its
        # checksum) would otherwise stay in this rank's memory for the whole run.
        del shard
        try:
            summary = _run_epochs(trainer, ctx.rank, out_dir, train,
                                  run_identity(model_cfg, train_cfg, comm_cfg, manifest, extra))
        finally:
            trainer.close()
        if ctx.rank == 0:
            best, records = summary.pop("best"), summary.pop("records")
            summary = {**summary, **trainer.summary(), "num_parts": ctx.world}
            with atomic_path(out_dir / "model.pt") as tmp:
                torch.save({"model": best["model"], "model_cfg": model_cfg, "train_cfg": train_cfg,
                            "comm_cfg": comm_cfg, **{f"{k}_cfg": v for k, v in extra.items()},
                            "in_feats": manifest["num_features"],
                            "num_classes": manifest["num_classes"],
                            "dataset_fingerprint": manifest["dataset_fingerprint"], "summary": summary}, tmp)
            write_jsonl(out_dir / "metrics.jsonl", records)
            clear_run_failure(out_dir)  # an earlier attempt's record: this run finished
            _log(f"best val {best['val_acc']:.4f} at epoch {best['epoch'] + 1}, test {best['test_acc']:.4f}; "
                 f"wrote {out_dir / 'model.pt'}")
        return summary if ctx.rank == 0 else None


def _run_epochs(trainer: Trainer, rank: int, out_dir: Path, train, identity: dict) -> dict:
    """Resume, then per epoch: train, keep the best-validation weights, log, checkpoint. Returns the best epoch,
    its weights and every epoch's record."""
    epochs = train.epochs
    ckpt_path = out_dir / "checkpoints" / "last.pt"
    state, why_not = load_checkpoint(ckpt_path, identity, epochs)
    records, best, start = [], None, 0
    if state is not None:
        trainer.load_state_dict(state["trainer"], state["epoch"] + 1)
        records, best, start = state["metrics"], state["best"], state["epoch"] + 1
        if rank == 0:
            _log(f"resuming from {ckpt_path} after epoch {start}")
    elif why_not and rank == 0:
        _log(f"starting afresh, not from {ckpt_path}: {why_not}")
    show_bar = rank == 0 and train.progress and sys.stderr.isatty()
    bar = tqdm(range(start, epochs), initial=start, total=epochs, desc="train", unit="epoch", disable=not show_bar)
    for epoch in bar:
        try:
            rec = trainer.epoch(epoch, evaluate=(epoch + 1) % train.eval_every == 0 or epoch + 1 == epochs)
        except TrainingDiverged as e:  # not finite: this epoch has no record
            _record_failure(e, rank, out_dir, records)
            raise
        records.append(rec)
        if rec["val_acc"] is not None and (best is None or rec["val_acc"] > best["val_acc"]):
            best = {"epoch": epoch, "val_acc": rec["val_acc"], "test_acc": rec["test_acc"], "model": trainer.weights()}
        if rank == 0:
            full = (epoch + 1) % train.log_every == 0 or epoch + 1 == epochs
            for line in trainer.log_lines(rec, epochs, full):
                _log(line)
        try:
            check_divergence([r["loss"] for r in records], train)
        except TrainingDiverged as e:
            _record_failure(e, rank, out_dir, records)
            raise
        every = train.checkpoint_every
        if rank == 0 and every and (epoch + 1) % every == 0 and epoch + 1 < epochs:
            save_checkpoint(ckpt_path, {"identity": identity, "epoch": epoch, "metrics": records, "best": best,
                                        "trainer": trainer.state_dict()})
    if best is None:
        raise SylvieError(f"train.epochs={epochs}: nothing to train; set epochs >= 1")
    return {"best_epoch": best["epoch"], "best_val_acc": best["val_acc"], "test_acc_at_best_val": best["test_acc"],
            "best": best, "records": records}


def _record_failure(e: TrainingDiverged, rank: int, out_dir: Path, records: list[dict]) -> None:
    """Rank 0: ``failed.json`` (why and at which epoch training stopped) and ``metrics.jsonl`` of the epochs run."""
    if rank == 0:
        # an earlier, finished run's model would be taken for this run's: it goes (train's own output, in a run
        # directory check_replaceable accepted)
        (out_dir / "model.pt").unlink(missing_ok=True)
        write_jsonl(out_dir / "metrics.jsonl", records)
        write_run_failure(out_dir, RunFailure(reason=e.reason, epoch=e.epoch + 1, message=str(e)))
