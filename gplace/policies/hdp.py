"""hdp placement policy (being written; see issue 11)."""
