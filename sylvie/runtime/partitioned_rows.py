"""Tables partitioned over the ranks by rows (a typed graph's embedding tables: each rank holds its nodes' rows):
put together whole on every rank (``gather_rows``) for a model file or a checkpoint, and a rank's rows taken back
out of a whole one (``own_rows``) when it resumes. The optimiser's state of such a table (Adam's moments: tensors
of its shape) travels the same way (``gather_state`` / ``own_state``)."""
from __future__ import annotations

import torch
import torch.distributed as dist


def gather_rows(local: torch.Tensor, ids: torch.Tensor, total: int) -> torch.Tensor:
    """The table of ``total`` rows whose rows ``ids`` this rank holds as ``local`` (every row held by one rank);
    collective: every rank calls it and gets the whole table."""
    whole = local.new_zeros((total,) + tuple(local.shape[1:]))
    if not (dist.is_initialized() and dist.get_world_size() > 1):
        whole[ids] = local
        return whole
    world = dist.get_world_size()
    count = torch.tensor([local.shape[0]], dtype=torch.int64, device=local.device)
    counts = [torch.zeros_like(count) for _ in range(world)]
    dist.all_gather(counts, count)
    most = int(max(c.item() for c in counts))
    rows = local.new_zeros((most,) + tuple(local.shape[1:]))
    rows[:local.shape[0]] = local
    at = torch.full((most,), -1, dtype=torch.int64, device=local.device)
    at[:ids.shape[0]] = ids
    all_rows = [torch.empty_like(rows) for _ in range(world)]
    all_ids = [torch.empty_like(at) for _ in range(world)]
    dist.all_gather(all_rows, rows)
    dist.all_gather(all_ids, at)
    for r, i, c in zip(all_rows, all_ids, counts, strict=True):
        n = int(c.item())
        whole[i[:n]] = r[:n]
    return whole


def own_rows(whole: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """This rank's rows ``ids`` of a whole table."""
    return whole[ids.to(whole.device)].clone()


def gather_state(state: dict, params: list[torch.nn.Parameter], local: dict[int, tuple[torch.Tensor, int]]) -> dict:
    """``torch.optim``'s ``state_dict()`` with the state of the partitioned parameters (``local``: parameter index
    -> (its rows' ids, the whole table's rows)) made whole: each state tensor of the parameter's shape gathered."""
    out = {**state, "state": dict(state["state"])}
    for index, (ids, total) in sorted(local.items()):
        entry = dict(out["state"].get(index, {}))
        shape = params[index].shape
        for key, value in sorted(entry.items()):
            if torch.is_tensor(value) and value.shape == shape:
                entry[key] = gather_rows(value, ids, total)
        out["state"][index] = entry
    return out


def own_state(state: dict, local: dict[int, tuple[torch.Tensor, int]]) -> dict:
    """The inverse of ``gather_state``: this rank's rows of each whole state tensor of a partitioned parameter."""
    out = {**state, "state": dict(state["state"])}
    for index, (ids, total) in local.items():
        entry = dict(out["state"].get(index, {}))
        for key, value in entry.items():
            if torch.is_tensor(value) and value.dim() >= 1 and value.shape[0] == total:
                entry[key] = own_rows(value, ids)
        out["state"][index] = entry
    return out


class PartitionedWeights:
    """The weights of ``model`` partitioned by rows over the ranks (``partitioned``: parameter name -> (this rank's
    rows' ids, the whole table's rows)), put together for what leaves a rank and taken apart when it comes back: a
    trainer's state (model and ``Optimiser`` state) and its weights. Collective where anything is partitioned."""

    def __init__(self, model: torch.nn.Module, partitioned: dict[str, tuple[torch.Tensor, int]]):
        self.model, self.partitioned = model, partitioned
        names = [n for n, _ in model.named_parameters()]
        self._by_index = {names.index(n): v for n, v in partitioned.items()}

    def whole(self, weights: dict) -> dict:
        """``weights`` (a state dict) with the partitioned ones whole."""
        return {k: gather_rows(v, *self.partitioned[k]) if k in self.partitioned else v for k, v in weights.items()}

    def state_dict(self, opt_state: dict) -> dict:
        """The model's and the optimiser's state (``Optimiser.state_dict``), partitioned tables whole."""
        if self.partitioned:
            opt_state = {**opt_state, "optimizer": gather_state(opt_state["optimizer"], list(self.model.parameters()),
                                                                self._by_index)}
        return {"model": self.whole(self.model.state_dict()), "optimizer": opt_state}

    def load(self, state: dict) -> dict:
        """Load ``state``'s model, this rank's rows of its tables; returns its optimiser state likewise."""
        model = dict(state["model"])
        for name, (ids, _) in self.partitioned.items():
            model[name] = own_rows(model[name], ids)
        self.model.load_state_dict(model)
        opt = state["optimizer"]
        return {**opt, "optimizer": own_state(opt["optimizer"], self._by_index)} if self.partitioned else opt
