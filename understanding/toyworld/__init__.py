"""VideoBrain's RL shown end to end on a CPU: a long-video toy world, a trained toy CLIP, SFT then GRPO.

Modules: ``world`` (seeded videos as mp4 + multiple-choice questions), ``clip_train`` (contrastive toy CLIP in
open_clip's own classes), ``policy`` (a frame reader + action head over the toy CLIP that plays the real protocol), ``rl`` (rollouts
through the real ``Episode``/``compute_score``, SFT, GRPO), ``train`` (the resumable pipeline behind
``vidlab train-agent --engine toy``). Shipped weights: ``weights/where/`` (``load_policy("toy:where")``, the default
policy: it serves both worlds) and ``weights/`` (``load_policy("toy:shipped")``, the default world's own).
"""

from __future__ import annotations

from pathlib import Path

WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"
SHIPPED_CLIP = WEIGHTS_DIR / "clip"
# the packaged policies: toy:where (trained on the where-to-look world; it also scores 1.000 on the default world's
# test splits, so it is the default policy, vidlab.understanding.policies.DEFAULT_POLICY, and "toy:default" names it) and
# toy:shipped (trained on the default world only)
SHIPPED = {"shipped": WEIGHTS_DIR, "default": WEIGHTS_DIR / "where", "where": WEIGHTS_DIR / "where"}


def resolve_toy_dir(rest: str) -> Path:
    """``toy:shipped`` -> the packaged weights of the default world, ``toy:where`` -> those of the where-to-look
    world (``weights/where``); ``toy:DIR`` -> DIR (must hold policy.json + policy.safetensors)."""
    from vidlab.understanding.policies.errors import PolicySpecError

    d = SHIPPED[rest] if rest in SHIPPED else Path(rest).expanduser()
    if not (d / "policy.json").is_file() or not (d / "policy.safetensors").is_file():
        what = (
            "the shipped toy weights are missing from this installation"
            if rest in SHIPPED
            else (
                f"{str(d)!r} holds no policy.json + policy.safetensors (train one: vidlab train-agent --engine toy)"
            )
        )
        raise PolicySpecError(f"toy:{rest}", what)
    return d


class ToyPolicySpec:
    """``toy:shipped`` / ``toy:where`` / ``toy:DIR`` in the policy registry (``vidlab.policies`` entry point ``toy``).

    The toy world registers its policy itself, so ``vidlab.understanding.policies`` never imports the toy world.
    """

    @staticmethod
    def check_spec(rest: str) -> None:
        resolve_toy_dir(rest)

    @staticmethod
    def clip_model(rest: str) -> str | None:
        """The toy CLIP this policy was trained with (``DIR/clip``; the shipped ones for ``toy:shipped`` and
        ``toy:where``), which ``vidlab qa`` / ``eval-qa`` / ``classify`` and the demo use for ``clip_sample`` unless
        told otherwise."""
        d = SHIPPED.get(rest or "default") or Path(rest).expanduser()
        clip = d / "clip"
        return str(clip) if (clip / "open_clip_config.json").is_file() else None

    @staticmethod
    def from_spec(rest: str, **kw: object) -> object:
        from vidlab.understanding.toyworld.nets import load_toy_policy

        return load_toy_policy(resolve_toy_dir(rest), **kw)
