"""``mm run``: every job of every enabled flow in one process and one Spark application."""
