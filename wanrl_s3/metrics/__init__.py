"""Prometheus metrics for the people who run a fleet: workers, the relay, the trainer.

The library reports what happens through small observer classes that do
nothing by default (:class:`~wanrl_s3.fetch.watch.WatchObserver`,
:class:`~wanrl_s3.regions.relay_observer.RelayObserver`,
:class:`~wanrl_s3.trainer.observer.PublicationObserver`), and the staleness
filter keeps lifetime totals it reads at no cost per item. This package turns
those into Prometheus metrics with the official ``prometheus-client``, which is
optional (``pip install 'wanrl-s3[metrics]'``) and imported only when a metrics
object is made: the hot paths never import it.

``exposition`` (the client, imported lazily with an install hint; one registry
per process; the HTTP endpoint), ``worker`` (:class:`WorkerMetrics`), ``relay``
(:class:`RelayMetrics`), ``trainer`` (:class:`TrainerMetrics`) and
``staleness`` (:class:`StalenessMetrics`). Names carry their unit
(``_seconds``, ``_bytes``, ``_total``) and labels take a handful of values
each; docs/operations.md lists them all.
"""
