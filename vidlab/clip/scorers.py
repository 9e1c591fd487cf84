"""Pluggable top-k scorers over a matrix of unit-norm embeddings: exact (default) and faiss IVF (optional).

``ExactScorer`` keeps the fp16 matrix as a torch tensor and does one fp16 matrix-vector product per
query (~70 ms for 1M x 512 on one CPU core), then rescores in fp32 every row within ``MARGIN`` of the
k-th fp16 score. fp16 rounding of the query and of the scores moves a score by < 1e-3 for unit
vectors, so the result is the exact fp32 top-k over the stored fp16 embeddings. ``FaissIVFScorer``
(``pip install faiss-cpu``) clusters the rows into ``nlist`` cells and scans ``nprobe`` of them: far fewer
rows per query at corpus scale, at the cost of recall, which ``recall_at_k`` measures against exact.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np


class Scorer(Protocol):
    """Top-k inner-product search: ``search(queries [Q, D], k) -> (scores [Q, k'], rows [Q, k'])``."""

    size: int

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]: ...


def _as_queries(queries: np.ndarray, dim: int) -> np.ndarray:
    q = np.asarray(queries, dtype=np.float32)
    if q.ndim == 1:
        q = q[None]
    if q.ndim != 2 or q.shape[1] != dim:
        raise ValueError(f"queries must be [Q, {dim}], got shape {tuple(np.shape(queries))}")
    return q


MARGIN = 2e-3  # > worst-case |fp16 score - fp32 score| for unit vectors (2 x 2^-11)


class ExactScorer:
    """Exact top-k by inner product (cosine for unit vectors) with torch matmul over an fp16 matrix."""

    def __init__(self, embeddings: np.ndarray) -> None:
        import torch

        emb = np.ascontiguousarray(embeddings)
        if emb.ndim != 2:
            raise ValueError(f"embeddings must be [N, D], got shape {emb.shape}")
        if emb.dtype not in (np.float16, np.float32):
            emb = emb.astype(np.float32)
        self.matrix = torch.from_numpy(emb.copy() if not emb.flags.writeable else emb)
        self.size, self.dim = emb.shape

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        import torch

        q = torch.from_numpy(_as_queries(queries, self.dim)).to(self.matrix.dtype)
        k = min(int(k), self.size)
        if k < 1:
            return np.zeros((q.shape[0], 0), np.float32), np.zeros((q.shape[0], 0), np.int64)
        q32 = torch.from_numpy(_as_queries(queries, self.dim))
        vals, rows = [], []
        with torch.inference_mode():  # one mat-vec per query: memory-bound, faster than a CPU mat-mat here
            for j in range(q.shape[0]):
                scores = torch.mv(self.matrix, q[j]).float()
                v, i = torch.topk(scores, k)
                if self.matrix.dtype == torch.float16:  # exact fp32 rescoring of everything near the k-th
                    cand = torch.nonzero(scores >= v[-1] - MARGIN).flatten()
                    v, sel = torch.topk(self.matrix[cand].float() @ q32[j], k)
                    i = cand[sel]
                vals.append(v)
                rows.append(i)
        return torch.stack(vals).numpy(), torch.stack(rows).numpy().astype(np.int64)


class FaissIVFScorer:
    """Approximate top-k with faiss ``IndexIVFFlat`` (inner product); ``nprobe`` trades speed for recall."""

    def __init__(
        self,
        embeddings: np.ndarray,
        nlist: int | None = None,
        nprobe: int = 16,
        train_size: int = 65536,
        seed: int = 0,
    ) -> None:
        try:
            import faiss
        except ImportError as e:  # pragma: no cover - faiss is optional
            raise ImportError("the faiss scorer needs faiss-cpu: pip install 'vidlab[ann]'") from e
        x = np.ascontiguousarray(embeddings, dtype=np.float32)
        self.size, self.dim = x.shape
        self.nlist = nlist or max(1, min(4096, int(4 * np.sqrt(self.size))))
        quantizer = faiss.IndexFlatIP(self.dim)
        self.index = faiss.IndexIVFFlat(quantizer, self.dim, self.nlist, faiss.METRIC_INNER_PRODUCT)
        rng = np.random.default_rng(seed)
        sample = (
            x if self.size <= train_size else x[np.sort(rng.choice(self.size, train_size, replace=False))]
        )
        self.index.train(sample)
        self.index.add(x)
        self.index.nprobe = min(nprobe, self.nlist)
        self._quantizer = quantizer  # keep alive

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        q = _as_queries(queries, self.dim)
        k = min(int(k), self.size)
        scores, rows = self.index.search(q, k)
        return scores.astype(np.float32), rows.astype(np.int64)


SCORERS: dict[str, type] = {"exact": ExactScorer, "faiss": FaissIVFScorer}


def make_scorer(name: str, embeddings: np.ndarray, **kwargs: Any) -> Scorer:
    """Build a scorer by name: ``exact`` (default) or ``faiss``."""
    if name not in SCORERS:
        raise ValueError(f"unknown scorer {name!r}; choose from {sorted(SCORERS)}")
    return SCORERS[name](embeddings, **kwargs)


def recall_at_k(approx_rows: np.ndarray, exact_rows: np.ndarray) -> float:
    """Mean fraction of the exact top-k rows that the approximate search also returned."""
    hits = [len(set(a.tolist()) & set(e.tolist())) / max(1, len(e)) for a, e in zip(approx_rows, exact_rows)]
    return float(np.mean(hits)) if hits else 0.0
