"""wanrl-s3 for verl: an object-storage checkpoint engine and staleness filters."""
