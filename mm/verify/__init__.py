"""`mm verify`: prove that a mirror is complete and exact, partition by partition.

* :mod:`mm.verify.digest` — per-record digests and digest sequences (pure);
* :mod:`mm.verify.compare` — aligning the two sides, syncs, translations,
  checkpoints (pure);
* :mod:`mm.verify.reads` — what is read on the driver (topics, log bounds,
  mirror position, offset syncs, checkpoints);
* :mod:`mm.verify.spark` — digests computed in Spark Python tasks, per offset range;
* :mod:`mm.verify.job` — the whole run; :mod:`mm.verify.render` — table and JSON.
"""
