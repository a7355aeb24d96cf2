"""The heartbeat job: MirrorMaker 2 ``Heartbeat`` records that make replication lag visible.

For every enabled flow ``X->Y`` with ``emit.heartbeats.enabled``, a
``Heartbeat(source=X, target=Y, timestamp=now)`` is written every
``emit.heartbeats.interval.seconds`` into X's local ``heartbeats`` topic. The
mirror copies that topic like any other into ``X.heartbeats`` on Y, so the age
of the newest heartbeat there is the end-to-end replication latency that
``mm status`` reports (:mod:`mm.status`). The topic names and the record format
are MM2's, so ``upstream_clusters``/``replication_hops`` of ``mm_client`` (and
MM2's RemoteClusterUtils) read the chain of clusters from them.

``emitter`` holds the producing logic, ``job`` the loop (``--once`` or until
SIGTERM/SIGINT).
"""
