"""What the tests share besides fixtures: a library, imported as ``from support.<module> import ...`` (``tests/`` is
on ``sys.path``: pyproject.toml's ``pythonpath``), so that tests/conftest.py holds only fixtures and hooks.

- ``commands``: where the repository, the venv's commands and the embedded Cora are; running a command, torchrun,
  or P ranks forked from one process (``ranks``: ``forked_ranks``); a refusal's last line (``refused_line``);
- ``files``: a fresh clone's copy of the repository (``copy_repo``), a file cut off part-way (``truncate``);
- ``metis``: each METIS library sylvie calls (the system's 32-bit one, pymetis's 64-bit one);
- ``ogb_archives``: OGB's archives as the tests build them (a gzip CSV in a zip) and a folder served on loopback as
  a mirror;
- ``graphs``: the small typed graph the tests share (``SMALL_MAG``; conftest's ``small_mag`` fixtures), its parts
  cut on demand (``LazyPartitions``), and a typed graph written as a user's files (``write_files``);
- ``forked_ranks`` (a script): P ranks forked from one process that imported torch and sylvie once;
- ``simulated_ranks``: several ranks in one process, one thread each, joined by an in-memory all-to-all;
- ``partitioned_ranks``: a partition's ranks in one process, trained as the full-graph trainer trains them;
- ``no_dgl``: commands with ``import dgl`` refused, and the proof that the hook reached every rank;
- ``local_slurm``: the pipeline on a single-machine Slurm, run in the background for tests/test_slurm.py.
"""
