"""SCI on a toy-world Wan whose text encoder was trained: does it make the errors SCI targets, and does SCI fix them?

SCI (generation/sci.py) moves each subject's prompt tokens away from the other subjects' anchors. On the shipped
toy-world weights the text encoder is frozen at its random initialisation, so SCI had nothing to disambiguate. This
study takes a model whose encoder was trained with the transformer (``--model``; by default
generation/toyworld/weights_trained_te, made by ``vidlab train-gen-toyworld init_from=generation/toyworld/weights
train_text_encoder=true ...``) and, beside it, the shipped frozen-encoder weights (``--base``):

1. **Gates** (the same as the shipped model's: VAE round trip >= 0.9, single-subject presence >= 0.8; read from the
   folder's ``toyworld.json`` when ``--gates`` recorded them, else measured).
2. **The text encoder**: cosine between "a red circle" / "a red square" at the shape token and between colours at
   the colour token (a collapse of the shape words shows here), the subjects' anchor cosine, SCI's saliency and the
   size of its update against the size of a one-word change.
3. **The errors SCI targets, off Comp-Attn** (the error gate): held-out test relation prompts whose two subjects
   differ in colour and shape, x seeds, each video classified by the exact detector
   (``evaluate.two_subject_error``): correct, attribute swap, merge, drop one, drop both, other shape error; and
   the binding excess: how much more often a subject's colour is drawn with the OTHER subject's shape than with
   that same wrong shape when the other subject does not have it (0 for a model without binding confusion).
4. **If it makes them**: SCI strength chosen on the VALIDATION prompts only; on the test prompts SCI alone, LAM
   alone and LAM + SCI ("both") vs off, paired per-prompt CIs; a placebo (SCI at the chosen strength driven by
   ANOTHER prompt's subject phrases: anchors of subjects that share no colour and no shape with the prompt's); a
   dose response over SCI strength (SCI alone).

    python benchmarks/sci_study.py --quick                      # 6 test and 4 validation prompts, one seed
    python benchmarks/sci_study.py --smoke                      # 2 test and 1 validation prompt, strength 2
    python benchmarks/sci_study.py --cache /tmp/sci.json --out generation/toyworld/figures/sci_study.json
    # the model on the frozen MiniLM (docs/results/sci-minilm.md), with the leakage table of the three encoders
    python benchmarks/sci_study.py --model generation/toyworld/weights_minilm \\
        --base generation/toyworld/weights_trained_te --label MiniLM --base-label "trained UMT5" --lam-placebo \\
        --leakage --seeds 10,11,12 --dose-seeds 10,11,12 --val-seeds 1000,1001 --strengths 1,4,16 \\
        --cache /tmp/sci-minilm.json --out generation/toyworld/figures/sci_minilm.json

Every video is judged on the rendered frames. ``--cache`` keeps finished videos (resumable); the last line of stdout
is one JSON object (also written to ``--out``).
"""

from __future__ import annotations

import argparse
import contextlib
import pathlib
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from _common import emit_json, print_table  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
TRAINED_TE = ROOT / "generation" / "toyworld" / "weights_trained_te"
ERROR_KEYS = ("correct", "swap", "merge", "drop_one", "drop_both", "shape")
FIGURE_KEYS = (
    "presence",
    "presence_colour",
    "relation",
    *(f"err_{k}" for k in ERROR_KEYS),
    "leak",
    "foreign",
)
# the error gate: SCI can only be tested where these errors occur off Comp-Attn, in at least this share of videos
ERROR_GATE = 0.05


# ---- prompts and the placebo ----------------------------------------------------------------------------
def distinct_prompts(prompts: Sequence[str]) -> list[str]:
    """The relation prompts whose two subjects differ in colour AND shape (where a swap is defined)."""
    from vidlab.generation.toyworld.leakage import two_subject_prompts

    return two_subject_prompts(prompts)


def subject_phrases(prompt: str) -> list[str]:
    """The subject phrases SCI sees for ``prompt`` (the rule planner's, as ``vidlab generate`` plans them)."""
    from vidlab.generation.toyworld.evaluate import planned_layout

    return [s.phrase for s in planned_layout(prompt).subjects]


