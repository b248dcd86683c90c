"""Each METIS library sylvie calls (``sylvie.partition.metis_library``): pymetis's 64-bit one, and a 32-bit one
installed on the system (conftest's ``metis_library`` fixture gives each in turn)."""
import glob
import os

import pytest


def pymetis_library():
    """The 64-bit METIS inside the pymetis wheel (sylvie.partition.metis_library)."""
    import pymetis

    from sylvie.partition.metis_library import libraries

    (path,) = glob.glob(os.path.join(os.path.dirname(pymetis.__file__), "_internal*.so"))
    return next(lib for lib in libraries() if os.path.realpath(lib.path) == os.path.realpath(path))


def system_metis_library():
    """A 32-bit METIS installed on the system; the test is skipped where there is none (`make install` installs
    Debian's libmetis5 where it can: root and apt; CI always has it)."""
    from sylvie.partition.metis_library import libraries

    narrow = [lib for lib in libraries() if lib.bits == 32]
    if not narrow:
        pytest.skip("no 32-bit METIS library installed (apt-get install libmetis5)")
    return narrow[0]
