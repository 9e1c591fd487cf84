"""T2V-CompBench evaluation jobs: suite loader, planning stage, sharded generation, metrics, export, report.

    vidlab compbench generate --preset compbench/tiny     # then: score, report, export (same config)

Modules: ``suite`` (700 prompts, official order, metadata, stable ids), ``config`` (CompbenchConfig, METHODS),
``planning`` (every layout before generation), ``worker`` (one pipeline per worker), ``jobs`` (items, run_job,
manifest), ``export`` (official layout), ``metrics`` (registry + offline metrics + adapters), ``official``
(official metrics: MLLM grid, GroundingDINO, tracking, CSV ingest, recorded backends), ``scoring``, ``report``,
``cli``. Guide: docs/guides/compbench.md.
"""