def placebo_phrases(prompts: Sequence[str], pool: Sequence[str] | None = None) -> dict[str, list[str]]:
    """For each prompt, the subject phrases of another prompt of ``pool`` (default: ``prompts``) that shares as few
    colours and shapes with it as possible (none where one exists; the first such after it, cyclically), in that
    prompt's order: SCI's placebo anchors."""
    from vidlab.generation.toyworld.world import parse_caption

    pool = list(pool if pool is not None else prompts)
    out: dict[str, list[str]] = {}
    for p in prompts:
        mine = parse_caption(p).subjects
        cols, shapes = {s[0] for s in mine}, {s[1] for s in mine}
        start = pool.index(p) + 1 if p in pool else 0
        order = [pool[(start + k) % len(pool)] for k in range(len(pool))]

        def shared(q: str, cols: set[str] = cols, shapes: set[str] = shapes) -> int:
            subs = parse_caption(q).subjects
            return len(cols & {s[0] for s in subs}) + len(shapes & {s[1] for s in subs})

        cands = [q for q in order if q != p]
        if not cands:
            raise ValueError(f"no other prompt to take placebo phrases from for {p!r}")
        out[p] = subject_phrases(min(cands, key=shared))  # min keeps the first of the least overlapping
    return out


@contextlib.contextmanager
def placebo_anchors(table: dict[tuple[str, ...], list[str]]) -> Iterator[None]:
    """While active, SCI's anchors are encoded from ``table[true phrases]`` (another prompt's subjects) instead of
    the prompt's own phrases; the token groups SCI updates stay the prompt's own. A phrase tuple missing from the
    table is an error (never a silent fall-back to the true anchors)."""
    import vidlab.generation.sci as sci

    real = sci.encode_anchors

    def wrong(tokenizer: Any, text_encoder: Any, phrases: Sequence[str]) -> Any:
        key = tuple(phrases)
        if key not in table:
            raise KeyError(f"no placebo phrases for subjects {key}")
        return real(tokenizer, text_encoder, table[key])

    sci.encode_anchors = wrong  # type: ignore[assignment]
    try:
        yield
    finally:
        sci.encode_anchors = real  # type: ignore[assignment]


# ---- the text encoder ---------------------------------------------------------------------------------
def _rows(pipe: Any, texts: list[str]) -> Any:
    """Prompt embeddings as the pipeline makes them (the model's own text length), float32 (B, L, d)."""
    import torch

    from vidlab.generation.subjects import model_text_length

    with torch.no_grad():
        emb, _ = pipe.encode_prompt(
            prompt=texts,
            do_classifier_free_guidance=False,
            max_sequence_length=model_text_length(pipe.tokenizer),
            device="cpu",
        )
    return emb.float()


def _mean_cos(a: Any, b: Any) -> float:
    import torch.nn.functional as F

    return float(F.cosine_similarity(a, b, dim=-1).mean())


def _word_states(pipe: Any, texts: list[str], word: int) -> Any:
    """Each text's word ``word`` (whitespace index) as the pipeline's encoder outputs it (its tokens' mean: the
    word tokenizer has one token per word, MiniLM's WordPiece one or two after [CLS])."""
    import torch

    from vidlab.generation.toyworld.leakage import word_rows

    return torch.stack([r[word] for r in word_rows(pipe.tokenizer, _rows(pipe, texts), texts)])


def token_cosines(pipe: Any) -> dict[str, Any]:
    """Cosines between single-subject captions that differ in one word, at that word (word 2 = shape, 1 = colour of
    "a <colour> <shape>"), in the encoder's output and after the transformer's text projection."""
    import itertools

    import torch

    from vidlab.generation.toyworld.world import COLOURS, SHAPES

    proj = pipe.transformer.condition_embedder.text_embedder
    out: dict[str, Any] = {}
    for what, pos, pairs in (
        (
            "shape",
            2,
            [(f"a {c} {s}", f"a {c} {t}") for c in COLOURS for s, t in itertools.combinations(SHAPES, 2)],
        ),
        (
            "colour",
            1,
            [(f"a {c} {s}", f"a {d} {s}") for s in SHAPES for c, d in itertools.combinations(COLOURS, 2)],
        ),
    ):
        a = _word_states(pipe, [x for x, _ in pairs], pos)
        b = _word_states(pipe, [y for _, y in pairs], pos)
        with torch.no_grad():
            pa, pb = proj(a), proj(b)
        out[what] = {
            "encoder": round(_mean_cos(a, b), 4),
            "projected": round(_mean_cos(pa, pb), 4),
            "pairs": len(pairs),
        }
    return out


