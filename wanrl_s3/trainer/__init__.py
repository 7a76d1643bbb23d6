"""The trainer core (private): what any trainer calls to publish its weights.

``publication`` (:class:`~wanrl_s3.TrainerPublisher`: ``submit(weights, version)``
returns a future while the publication runs off the trainer's critical path, and
the policy of what stops a run), ``protocol`` (:class:`~wanrl_s3.VersionPublisher`,
what it asks of a Publisher or a ShardedPublisher), ``background`` (one
publication at a time on a daemon thread, bounded at exit), ``host_copy`` (one
reusable host copy of the weights), ``share`` (only this rank's share of them)
and ``ranks`` (this rank, the rank count and the launch's run id, from
``torch.distributed``). torch is optional: it is imported only for torch tensors.
"""
