"""launch.allocator: tcmalloc preloaded into the ranks where installed (found as PyTorch's CPU launcher finds it,
and in the system's multiarch folders), said once where it is not, glibc with huge pages otherwise; an allocator the
user preloads stays. The choice reaches every rank, here and through srun."""
import logging
import sys

import pytest
from support.commands import BIN, run

from sylvie.errors import SylvieError
from sylvie.launch import allocator
from sylvie.launch.allocator import HUGE_PAGES, allocator_env, find_tcmalloc
from sylvie.launch.torchrun import Geometry, srun_argv


@pytest.fixture
def only(monkeypatch, tmp_path):
    """Look for the library in ``tmp_path/lib`` alone (this machine's own tcmalloc out of sight)."""
    lib = tmp_path / "lib"
    lib.mkdir()
    monkeypatch.setattr(allocator, "library_dirs", lambda env: [lib])
    return lib


@pytest.mark.unit
def test_found_where_pytorchs_launcher_looks(tmp_path):
    conda = tmp_path / "conda"
    (conda / "lib").mkdir(parents=True)
    (conda / "lib" / "libtcmalloc.so").write_bytes(b"")
    assert find_tcmalloc({"CONDA_PREFIX": str(conda)}) == conda / "lib" / "libtcmalloc.so"
    (tmp_path / "libfoo.so").write_bytes(b"")
    assert allocator_env("auto", {"CONDA_PREFIX": str(conda), "LD_PRELOAD": f"{tmp_path}/libfoo.so"}) == \
        {"LD_PRELOAD": f"{conda}/lib/libtcmalloc.so:{tmp_path}/libfoo.so"}
    dirs = [str(d) for d in allocator.library_dirs({"VIRTUAL_ENV": "/venv"})]
    assert dirs[:1] == ["/venv/lib"] and {"/usr/local/lib", "/usr/lib", "/usr/lib64"} <= set(dirs)


@pytest.mark.unit
def test_debians_minimal_library_is_found(only):
    (only / "libtcmalloc_minimal.so.4").write_bytes(b"")
    assert allocator_env("tcmalloc", {}) == {"LD_PRELOAD": str(only / "libtcmalloc_minimal.so.4")}


@pytest.mark.unit
def test_without_tcmalloc(only, caplog):
    with caplog.at_level(logging.WARNING, logger="sylvie"):
        assert allocator_env("auto", {}) == {HUGE_PAGES: "1"}
    assert caplog.text.count("tcmalloc is not installed") == 1 and "libtcmalloc-minimal4" in caplog.text
    with pytest.raises(SylvieError, match="launch.allocator tcmalloc: no libtcmalloc.so or libtcmalloc_minimal.so"):
        allocator_env("tcmalloc", {})


@pytest.mark.unit
def test_glibc_and_the_users_own_choices(only):
    (only / "libtcmalloc.so").write_bytes(b"")
    assert allocator_env("glibc", {}) == {HUGE_PAGES: "1"}
    assert allocator_env("glibc", {HUGE_PAGES: "0"}) == {HUGE_PAGES: "0"}  # the user's setting stays
    (only / "libjemalloc.so.2").write_bytes(b"")
    assert allocator_env("auto", {"LD_PRELOAD": f"{only}/libjemalloc.so.2"}) == {}  # preloaded by the user
    assert allocator_env("auto", {"LD_PRELOAD": "libjemalloc.so.2"}) == {}  # by name, in a library folder
    with pytest.raises(SylvieError, match="choose one of auto, tcmalloc, glibc"):
        allocator_env("jemalloc", {})


@pytest.mark.unit
@pytest.mark.parametrize("choice", ["auto", "tcmalloc"])
@pytest.mark.parametrize("entry", ["/nowhere/libtcmalloc.so.4", "libtcmalloc_nowhere.so", "{lib}",
                                   "{lib}/libjemalloc_gone.so.2", "{lib}/libtcmalloc.so:/nowhere/libfoo.so"])
def test_a_preload_the_loader_cannot_find_is_refused(only, choice, entry):
    """LD_PRELOAD naming a library that is not there (a path, a bare name, a folder, beside one that is): every rank
    would print ld.so's complaint and run with glibc's malloc; refused before any rank starts."""
    (only / "libtcmalloc.so").write_bytes(b"")
    preload = entry.format(lib=only)
    with pytest.raises(SylvieError, match=rf"launch.allocator {choice}: LD_PRELOAD names .*, which the loader "
                                          r"cannot find: every rank would say so and run with glibc's malloc"):
        allocator_env(choice, {"LD_PRELOAD": preload})
    assert allocator_env("glibc", {"LD_PRELOAD": preload}) == {HUGE_PAGES: "1"}  # glibc's choice: not ours to check
    assert allocator_env(choice, {"LD_PRELOAD": "/usr/$LIB/libjemalloc.so.2"}) == {}  # the loader's token: its own


@pytest.mark.unit
def test_srun_tasks_are_told_the_allocator():
    argv = srun_argv(Geometry(ranks=4, nodes=2), ["sylvie", "train"], "glibc")
    assert argv[argv.index("--allocator") + 1] == "glibc" and argv.index("--allocator") < argv.index("--")


PROBE = ("import os, sys; maps = open('/proc/self/maps').read(); "
         "open(os.path.join(sys.argv[1], os.environ['RANK']), 'w').write("
         "f\"{'tcmalloc' in maps} {os.environ.get('THP_MEM_ALLOC_ENABLE')}\")")


@pytest.mark.slow
@pytest.mark.parametrize("choice", ["auto", "glibc"])
def test_every_rank_gets_the_allocator(choice, tmp_path):
    if choice == "auto" and find_tcmalloc({}) is None:
        pytest.skip("no tcmalloc on this machine (make install installs Debian's libtcmalloc-minimal4)")
    run([str(BIN / "sylvie"), "launch", "--ranks", "2", "--allocator", choice, "--", sys.executable, "-c", PROBE,
         str(tmp_path)])
    want = "True None" if choice == "auto" else "False 1"  # tcmalloc mapped in the rank / PyTorch's huge pages
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == {"0": want, "1": want}
