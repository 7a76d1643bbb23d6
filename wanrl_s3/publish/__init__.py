"""The trainer side (private): the commit protocol, payload packing, adopting, ranks.

``publisher`` (data first, the manifest created only if absent, LATEST last),
``payload`` (64 MiB payload objects uploaded as they fill), ``adopt``
(a restarted publisher continues from the newest version a store holds) and ``shard`` (R ranks each
upload a share, one commits: ``assign`` who publishes what, ``share_record`` and
``rendezvous`` how the ranks meet in the store, ``merge`` the shares into one
manifest).
"""
