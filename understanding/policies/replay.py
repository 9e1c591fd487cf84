"""A real ``Policy`` that replays scripted assistant turns: for tests, demos and debugging the episode loop."""

from __future__ import annotations

from collections.abc import Sequence

from vidlab.understanding.messages import Message


class ReplayPolicy:
    """Returns scripted turn ``i`` when the conversation already holds ``i`` assistant turns.

    Stateless across episodes (the turn number comes from ``messages``), so one instance serves many
    episodes. A turn may be a string or a list of alternatives; sample ``j`` of ``num_samples`` gets
    alternative ``(seed + j) % len`` (so k-sample classification sees a fixed, known mix). ``cycle=True``
    wraps around past the last turn instead of raising.
    """

    def __init__(self, turns: Sequence[str | Sequence[str]], *, cycle: bool = False, name: str = "replay"):
        if isinstance(turns, str):
            turns = [turns]
        if not turns:
            raise ValueError("ReplayPolicy needs at least one scripted turn")
        self.turns: list[list[str]] = [[t] if isinstance(t, str) else [str(x) for x in t] for t in turns]
        if any(not alts for alts in self.turns):
            raise ValueError("ReplayPolicy: a turn's list of alternatives is empty")
        self.cycle = cycle
        self.name = name
        self.calls = 0  # how many times generate() ran (tests check the loop stops)

    def generate(
        self,
        messages: list[Message],
        *,
        num_samples: int = 1,
        temperature: float = 0.0,
        max_new_tokens: int = 512,
        seed: int | None = None,
    ) -> list[str]:
        """The scripted continuation(s) of ``messages``."""
        self.calls += 1
        i = sum(1 for m in messages if m.role == "assistant")
        if i >= len(self.turns):
            if not self.cycle:
                raise IndexError(
                    f"ReplayPolicy {self.name!r}: no scripted turn {i + 1} (script has {len(self.turns)})"
                )
            i %= len(self.turns)
        alts = self.turns[i]
        base = seed or 0
        return [alts[(base + j) % len(alts)] for j in range(num_samples)]