def sci_geometry(pipe: Any, prompts: Sequence[str]) -> dict[str, Any]:
    """What SCI sees on ``prompts``: the two anchors' cosine, saliency, the update's norm at strength 1 as a share
    of the subject tokens' norm, and the move of the same tokens when one colour word of the prompt is changed."""
    import torch

    from vidlab.generation.sci import compute_sci, encode_anchors
    from vidlab.generation.subjects import model_text_length, subject_token_indices
    from vidlab.generation.toyworld.world import COLOURS, parse_caption

    cos_a, sal, upd, swap_move = [], [], [], []
    for p in prompts:
        phrases = subject_phrases(p)
        groups = subject_token_indices(pipe.tokenizer, p, phrases, model_text_length(pipe.tokenizer))
        emb = _rows(pipe, [p])[0]
        anchors = encode_anchors(pipe.tokenizer, pipe.text_encoder, phrases)
        plan = compute_sci(emb, groups, anchors)
        cos_a.append(float(torch.nn.functional.cosine_similarity(anchors[0], anchors[1], dim=0)))
        sal += plan.saliency
        toks = [i for g in groups for i in g]
        norm = emb[toks].norm(dim=-1).mean()
        upd.append(float(plan.update[toks].norm(dim=-1).mean() / norm))
        colour = parse_caption(p).subjects[0][0]
        other = next(c for c in COLOURS if c not in p.split())
        moved = _rows(pipe, [p.replace(colour, other, 1)])[0]
        swap_move.append(float((moved[toks] - emb[toks]).norm(dim=-1).mean() / norm))
    return {
        "anchor_cosine": round(float(np.mean(cos_a)), 4),
        "saliency": round(float(np.mean(sal)), 4),
        "update_over_token_norm_at_strength_1": round(float(np.mean(upd)), 4),
        "one_colour_word_changed_move_over_token_norm": round(float(np.mean(swap_move)), 4),
        "prompts": len(prompts),
    }


def weight_change(model: pathlib.Path, base: pathlib.Path) -> dict[str, float | None]:
    """Relative change of each part's weights, ||model - base|| / ||base|| over all tensors (how far training moved);
    None for a part of another kind (a MiniLM projection against a UMT5)."""
    from safetensors.torch import load_file

    out: dict[str, float | None] = {}
    for part in ("text_encoder", "transformer", "vae"):
        a = load_file(next((base / part).glob("*.safetensors")))
        b = load_file(next((model / part).glob("*.safetensors")))
        if set(a) != set(b):
            out[part] = None
            continue
        num = sum(float((b[k].float() - a[k].float()).pow(2).sum()) for k in a)
        den = sum(float(a[k].float().pow(2).sum()) for k in a)
        out[part] = round((num / den) ** 0.5, 4)
    return out


