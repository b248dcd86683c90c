"""What one ``sylvie train`` run is asked to do: a ``TrainingJob`` (the run loop, ``train/run.py``, takes one)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from sylvie.config import as_dict, section


@dataclass(frozen=True)
class TrainingJob:
    """The partition to train on, where the run's files go, the seed, and the config's sections. ``sampling``,
    ``cache`` and ``features`` shape sampled training only (``train.mode`` sampled), ``vip_dir`` too: the VIP
    analysis of ``sylvie vip``, which the vip cache policy needs and which orders a rank's own rows."""
    partition_dir: Path
    out_dir: Path
    model: object
    train: object
    comm: object
    seed: int
    sampling: object = field(default_factory=lambda: section("sampling"))
    cache: object = field(default_factory=lambda: section("cache"))
    features: object = field(default_factory=lambda: section("features"))
    vip_dir: Path | None = None
    link: object = field(default_factory=lambda: section("link"))  # link prediction's (train.task link)

    def __post_init__(self):
        for name in ("partition_dir", "out_dir", "vip_dir"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, Path):
                object.__setattr__(self, name, Path(value))
        for name in ("sampling", "cache", "features", "link"):  # None: the section's defaults
            if getattr(self, name) is None:
                object.__setattr__(self, name, section(name))

    @property
    def sampled(self) -> bool:
        return self.train.mode == "sampled"

    def configs(self) -> dict[str, dict]:
        """The sections as plain dicts, as the files record them (model.pt, eval.json, the checkpoint's identity):
        ``train`` with this run's seed instead of the seeds; a sampled run has ``sampling``, ``cache`` and
        ``features`` and an empty ``comm`` (the halo exchange's settings do not apply to it); a link-prediction run has
        ``link``."""
        train = {**{k: v for k, v in as_dict(self.train).items() if k != "seeds"}, "seed": self.seed}
        out = {"model": as_dict(self.model), "train": train, "comm": {} if self.sampled else as_dict(self.comm)}
        if self.sampled:
            out.update(sampling=as_dict(self.sampling), cache=as_dict(self.cache), features=as_dict(self.features))
        if self.train.task == "link":
            out["link"] = as_dict(self.link)
        return out
