"""The fleet seen through the bucket (private): worker status, T_bcast, retention."""
