"""Damage anywhere in one of our Arrow files is one line naming the file and the stage that rewrites it (issue 44,
class 4), never a pyarrow, decode or numpy traceback: every byte of each file's metadata (the magic, the schema
message with its field names and types, the record batch's message with its lengths, the footer) and sampled offsets
of its body are flipped in turn, in every kind of Arrow file we write (a canonical graph's nodes.arrow and
edges.arrow, a partition's shards and its topology), and read back by the code the stages read them with.

A flip that leaves the content as it was (a padding byte, say) may read: the graph's fingerprint or the shard's
checksum then proves nothing changed. Anything else must be a SylvieError of one line."""
import struct

import numpy as np
import pytest

from sylvie.errors import SylvieError

pytestmark = pytest.mark.slow  # in-process, but ~4,000 reads: 10-20 s

BODY_SAMPLES = 48


def _graph():
    from sylvie.data.graph import Graph

    rng = np.random.default_rng(7)
    n = 48
    src = np.concatenate([np.arange(n), rng.integers(0, n, 3 * n)])
    dst = np.concatenate([(np.arange(n) + 1) % n, rng.integers(0, n, 3 * n)])
    keep = src != dst
    split = rng.permutation(n)
    masks = {name: np.isin(np.arange(n), split[a:b]) for name, (a, b) in
             {"train_mask": (0, 24), "val_mask": (24, 36), "test_mask": (36, n)}.items()}
    return Graph(name="tiny", src=src[keep], dst=dst[keep], features=rng.standard_normal((n, 5)).astype(np.float32),
                 labels=rng.integers(0, 3, n), num_classes=3, **masks)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """A canonical graph and its 2-part partition (with the topology sampled training reads)."""
    from sylvie.data.graph import save_graph
    from sylvie.partition.stage import partition_dataset

    base = tmp_path_factory.mktemp("damaged-arrow")
    save_graph(_graph(), base / "graph", "synthetic")
    partition_dataset(base / "graph", base / "parts", 2, "metis", 0, progress=False)
    return base


def metadata_and_body(data: bytes) -> tuple[range, range]:
    """Where an Arrow IPC file's metadata lies (the magic, the schema message, the record batch's message; the
    end-of-stream marker, the footer, its length and the closing magic) and its body (the record batch's buffers)."""
    assert data[:6] == b"ARROW1" and data[-6:] == b"ARROW1"
    at = 8
    for _ in range(2):  # the schema message, then the record batch's message: continuation, length, flatbuffer
        marker, length = struct.unpack_from("<Ii", data, at)
        assert marker == 0xFFFFFFFF
        at += 8 + length
    footer_length = struct.unpack_from("<i", data, len(data) - 10)[0]
    body_end = len(data) - 10 - footer_length - 8  # the end-of-stream marker precedes the footer
    assert at < body_end
    return range(0, at), range(at, body_end)


def _offsets(data: bytes, every_metadata_byte: bool = True) -> list[int]:
    """Every byte of the metadata (or, where a checksum guards the whole file, 256 of them) and BODY_SAMPLES of
    the body."""
    meta, body = metadata_and_body(data)
    sampled = np.unique(np.linspace(body.start, body.stop - 1, BODY_SAMPLES).astype(int)).tolist()
    if not every_metadata_byte:
        at = np.unique(np.linspace(0, len(meta) + len(data) - body.stop - 1, 256).astype(int))
        return [int(i) if i < len(meta) else int(i - len(meta) + body.stop) for i in at] + sampled
    return [*meta, *sampled, *range(body.stop, len(data))]


def _read_graph(base):
    from dataclasses import replace

    from sylvie.data.graph import check_fingerprint, load_graph, read_features

    load_graph(base / "graph")  # training's and evaluation's read
    structure = load_graph(base / "graph", features=False)  # the partition stage's: structure first, then features
    check_fingerprint(replace(structure, features=read_features(structure, base / "graph")), base / "graph")


def _read_shard(base):
    from sylvie.partition.shard_reader import read_shard

    read_shard(base / "parts", 0)


def _read_topology(base):
    from sylvie.partition.shard_reader import read_topology

    read_topology(base / "parts")


KINDS = {  # file -> (how a stage reads it, the stage that rewrites it)
    "graph/nodes.arrow": (_read_graph, "sylvie download"),
    "graph/edges.arrow": (_read_graph, "sylvie download"),
    "parts/part-0.arrow": (_read_shard, "sylvie partition"),
    "parts/topology.arrow": (_read_topology, "sylvie partition"),
}


def _with_checksum_of(path, data: bytes) -> None:
    """The partition's manifest made to list ``data`` as the file's content (its sha256, and the manifest's own
    checksum): the shard reader's checks below the checksum, as if our writer had written the damage."""
    import hashlib
    import json

    from sylvie.formats.partition_manifest import manifest_checksum

    manifest_path = path.parent / "manifest.json"
    m = json.loads(manifest_path.read_text())
    entry = m["topology"] if path.name == "topology.arrow" else next(e for e in m["parts"] if e["file"] == path.name)
    entry["sha256"] = hashlib.sha256(data).hexdigest()
    m["checksum"] = manifest_checksum(m)
    manifest_path.write_text(json.dumps(m))


# below the checksum: the metadata (what pyarrow reads before any data), which the reader's own checks must catch;
# the body's values are the checksum's alone to vouch for (a flipped feature is a number like any other)
@pytest.mark.parametrize("name, below_the_checksum", [(name, False) for name in KINDS] +
                         [("parts/part-0.arrow", True), ("parts/topology.arrow", True)])
def test_a_flipped_byte_anywhere_is_one_line_naming_the_file_and_its_stage(written, name, below_the_checksum):
    read, stage = KINDS[name]
    path = written / name
    manifest = path.parent / "manifest.json"  # a partition's (a canonical graph has none)
    original, listed = path.read_bytes(), manifest.read_bytes() if manifest.exists() else None
    read(written)  # undamaged, it reads
    wrong, refused = [], 0
    try:
        meta, _ = metadata_and_body(original)
        # a partition's files: every metadata byte below the checksum, a sample above it (the checksum refuses all)
        checksummed = name.startswith("parts/")
        offsets = meta if below_the_checksum else _offsets(original, every_metadata_byte=not checksummed)
        for at in offsets:
            damaged = bytearray(original)
            damaged[at] ^= 0xFF
            path.write_bytes(bytes(damaged))
            if below_the_checksum:
                _with_checksum_of(path, bytes(damaged))
            try:
                read(written)
            except SylvieError as e:
                message = str(e)
                refused += 1
                if "\n" in message or path.name not in message or f"`{stage}`" not in message:
                    wrong.append(f"byte {at}: {message}")
            except Exception as e:  # noqa: BLE001 - what the test is for: nothing else may escape
                wrong.append(f"byte {at}: {type(e).__name__}: {e}")
    finally:
        path.write_bytes(original)
        if listed is not None:
            manifest.write_bytes(listed)
    assert not wrong, f"{len(wrong)} of the flips in {name} were not one clear line:\n" + "\n".join(wrong[:10])
    # most metadata bytes matter, and were refused (below the checksum, padding and unused fields need not be)
    assert refused > (0 if below_the_checksum else len(offsets) // 2)