# ---- records and summaries ----------------------------------------------------------------------------
def derive(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Flatten each record's ``error`` into numbers: ``err_<class>`` (0/1), ``leak``, ``foreign``."""
    out = []
    for r in records:
        e = r.get("error")
        if not e:
            continue
        r = dict(r)
        for k in ERROR_KEYS:
            r[f"err_{k}"] = float(e["class"] == k)
        r["leak"], r["foreign"] = float(e["leak"]), float(e["foreign"])
        out.append(r)
    return out


def summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean and bootstrap CI over prompts (per-prompt means over seeds) of every figure."""
    from vidlab.generation.toyworld.evaluate import per_item
    from vidlab.generation.toyworld.metrics import bootstrap_ci

    recs = derive(records)
    out: dict[str, Any] = {"videos": len(recs), "prompts": len({r["item"] for r in recs})}
    for k in FIGURE_KEYS:
        m, lo, hi = bootstrap_ci(list(per_item(recs, k).values()))
        out[k] = None if np.isnan(m) else {"mean": round(m, 4), "ci": [round(lo, 4), round(hi, 4)]}
    out["binding_excess"] = binding_excess(recs)
    out["placement"] = placement(recs)
    return out


def placement(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Where the two subjects stand in the videos that draw both (colour and shape): the share in which the
    caption's relation holds and the share in which the opposite one holds (what a layout with the boxes swapped
    asks for). Off Comp-Attn both are near chance; a method that follows its layout moves them apart."""
    both = [r for r in records if r.get("presence")]

    def share(key: str) -> float | None:
        return round(sum(bool(r.get(key)) for r in both) / len(both), 4) if both else None

    return {"videos_with_both": len(both), "relation": share("relation"), "opposite": share("swapped")}


def paired_effects(base: list[dict[str, Any]], other: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-prompt paired differences other - base, bootstrap CI, for every figure."""
    from vidlab.generation.toyworld.evaluate import per_item
    from vidlab.generation.toyworld.metrics import paired_ci

    a, b = derive(base), derive(other)
    out: dict[str, Any] = {}
    for k in FIGURE_KEYS:
        m, lo, hi, n = paired_ci(per_item(a, k), per_item(b, k))
        out[k] = None if n == 0 else {"diff": round(m, 4), "ci": [round(lo, 4), round(hi, 4)], "n": n}
    return out


def binding_excess(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Is a wrong shape the OTHER subject's shape more often than the same wrong shape is drawn without it there?

    For every subject instance (colour c, told shape s, the other subject's shape o) and every wrong shape w != s,
    "c drawn as w" (from the record's ``drawn`` lists) goes in the bucket (s, w, leak = (w == o)). The excess is
    the mean over (s, w) of rate(leak) - rate(no leak), weighted by the leak instances: a size or shape confusion
    the model makes anyway (circle <-> square have the same area here) cancels, a binding confusion does not.
    """
    from vidlab.generation.toyworld.world import SHAPES

    buckets: dict[tuple[str, str, bool], list[float]] = {}
    for r in records:
        e = r.get("error") or {}
        for told, other, drawn in e.get("subjects", []):
            for w in SHAPES:
                if w != told:
                    buckets.setdefault((told, w, w == other), []).append(float(w in drawn))
    diffs, weights = [], []
    for (s, w, leak), vals in buckets.items():
        if leak and (s, w, False) in buckets:
            diffs.append(np.mean(vals) - np.mean(buckets[(s, w, False)]))
            weights.append(len(vals))
    if not diffs:
        return {"excess": None}
    leak_rate = float(np.mean([v for (s, w, lk), vs in buckets.items() if lk for v in vs]))
    return {
        "excess": round(float(np.average(diffs, weights=weights)), 4),
        "leak_rate": round(leak_rate, 4),
        "pairs": len(diffs),
    }


# ---- generation ---------------------------------------------------------------------------------------
class Study:
    """One model's pipeline, its fingerprint and a shared record cache; ``run`` = ``evaluate.run_method``."""

    def __init__(self, model: pathlib.Path, cache: Any, run_id: str) -> None:
        from vidlab.generation.toyworld.evaluate import (
            SamplingConfig,
            load_toyworld_pipeline,
            model_fingerprint,
        )

        self.model = model
        self.pipe = load_toyworld_pipeline(model)
        self.sampling = SamplingConfig.from_model(model)
        self.fp = model_fingerprint(self.pipe)
        self.cache = cache
        self.run_id = run_id
        # one entry per distinct video (a setting run twice, e.g. the chosen strength in the dose, counts once):
        # the seconds it took when it was made (cached ones too)
        self.videos: dict[str, float] = {}

    def run(
        self,
        method: str,
        prompts: Sequence[str],
        seeds: Sequence[int],
        sci: float | None = None,
        placebo: dict[str, list[str]] | None = None,
    ) -> list[dict[str, Any]]:
        from vidlab.generation.toyworld.evaluate import multi_items, run_method

        ov = {} if sci is None else {"sci.strength": float(sci)}
        fp = self.fp + ("|sci-placebo-anchors" if placebo else "")  # its own cache keys
        desc = f"{self.model.name}:{method}" + ("" if sci is None else f"@{sci}")
        anchors = (
            placebo_anchors({tuple(subject_phrases(p)): placebo[p] for p in prompts})
            if placebo
            else contextlib.nullcontext()
        )
        with anchors:
            records = run_method(
                self.pipe,
                method,
                multi_items(prompts),
                seeds,
                self.sampling,
                overrides=ov,
                cache=self.cache,
                fingerprint=fp,
                run_id=self.run_id,
                desc=desc,
            )
        for r in records:
            self.videos[f"{fp}|{desc}|{r['item']}|{r['seed']}"] = float(r.get("seconds") or 0.0)
        return records


def gates_of(model: pathlib.Path, measure: bool) -> dict[str, Any]:
    """The folder's recorded gates (``toyworld.json``), or measured and recorded now (``measure``)."""
    import json

    meta = json.loads((model / "toyworld.json").read_text())
    if "gates" not in meta and measure:
        from vidlab.generation.toyworld.gates import record_gates

        record_gates(model)
        meta = json.loads((model / "toyworld.json").read_text())
    g = meta.get("gates") or {}
    if not g:
        return {"measured": False}
    return {
        "vae_roundtrip_min": g["vae_roundtrip"]["min"],
        "vae_passed": g["vae_roundtrip"]["passed"],
        "single_presence": g["single_presence"]["presence"],
        "single_presence_colour": g["single_presence"]["presence_colour"],
        "single_passed": g["single_presence"]["passed"],
        "how": [g["vae_roundtrip"]["how"], g["single_presence"]["how"]],
    }


# how the study's model was made (two resumable chunks of one run: dit_steps=1000, then 2000 on the same ckpt_dir)
TRAIN_COMMAND = (
    "vidlab train-gen-toyworld --out generation/toyworld/weights_trained_te init_from=generation/toyworld/weights "
    "train_text_encoder=true dit_te_lr_scale=10 dit_lr=1e-4 dit_steps=2000 dit_anneal_steps=0 eval_every=1000 "
    "ckpt_dir=CK"
)
TRAIN_KEYS = (
    "train_text_encoder",
    "dit_te_lr_scale",
    "dit_lr",
    "dit_steps",
    "dit_anneal_steps",
    "dit_batch",
    "ema",
)


def training_record(model: pathlib.Path, command: str = TRAIN_COMMAND) -> dict[str, Any]:
    """What the model's ``toyworld.json`` says about how it was made: start, settings, checkpoint figures."""
    import json

    meta = json.loads((model / "toyworld.json").read_text())
    cfg = meta.get("config") or {}
    return {
        "init_from": meta.get("init_from"),
        "text_encoder": meta.get("text_encoder"),
        "settings": {k: cfg.get(k) for k in TRAIN_KEYS},
        "checkpoints": [
            {k: e.get(k) for k in ("step", "single_presence", "single_per_shape", "swap_0.7", "loss")}
            for e in meta.get("evals") or []
        ],
        "dit_loss_last50": meta.get("dit_loss_last50"),
        "seconds_this_run": meta.get("seconds_this_run"),
        "command": command,
    }


def _excludes_zero(d: dict[str, Any] | None) -> bool:
    return bool(d) and (d["ci"][0] > 0 or d["ci"][1] < 0)  # type: ignore[index]


def conclusion(res: dict[str, Any]) -> dict[str, Any]:
    """Gated (the model makes no errors SCI targets), or SCI's effect: which figures its paired CI moves, and
    whether SCI differs from its placebo there."""
    gate = res["error_gate"]
    if not gate["passed"]:
        return {
            "kind": "gated",
            "text": f"the model makes the errors SCI targets in {gate['targeted_rate']:.3f} of the videos "
            f"(< {ERROR_GATE}): SCI cannot be tested on it",
        }
    if "paired_vs_off" not in res:
        return {"kind": "errors measured", "text": "the error gate passed; SCI not run (parts)"}
    keys = ("presence", "err_swap", "err_merge", "err_drop_one", "leak")
    sci = res["paired_vs_off"]["sci"]
    moved = sorted(k for k in keys if _excludes_zero(sci.get(k)))
    vs_placebo = sorted(k for k in keys if _excludes_zero(res["paired"]["sci_minus_placebo"].get(k)))
    both_lam = res["paired"].get("both_minus_lam") or {}
    over_lam = sorted(k for k in keys if _excludes_zero(both_lam.get(k)))
    kind = "effect" if moved and vs_placebo else "no effect"
    lam = res["paired_vs_off"].get("lam") or {}
    lam_vs_placebo = res["paired"].get("lam_minus_placebo") or {}
    return {
        "kind": kind,
        "sci_moves": moved,
        "sci_differs_from_placebo_on": vs_placebo,
        "both_differs_from_lam_on": over_lam,
        "lam_moves": sorted(k for k in (*keys, "relation") if _excludes_zero(lam.get(k))),
        "lam_differs_from_placebo_on": sorted(
            k for k in (*keys, "relation") if _excludes_zero(lam_vs_placebo.get(k))
        ),
        "text": (
            "the model makes the errors SCI targets (swap, merge, drop one: "
            f"{gate['targeted_rate']:.3f} of the videos off Comp-Attn), and SCI "
            + (
                f"moves {', '.join(moved)} (paired CI excludes 0) and differs from its placebo on "
                f"{', '.join(vs_placebo)}"
                if kind == "effect"
                else "does not measurably fix them: "
                + (
                    "no paired CI excludes 0"
                    if not moved
                    else f"it moves {', '.join(moved)}, but not apart from its placebo"
                )
            )
        ),
    }


# the paired differences vs off each dose records (beside the presence one)
DOSE_PAIRED = ("presence_colour", "err_swap", "err_merge", "err_drop_one", "leak")


# the per-video figures a setting's row shows (each its mean over the videos), in table order
ROW_FIGURES = (
    "presence",
    "err_swap",
    "err_merge",
    "err_drop_one",
    "err_drop_both",
    "err_shape",
    "leak",
    "foreign",
)


def _row(name: str, s: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {"setting": name}
    for k in ROW_FIGURES:
        row[k] = (s.get(k) or {}).get("mean")
    row["excess"] = s["binding_excess"].get("excess")
    return row


def _floats(text: str) -> list[float]:
    return [float(v) for v in text.split(",") if v.strip()]


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v.strip()]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=str(TRAINED_TE), help="toy-world folder with the trained text encoder")
    p.add_argument("--base", default=None, help="the frozen-encoder folder to compare (default: the shipped)")
    p.add_argument("--seeds", default="0,1,2,3", help="test seeds")
    p.add_argument("--dose-seeds", default="0,1", help="test seeds of the dose response")
    p.add_argument(
        "--val-seeds", default="1000,1001,1002,1003", help="validation seeds (SCI strength choice)"
    )
    p.add_argument(
        "--strengths", default="0.5,1,2,4,8", help="SCI strengths (validation grid and dose response)"
    )
    p.add_argument(
        "--dose-strengths", default=None, help="SCI strengths of the dose response (default: --strengths)"
    )
    p.add_argument("--no-base-sci", action="store_true", help="skip SCI on the frozen-encoder model")
    p.add_argument(
        "--no-base", action="store_true", help="run nothing on the base model (its figures: gates, encoder)"
    )
    p.add_argument("--no-lam", action="store_true", help="skip LAM and LAM + SCI on the test prompts")
    p.add_argument(
        "--lam-placebo",
        action="store_true",
        help="also LAM fed a layout that contradicts the prompt (its control: relation should fall below off)",
    )
    p.add_argument("--label", default="trained TE", help="the model's name in the table")
    p.add_argument("--base-label", default="frozen TE", help="the base model's name in the table")
    p.add_argument(
        "--text-encoder", default="trained", help="what the model's text encoder is (for the record)"
    )
    p.add_argument("--train-command", default=TRAIN_COMMAND, help="how the model was made (for the record)")
    p.add_argument(
        "--leakage", action="store_true", help="add the attribute-leakage table (benchmarks/sci_leakage.py)"
    )
    p.add_argument("--test-every", type=int, default=1, help="every k-th test prompt only (a cheaper run)")
    p.add_argument(
        "--parts", default="errors,calibrate,test,dose", help="what to run (the cache keeps the rest)"
    )
    p.add_argument("--cache", default=None, help="JSON file of finished videos (resumable)")
    p.add_argument("--out", default=None, help="write the JSON here too")
    p.add_argument("--measure-gates", action="store_true", help="measure and record the gates when missing")
    p.add_argument(
        "--quick", action="store_true", help="smoke run: 6 test and 4 validation prompts, one seed"
    )
    p.add_argument(
        "--smoke",
        action="store_true",
        help="every part on 2 test and 1 validation prompt, one seed, strength 2",
    )
    args = p.parse_args(argv)
    if args.smoke:
        args.quick, args.strengths, args.dose_strengths = True, "2", None
    try:
        seeds, dose_seeds, val_seeds = _ints(args.seeds), _ints(args.dose_seeds), _ints(args.val_seeds)
        strengths = _floats(args.strengths)
        dose_strengths = _floats(args.dose_strengths) if args.dose_strengths else strengths
    except ValueError as exc:
        print(f"sci_study: bad number list ({exc})", file=sys.stderr)
        return 2
    parts = {x.strip() for x in args.parts.split(",") if x.strip()}
    bad = parts - {"errors", "calibrate", "test", "dose"}
    model = pathlib.Path(args.model)
    if (
        bad
        or not (model / "model_index.json").is_file()
        or not strengths
        or min(strengths + dose_strengths) <= 0
    ):
        why = (
            f"unknown parts {sorted(bad)}"
            if bad
            else (
                f"no toy-world pipeline at {model}"
                if not (model / "model_index.json").is_file()
                else "strengths must be > 0"
            )
        )
        print(f"sci_study: {why}", file=sys.stderr)
        return 2

    from vidlab.generation.toyworld.evaluate import RecordCache
    from vidlab.generation.toyworld.model import WEIGHTS_DIR
    from vidlab.generation.toyworld.splits import test_prompts, val_prompts

    base_dir = pathlib.Path(args.base) if args.base else WEIGHTS_DIR
    test, val = distinct_prompts(test_prompts()), distinct_prompts(val_prompts())
    pool = list(test)  # the placebo's phrases come from the whole test set, also in a quick run
    test = test[:: max(1, args.test_every)]
    if args.quick:
        n_test, n_val = (2, 1) if args.smoke else (6, 4)
        test, val, seeds, dose_seeds, val_seeds = (
            test[:n_test],
            val[:n_val],
            seeds[:1],
            seeds[:1],
            val_seeds[:1],
        )
    cache = RecordCache(pathlib.Path(args.cache) if args.cache else None)
    run_id = f"{time.time():.0f}"
    t0 = time.perf_counter()
    trained, base = Study(model, cache, run_id), Study(base_dir, cache, run_id)
    res: dict[str, Any] = {
        "what": f"SCI on a toy-world Wan, text encoder: {args.text_encoder} (benchmarks/sci_study.py)",
        "command": "python benchmarks/sci_study.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "model": {
            "path": str(model.relative_to(ROOT) if model.is_relative_to(ROOT) else model),
            "fingerprint": trained.fp,
            "text_encoder": args.text_encoder,
        },
        "base_model": {
            "path": str(base_dir.relative_to(ROOT) if base_dir.is_relative_to(ROOT) else base_dir),
            "fingerprint": base.fp,
            "text_encoder": "frozen at its random initialisation",
        },
        "sampling": vars(trained.sampling),
        "prompts": {
            "test": len(test),
            "val": len(val),
            "rule": "held-out relation prompts whose two subjects differ in colour and shape (splits.py)",
        },
        "seeds": {"test": seeds, "dose": dose_seeds, "val": val_seeds},
        "gates": {"model": gates_of(model, args.measure_gates), "base_model": gates_of(base_dir, False)},
        "text_encoder": {
            "model": {"token_cosines": token_cosines(trained.pipe), "sci": sci_geometry(trained.pipe, test)},
            "base_model": {"token_cosines": token_cosines(base.pipe), "sci": sci_geometry(base.pipe, test)},
            "relative_weight_change_vs_base": weight_change(model, base_dir),
        },
    }
    if args.leakage:
        from sci_leakage import leakage_table

        res["leakage"] = leakage_table(model)
    rows = []
    lab, blab = args.label, args.base_label
    off = trained.run("baseline", test, seeds)
    res["errors_off"] = {"model": summary(off)}
    rows.append(_row(f"{lab}, off", res["errors_off"]["model"]))
    if not args.no_base:
        off_base = base.run("baseline", test, seeds)
        res["errors_off"]["base_model"] = summary(off_base)
        rows.append(_row(f"{blab}, off", res["errors_off"]["base_model"]))
    s_off = res["errors_off"]["model"]
    targeted = sum((s_off.get(f"err_{k}") or {}).get("mean") or 0.0 for k in ("swap", "merge", "drop_one"))
    res["error_gate"] = {
        "rule": f"swap + merge + drop_one off Comp-Attn >= {ERROR_GATE} of the videos",
        "targeted_rate": round(targeted, 4),
        "passed": bool(targeted >= ERROR_GATE),
    }
    if res["error_gate"]["passed"] and parts & {"calibrate", "test", "dose"}:
        # 1. SCI strength on validation only: the most presence (ties: the smaller strength)
        val_off = trained.run("baseline", val, val_seeds)
        sweep = {}
        for s in strengths:
            sm = summary(trained.run("sci", val, val_seeds, sci=s))
            sweep[s] = {
                "presence": sm["presence"]["mean"],
                "swap": sm["err_swap"]["mean"],
                "drop_one": sm["err_drop_one"]["mean"],
                "merge": sm["err_merge"]["mean"],
            }
        chosen = max(strengths, key=lambda s: (sweep[s]["presence"], -s))
        res["calibration"] = {
            "split": "validation",
            "baseline": summary(val_off)["presence"],
            "sweep": sweep,
            "chosen_sci_strength": chosen,
            "rule": "highest validation presence (colour+shape of both subjects); ties: smaller",
        }
        if "test" in parts:
            runs = {"sci": trained.run("sci", test, seeds, sci=chosen)}
            if not args.no_lam:
                runs["lam"] = trained.run("lam", test, seeds)
                runs["both"] = trained.run("both", test, seeds, sci=chosen)
                if args.lam_placebo:  # LAM fed a layout that contradicts the prompt (the two boxes swapped)
                    runs["lam_placebo"] = trained.run("placebo", test, seeds)
            runs["sci_placebo"] = trained.run(
                "sci", test, seeds, sci=chosen, placebo=placebo_phrases(test, pool)
            )
            res["methods"] = {k: summary(v) for k, v in runs.items()}
            res["paired_vs_off"] = {k: paired_effects(off, v) for k, v in runs.items()}
            res["paired"] = {"sci_minus_placebo": paired_effects(runs["sci_placebo"], runs["sci"])}
            if not args.no_lam:
                res["paired"]["both_minus_lam"] = paired_effects(runs["lam"], runs["both"])
            if "lam_placebo" in runs:
                res["paired"]["lam_minus_placebo"] = paired_effects(runs["lam_placebo"], runs["lam"])
            rows += [_row(f"{lab}, {k}", v) for k, v in res["methods"].items()]
            if not args.no_base_sci and not args.no_base:
                bs = base.run("sci", test, seeds, sci=chosen)
                res["base_model_sci"] = {
                    "summary": summary(bs),
                    "paired_vs_off": paired_effects(off_base, bs),
                }
                rows.append(_row(f"{blab}, sci", res["base_model_sci"]["summary"]))
        if "dose" in parts:
            dose_off = [r for r in off if r["seed"] in dose_seeds]
            so = summary(dose_off)
            dose = {"0": {k: so[k] for k in ("presence", "err_swap", "err_merge", "err_drop_one")}}
            for s in dose_strengths:
                recs = trained.run("sci", test, dose_seeds, sci=s)
                sm, pe = summary(recs), paired_effects(dose_off, recs)
                dose[f"{s:g}"] = {k: sm[k] for k in ("presence", "err_swap", "err_merge", "err_drop_one")}
                dose[f"{s:g}"]["paired_presence"] = pe["presence"]
                dose[f"{s:g}"]["paired"] = {k: pe[k] for k in DOSE_PAIRED}
            res["dose_response"] = {"method": "sci alone", "seeds": dose_seeds, "by_strength": dose}
    cache.flush()
    res["training"] = training_record(model, args.train_command)
    res["conclusion"] = conclusion(res)
    made = {**trained.videos, **base.videos}
    res["compute"] = {
        "videos": len(made),
        "video_minutes": round(sum(made.values()) / 60, 1),  # one thread each, as made (cached videos too)
        "minutes_this_run": round((time.perf_counter() - t0) / 60, 2),  # wall; videos from --cache cost none
    }
    print_table(rows, ["setting", *ROW_FIGURES, "excess"])
    emit_json(res, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
