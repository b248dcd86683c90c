"""The optional extras of pyproject.toml (``[project.optional-dependencies]``), imported where a stage needs them: a
missing one is one line naming the extra to install (``needs``), never a ModuleNotFoundError's traceback."""
from __future__ import annotations

import importlib
from types import ModuleType

from sylvie.errors import SylvieError

# a top-level module -> (the extra that installs it, its name on PyPI)
EXTRAS = {"matplotlib": ("report", "matplotlib"), "ogb": ("ogb", "ogb"), "pandas": ("ogb", "pandas"),
          "numba_cuda": ("cuda", "numba-cuda"), "tensorboard": ("tensorboard", "tensorboard")}


def install_hint(top: str) -> str:
    """How to install module ``top``: its extra, or the package itself."""
    extra, package = EXTRAS[top]
    return f"pip install 'sylvie[{extra}]' (or pip install {package})"


def needs(module: str, what: str) -> ModuleType:
    """``module`` imported for ``what`` (the stage or feature that needs it); where its package is not installed, a
    SylvieError naming the extra that installs it. An import error inside an installed package is left as it is."""
    top = module.split(".")[0]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name not in {top, module} and not module.startswith(f"{e.name}."):
            raise
        raise SylvieError(f"{what} needs {EXTRAS[top][1]}, which is not installed: {install_hint(top)}") from None
