"""OGB's archives as the tests build them: a gzip CSV inside a zip (``csv_gz``), and a folder served over HTTP on
loopback (``served``), as a mirror (``datasets.<name>.mirror``) that ogb's real downloader fetches from."""
import contextlib
import functools
import gzip
import http.server
import threading


def csv_gz(zf, name: str, rows, header=None) -> None:
    """``rows`` (iterables of values) written into the zip ``zf`` as the gzip CSV ``name``, OGB's raw file format."""
    text = "".join(",".join(map(str, r)) + "\n" for r in ([header] if header else []) + list(rows))
    zf.writestr(name, gzip.compress(text.encode()))


@contextlib.contextmanager
def served(directory):
    """The files of ``directory`` over HTTP on loopback, quietly: yields the base URL (with its trailing slash)."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(directory)))
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
