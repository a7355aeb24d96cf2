"""`mm status`: how far behind each flow's target is, and whether that breaks a threshold.

* ``model``: the report's data (per flow, partition and group), the alert
  thresholds (``mm.alert.*``) and the pure evaluation that turns a report into
  alerts;
* ``reads``: the Kafka reads it needs (fetch-based log ends, newest records,
  committed offsets), never joining a group or committing;
* ``collect``: one flow's status from its two clusters;
* ``render``: the rich table and the JSON document.

Prometheus exposition of the same numbers lives in :mod:`mm.metrics`.
"""
