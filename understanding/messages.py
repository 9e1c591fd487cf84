"""The chat data every VideoBrain piece shares: messages made of text and frames, and the policy interface.

The episode environment builds ``Message`` lists; a ``Policy`` turns them into assistant text.
Policies adapt these to their backend (a Hugging Face processor, an OpenAI-compatible server, a toy model).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

import numpy as np

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True)
class Frame:
    """One video frame shown to the model: pixels plus where it came from."""

    image: np.ndarray  # uint8 [H, W, 3]
    index: int  # frame index in the source video
    timestamp: float  # seconds


@dataclass
class Message:
    """A chat turn: an ordered mix of text and frames (a frame is rendered where it stands)."""

    role: Role
    content: list[str | Frame] = field(default_factory=list)

    @property
    def text(self) -> str:
        """The text parts only, joined; frames are dropped."""
        return "".join(p for p in self.content if isinstance(p, str))

    @property
    def frames(self) -> list[Frame]:
        return [p for p in self.content if isinstance(p, Frame)]


@runtime_checkable
class Policy(Protocol):
    """Anything that continues a conversation with one assistant turn.

    ``generate`` returns ``num_samples`` independent completions of the next assistant turn
    (text only, tags included), sampled at ``temperature`` (0 means greedy).
    """

    name: str

    def generate(
        self,
        messages: list[Message],
        *,
        num_samples: int = 1,
        temperature: float = 0.0,
        max_new_tokens: int = 512,
        seed: int | None = None,
    ) -> list[str]: ...
