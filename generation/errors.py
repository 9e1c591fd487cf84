"""Typed errors and warnings of the generation package.

Every mistake a user can make in ``vidlab generate`` or ``CompAttn.generate`` (an empty prompt, a subject
that is not in the prompt, a broken layout file, a model name that names nothing, an output folder that
cannot be written) raises a subclass of :class:`vidlab.errors.UserError`, which ``vidlab <command>`` prints
as one line with exit status 2. They also subclass ``ValueError`` so code that caught the old errors keeps
working. Anything else (a bare ``ValueError`` from a bug) is not a user error and keeps its traceback.
"""

from __future__ import annotations

from vidlab import io as _io
from vidlab.errors import UserError


class GenerationInputError(UserError, ValueError):
    """A generation input (prompt, layout, subjects, model, output folder) that cannot be used as given."""


class EmptyPromptError(GenerationInputError):
    """The prompt is empty or only whitespace."""


class BatchNotSupportedError(GenerationInputError):
    """Several prompts in one Comp-Attn call (layouts and subject tokens are per prompt)."""


class NoSubjectsError(GenerationInputError):
    """LAM was asked for, but the layout has no subject to place."""


class ModelNotFoundError(GenerationInputError):
    """``model=`` names no built-in tiny model, no pipeline folder and no hub id, or it could not be loaded."""


# ``--out`` cannot be created or written: the project's one type for it (vidlab.io.ensure_output_dir).
OutputDirError = _io.OutputDirError


class CompAttnError(UserError, RuntimeError):
    """The pipeline or settings cannot take Comp-Attn (image-conditioned, already applied, bad block index...)."""


class CompAttnBackendError(CompAttnError):
    """LAM needs an additive attention mask, which the selected attention backend does not accept."""


class NoSubjectsWarning(UserWarning):
    """The layout has no subjects, so Comp-Attn (SCI and LAM) changes nothing for this prompt."""


class PromptTruncatedWarning(UserWarning):
    """The prompt is longer than the text encoder's max_sequence_length; the tail is dropped."""
