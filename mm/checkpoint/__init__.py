"""The checkpoint job: consumer-group offsets translated exactly into MM2 checkpoints.

* ``store``    - translation history per partition (pure): exact where the history is
  complete, conservative (never ahead) in holes, prunable
* ``rules``    - when a checkpoint / a group offset sync may be written (pure)
* ``reader``   - the offset-syncs topic as a Spark streaming data source
* ``emitter``  - per flow, on the driver: feed syncs, read groups, emit, prune, sync groups
* ``snapshot`` - the store on disk (atomic JSON), the job's only durable state
* ``job``      - one Spark streaming query per flow (``mm checkpoint [--once]``)
"""
