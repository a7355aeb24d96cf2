"""``mm run``: every job of every enabled flow in one process and one Spark application."""

# the jobs of a run (light: `mm --help` imports this through mm.commands.run)
MIRROR = "mirror"
CHECKPOINT = "checkpoint"
HEARTBEAT = "heartbeat"
JOB_NAMES = (MIRROR, CHECKPOINT, HEARTBEAT)
