"""The files one stage writes and another reads, each owned by one module that both writes and reads it, with its
version where it has one (a file of another version is refused, naming the stage that rewrites it).

``partition_manifest``, ``vip_file``, ``epoch_record`` (metrics.jsonl), ``model_file``, ``eval_result``,
``predictions``, ``node_keys``, ``run_failure``, ``rank_failures``, ``splits``. ``checksum`` checks a file read back
is what we wrote; ``checked_json`` and ``recognise`` serve the readers.
"""
