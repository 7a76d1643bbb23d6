"""wanrl-s3 for verl: an object-storage checkpoint engine and staleness filters.

Nothing is imported here, so that ``import wanrl_s3_verl`` stays cheap; verl
loads the parts by name:

* ``wanrl_s3_verl.backend``: the checkpoint-engine backend ``wanrl_s3``
  (``checkpoint_engine.custom_backend_module``);
* ``wanrl_s3_verl.sampler.StalenessReplayBuffer``: the v1 custom sampler;
* ``wanrl_s3_verl.message_queue.StalenessMessageQueueClient`` and the launcher
  ``python -m wanrl_s3_verl.fully_async_main`` for the fully-async trainer.

See integrations/verl/README.md and docs/verl.md.
"""
