"""The drill's scenarios, in the order they run: a module of its own so that building
the command line (``mm --help``, every job's start) does not import the drill."""

from __future__ import annotations

SCENARIOS = ("switchover", "failover", "failback")
