"""The trainer side (private): the commit protocol, payload packing, resuming.

``publisher`` (data first, the manifest created only if absent, LATEST last),
``payload`` (64 MiB payload objects uploaded as they fill) and ``resume``
(continue from the newest version a store holds).
"""
