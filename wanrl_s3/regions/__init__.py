"""One bucket per region (private): the regions file, store roles, probing, failover, relay."""
