"""The official T2V-CompBench metrics as adapters (scoring logic re-implemented from the official scripts).

* :mod:`.mllm` - LLaVA grid scoring (16 frames -> 6-frame 3x2 grid, two-turn questions, reply -> score);
* :mod:`.grounding` - GroundingDINO boxes -> numeracy and 2D spatial scores;
* :mod:`.tracking` - segmentation + point tracking displacements -> motion-binding score;
* :mod:`.csv_ingest` - the official scripts' CSV outputs merged into our report;
* :mod:`.recorded` - backends that replay recorded model outputs (tests, re-scoring from logs).

Each in-process adapter needs a model backend (``score.mllm`` / ``score.detector`` / ``score.tracker`` =
``module:factory``) with the small interface documented in its module; the scoring around it follows
the official definitions line by line, so a user with the weights gets the official number in vidlab.
"""
