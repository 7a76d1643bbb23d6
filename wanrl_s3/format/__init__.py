"""What is written to a bucket, and the rules for reading it back (private).

``layout`` (where each object lives), ``manifest`` (the version manifest, strict
parser), ``manifests`` (the one owner of reading manifests from a store, and of
the rule for claiming a version), ``latest`` (the LATEST pointer: the one owner
of reading, polling and advancing it), ``signing`` (Ed25519), ``hashing``
(BLAKE3) and ``dtypes``.
The format itself is specified in docs/format.md.
"""
