"""Scripted policies with no model: a fixed answer (a floor), and a pixel-reading colour finder (an agent script).

``PixelColourPolicy`` is a real, frame-reading policy for the synthetic needle benchmark: it answers "yes" as
soon as any frame it was shown holds enough pixels of the target colour; otherwise, while the episode offers
``uniform_sample`` and budget remains, it asks for 8 frames from the next unexplored segment of the video
(the video is cut into ``max_calls`` segments), and finally answers "no". It stops calling as soon as the
evidence is in, so it shows the adaptive trade-off (accuracy vs frames) without any model.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np

from vidlab.understanding.messages import Message
from vidlab.video.synth import COLORS


@dataclass
class ConstantPolicy:
    """Always answers ``answer`` at once, without tool calls (a floor that any real policy must beat)."""

    answer: str = "A"
    name: str = ""

    def __post_init__(self) -> None:
        self.name = self.name or f"const:{self.answer}"

    def generate(
        self,
        messages: list[Message],
        *,
        num_samples: int = 1,
        temperature: float = 0.0,
        max_new_tokens: int = 512,
        seed: int | None = None,
    ) -> list[str]:
        """The same direct answer ``num_samples`` times."""
        text = f"<thinking>I answer {self.answer} without looking further.</thinking><answer>{self.answer}</answer>"
        return [text] * num_samples


_OPTION = re.compile(r"(?m)^([A-Z])\. (.+)$")
_TOTAL = re.compile(r"Total frames: (\d+)")


@dataclass
class PixelColourPolicy:
    """Answers "is COLOUR visible?" from the pixels of the frames shown; calls uniform_sample while unsure."""

    colour: str = "red"
    tolerance: int = 40  # per-channel distance to the colour's RGB value
    min_pixels: int = 20
    max_calls: int = 5
    name: str = ""

    def __post_init__(self) -> None:
        if self.colour not in COLORS:
            raise ValueError(f"colour must be one of {sorted(COLORS)}, got {self.colour!r}")
        self.name = self.name or f"pixel:{self.colour}"
        self.rgb = np.array(COLORS[self.colour], dtype=np.int16)

    def seen(self, messages: list[Message]) -> bool:
        """True if any frame in the conversation has ``min_pixels`` pixels of the colour."""
        for m in messages:
            for f in m.frames:
                close = (np.abs(f.image.astype(np.int16) - self.rgb) <= self.tolerance).all(-1)
                if int(close.sum()) >= self.min_pixels:
                    return True
        return False

    def generate(
        self,
        messages: list[Message],
        *,
        num_samples: int = 1,
        temperature: float = 0.0,
        max_new_tokens: int = 512,
        seed: int | None = None,
    ) -> list[str]:
        """One turn: "yes" if seen, else the next segment's uniform_sample, else "no"."""
        user = next((m.text for m in messages if m.role == "user"), "")
        letters = {text.strip().lower(): letter for letter, text in _OPTION.findall(user)}
        yes, no = letters.get("yes", "A"), letters.get("no", "B")
        if self.seen(messages):
            text = f"<thinking>I see {self.colour} in a frame.</thinking><answer>{yes}</answer>"
            return [text] * num_samples
        calls = sum("<tool_call>" in m.text for m in messages if m.role == "assistant")
        tools = "uniform_sample" in (messages[0].text if messages else "")
        total = _TOTAL.search(user)
        final = "prohibited" in (messages[-1].text if messages else "")
        if tools and total and calls < self.max_calls and not final:
            n = int(total.group(1))
            seg = max(1, n // self.max_calls)
            start, end = calls * seg, n if calls == self.max_calls - 1 else (calls + 1) * seg
            args = {"start_frame": start, "end_frame": end}
            text = (
                f"<thinking>No {self.colour} yet; look closer at frames {start}-{end}.</thinking>"
                f'<tool_call>{{"name": "uniform_sample", "arguments": {json.dumps(args)}}}</tool_call>'
            )
            return [text] * num_samples
        text = f"<thinking>No {self.colour} in any frame I saw.</thinking><answer>{no}</answer>"
        return [text] * num_samples
