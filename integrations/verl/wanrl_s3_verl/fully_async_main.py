"""``python -m wanrl_s3_verl.fully_async_main``: verl's fully-async trainer, staleness-filtered.

verl 0.9.1 offers no config key to substitute its MessageQueue client: its task
runner builds one ``MessageQueueClient`` and hands it to the rollouter and the
trainer. This launcher is verl's own ``fully_async_main`` with one change: once
verl has built its components (and before either starts its loop), both get a
:class:`~wanrl_s3_verl.message_queue.StalenessMessageQueueClient` on the same
queue actor. It takes the same Hydra config and overrides as
``python -m verl.experimental.fully_async_policy.fully_async_main``, plus the
filter's settings under ``+wanrl_s3.message_queue.*`` (staleness, store_url ...).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import hydra
import ray
from verl.experimental.fully_async_policy import fully_async_main as verl_async

from .clock import create_clock
from .config import QUEUE_KEY, QueueSettings
from .message_queue import StalenessMessageQueueClient


def queue_settings(config: Any) -> QueueSettings:
    """``wanrl_s3.message_queue`` of the Hydra config (all keys optional)."""
    node: Any = config
    for part in QUEUE_KEY.split("."):
        node = node.get(part) if node is not None else None
    return QueueSettings.from_mapping(node)


def install_queue_filter(
    components: dict[str, Any], settings: QueueSettings
) -> StalenessMessageQueueClient:
    """Give the rollouter and the trainer a staleness-filtering client on verl's queue actor."""
    client = StalenessMessageQueueClient(components["message_queue"], settings)
    ray.get(
        [
            components["rollouter"].set_message_queue_client.remote(client),
            components["trainer"].set_message_queue_client.remote(client),
        ]
    )
    components["message_queue_client"] = client
    return client


class _StalenessTaskRunner(verl_async.FullyAsyncTaskRunner.__ray_actor_class__):  # type: ignore[name-defined,misc]
    def _initialize_components(self, config: Any) -> None:
        settings = queue_settings(config)  # refuse bad settings before anything starts
        # The clock first: the initial weight sync (inside verl's set-up) advances it to
        # the resumed version, so nothing is stamped with a version from before the resume.
        self.components["version_clock"] = create_clock()
        super()._initialize_components(config)
        install_queue_filter(self.components, settings)


StalenessTaskRunner = ray.remote(num_cpus=1)(_StalenessTaskRunner)


#: verl's own config folder for this mode (it is no Python package, so no pkg:// path).
VERL_ASYNC_CONFIG = str(Path(verl_async.__file__).resolve().parent / "config")


@hydra.main(config_path=VERL_ASYNC_CONFIG, config_name="fully_async_ppo_trainer", version_base=None)
def main(config: Any) -> None:
    """verl's ``fully_async_main.main`` with our task runner (verl's steps, in its order)."""
    from verl.trainer.main_ppo import run_ppo

    if not hasattr(config, "async_training"):
        raise RuntimeError("must set async_training config")
    queue_settings(config)
    verl_async.auto_set_device(config)
    config.actor_rollout_ref.rollout.nnodes = config.rollout.nnodes
    config.actor_rollout_ref.rollout.n_gpus_per_node = config.rollout.n_gpus_per_node
    config = verl_async.migrate_legacy_reward_impl(config)
    run_ppo(config, task_runner_class=StalenessTaskRunner)


if __name__ == "__main__":
    main()
