"""VideoBrain at real scale: an upstream verl plug-in and a TRL ``GRPOTrainer`` adapter.

Both engines reuse what evaluation uses: ``vidlab.understanding.protocol`` (prompts, parsing), the agents,
``vidlab.clip.FrameIndex`` and ``vidlab.understanding.reward.compute_score``. Modules (verl and TRL are imported
lazily, only by the modules that need them; install the ``rl`` extra):

- ``reward``      verl's ``compute_score`` signature, plus the 4-tuple wrapper for the authors' fork
- ``tools``       ``UniformSampleTool`` / ``ClipSampleTool``: subclasses of verl's ``BaseTool``
- ``agent_loop``  ``VideoBrainAgentLoop`` registered as ``videobrain_agent`` in verl's agent-loop registry
- ``dataset``     QA rows (benchmark loaders, JSONL, toy world) -> verl parquet rows, validated
- ``verl_launch`` the GRPO preset -> tool config, agent-loop config and the exact ``main_ppo`` command
- ``local_server`` an in-process Hugging Face model standing in for verl's rollout server (tests, debugging)
- ``trl_adapter`` ``VideoBrainGRPOTrainer``: TRL's GRPOTrainer driving ``vidlab.understanding.env.Episode``
- ``cli``         ``trl_main(argv)`` / ``verl_main(argv)`` behind ``vidlab train-agent --engine trl|verl``
"""
