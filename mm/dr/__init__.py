"""The disaster-recovery day: planned switchover (and, to come, the failover point and
failback). Decisions are pure (:mod:`mm.dr.switchover`); cluster reads and writes
live in :mod:`mm.dr.switchover_run`; the command only parses, calls and renders."""
