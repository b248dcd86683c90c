"""The files one stage writes and another reads, each owned by one module that both writes and reads it, with its
version where it has one (a file of another version is refused, naming it and the stage that rewrites it):

- ``partition_manifest``: a partition's ``manifest.json`` (``sylvie partition``; the shards are ``partition``'s);
- ``vip_file``: a VIP analysis, ``manifest.json`` + ``vip-<k>.npy`` (``sylvie vip``);
- ``epoch_record``: ``metrics.jsonl``, one ``EpochRecord`` per epoch (``sylvie train``);
- ``model_file``: ``model.pt`` (``sylvie train`` -> ``sylvie evaluate``);
- ``eval_result``: ``eval.json`` (``sylvie evaluate`` -> ``sylvie report``);
- ``predictions``: what ``sylvie evaluate --predictions`` writes (.npy, or a table of the user's ids; no version);
- ``node_keys``: ``node_keys.arrow`` beside a canonical graph of the user's own files, the user's id of every node
  (``sylvie download`` -> ``sylvie evaluate --predictions``; checked by its sha256 in meta.json, no version);
- ``run_failure``: ``failed.json``, why a training stopped (``sylvie train`` -> ``sylvie report``);
- ``rank_failures``: what failed ranks record for their launcher (``sylvie launch``);
- ``splits``: the split names (train, val, test).

``checksum`` is the one check that a file read back is what we wrote: the checksum of its content it carries
(the manifests, ``model.pt``, a checkpoint, ``eval.json``, ``failed.json``, each line of ``metrics.jsonl``).
``checked_json`` and ``recognise`` serve the readers: one-line errors, and which of our formats a wrong file is.
The canonical graph's format is ``sylvie.data.graph``'s, the shards' ``sylvie.partition``'s.
"""
