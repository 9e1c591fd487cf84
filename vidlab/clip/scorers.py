"""Pluggable top-k scorers over a matrix of unit-norm embeddings: exact (default) and faiss IVF (optional).

``ExactScorer`` scans int8 codes of the rows (numba, memory-bandwidth bound: half the bytes of fp16)
with a proven per-row error bound, and rescores in float64 every row that could be in the top k, so the
result is the exact top-k over the *stored* embeddings (fp16 or fp32), near-ties included; without numba
it scans the fp16 matrix with torch and rescores the same way. ``FaissIVFScorer``
(``pip install faiss-cpu``) clusters the rows into ``nlist`` cells and scans ``nprobe`` of them: far fewer
rows per query at corpus scale, at the cost of recall, which ``recall_at_k`` measures against exact.
"""

from __future__ import annotations

import copy
from typing import Any, Protocol

import numpy as np

from .int8scan import kernels, quantize_rows, query_levels

__all__ = [
    "ExactScorer",
    "FaissIVFScorer",
    "Scorer",
    "TooFewPointsError",
    "make_scorer",
    "quantize_rows",
    "recall_at_k",
]


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
    """Exact top-k by inner product (cosine for unit vectors) over the stored (fp16 or fp32) embeddings.

    With numba (the ``ann`` extra) a memory-bandwidth-bound int8 scan finds the candidates: rows are stored
    as int8 codes with a per-row scale (half the bytes of fp16), the query as int16, and for every row the
    scan's score comes with a proven error bound ``e_r = scale_r/2 * ||q||_1' + t/2 * ||x_r||_1`` (t: the
    query's step). Every row whose upper bound reaches the k-th best lower bound is rescored in float64 from
    the *stored* vectors, so the result is the exact top-k of the stored data (ties broken by the lower row
    id), whatever the quantization did: near-ties are settled by the rescoring, never by int8 codes.
    Without numba it falls back to the fp16 torch scan with fp32 rescoring (also exact, ~3x slower).
    ``backend`` is ``"int8"`` or ``"torch"``; ``simd_path`` the int8 kernel's SIMD path (``zmm``, ``ymm``
    or ``portable``: the widest this CPU runs; all give the same results); ``last_candidates`` counts the
    rows rescored by the last query.
    """

    def __init__(self, embeddings: np.ndarray, backend: str | None = None) -> None:
        emb = np.ascontiguousarray(embeddings)
        if emb.ndim != 2:
            raise ValueError(f"embeddings must be [N, D], got shape {emb.shape}")
        if emb.dtype not in (np.float16, np.float32):
            emb = emb.astype(np.float32)
        self.stored = emb
        self.size, self.dim = emb.shape
        if backend not in (None, "int8", "torch"):
            raise ValueError(f"backend must be 'int8' or 'torch', got {backend!r}")
        kern = kernels() if backend in (None, "int8") else None
        if backend == "int8" and kern is None:
            raise ImportError("the int8 scan needs numba: pip install 'vidlab[ann]'")
        self.backend = "int8" if kern is not None and query_levels(self.dim) >= 127 else "torch"
        self.last_candidates = 0
        if self.backend == "int8":
            assert kern is not None
            self._scan = kern["scan"]
            self.simd_path: str | None = kern["simd_path"]
            self.levels = query_levels(self.dim)
            self.codes, self.scale, self.l1 = quantize_rows(emb)
            # candidate buffers: untouched pages cost nothing; only the few candidates are written
            self._cand_rows = np.empty(self.size, np.int64)
            self._cand_hi = np.empty(self.size, np.float64)
        else:
            import torch

            self.simd_path = None
            self.matrix = torch.from_numpy(emb.copy() if not emb.flags.writeable else emb)

    def on_simd_path(self, path: str) -> ExactScorer:
        """The same int8 scorer (sharing its codes) scanning with the kernel of SIMD ``path`` (one of
        ``vidlab.clip.int8scan.supported_paths`` of this CPU: ValueError otherwise); for comparisons."""
        if self.backend != "int8":
            raise ValueError("SIMD paths are of the int8 backend; this scorer uses torch")
        kern = kernels(path)
        assert kern is not None
        other = copy.copy(self)
        other._scan, other.simd_path = kern["scan"], kern["simd_path"]
        other._cand_rows = np.empty(self.size, np.int64)  # its own candidate buffers
        other._cand_hi = np.empty(self.size, np.float64)
        return other

    @property
    def bytes_per_query(self) -> int:
        """Bytes the first pass reads per query: the int8 codes and two float32 row constants (int8), or
        the stored matrix (torch); the rescoring of the candidates reads ``last_candidates`` more rows."""
        if self.backend == "int8":
            return int(self.codes.nbytes + self.scale.nbytes + self.l1.nbytes)
        return int(self.matrix.numel() * self.matrix.element_size())

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        q32 = _as_queries(queries, self.dim)
        k = min(int(k), self.size)
        if k < 1:
            return np.zeros((q32.shape[0], 0), np.float32), np.zeros((q32.shape[0], 0), np.int64)
        if self.backend == "torch":
            return self._search_torch(q32, k)
        vals, rows = zip(*(self._search_int8(q, k) for q in q32))
        return np.stack(vals), np.stack(rows)

    def _exact_topk(self, cand: np.ndarray, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Exact (float64) scores of ``cand`` rows; top k by score, ties by lower row id.

        Products then a row-wise sum, not a matrix product: BLAS sums rows in different orders depending on
        where they fall in its blocks, so two identical rows could score one ulp apart and break the tie rule."""
        exact = (self.stored[cand].astype(np.float64) * q.astype(np.float64)).sum(axis=1)
        order = np.lexsort((cand, -exact))[:k]
        return exact[order].astype(np.float32), cand[order].astype(np.int64)

    def _search_int8(self, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        qmax = float(np.abs(q).max())
        if qmax == 0.0:  # every score is 0: the first k rows
            return np.zeros(k, np.float32), np.arange(k, dtype=np.int64)
        t = qmax / self.levels
        qq = np.rint(q.astype(np.float64) / t).astype(np.int16)
        qsum = float(np.abs(qq.astype(np.int64)).sum())
        kth_lo, nc = self._scan(
            self.codes, qq, self.scale, self.l1, t, qsum, k, self._cand_rows, self._cand_hi
        )
        cand = self._cand_rows[:nc][self._cand_hi[:nc] >= kth_lo]
        self.last_candidates = int(cand.size)
        return self._exact_topk(cand, q, k)

    def _search_torch(self, q32: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        import torch

        q = torch.from_numpy(q32).to(self.matrix.dtype)
        vals, rows = [], []
        with torch.inference_mode():  # one mat-vec per query: memory-bound, faster than a CPU mat-mat here
            for j in range(q.shape[0]):
                scores = torch.mv(self.matrix, q[j]).float()
                v, _ = torch.topk(scores, k)
                margin = MARGIN if self.matrix.dtype == torch.float16 else 1e-5
                cand = torch.nonzero(scores >= v[-1] - margin).flatten().numpy()
                self.last_candidates = int(cand.size)
                v, i = self._exact_topk(cand, q32[j], k)
                vals.append(v)
                rows.append(i)
        return np.stack(vals), np.stack(rows)


MIN_POINTS_PER_CELL = 39  # faiss's k-means wants this many training points per centroid (it warns below)


class TooFewPointsError(ValueError):
    """Too few rows to train a faiss IVF index (fewer than its cells, or than two cells' worth of points)."""


class FaissIVFScorer:
    """Approximate top-k with faiss ``IndexIVFFlat`` (inner product); ``nprobe`` trades speed for recall.

    The default ``nlist`` is ``4 sqrt(N)`` cells, capped so that every cell has :data:`MIN_POINTS_PER_CELL`
    training points; a matrix too small for two such cells (or for an explicit ``nlist``) raises
    :class:`TooFewPointsError`: an IVF index is pointless there, and ``make_scorer`` answers exactly instead.
    """

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
        if nlist is None:
            nlist = min(4096, int(4 * np.sqrt(self.size)), self.size // MIN_POINTS_PER_CELL)
            if nlist < 2:
                raise TooFewPointsError(
                    f"a faiss IVF index needs at least {2 * MIN_POINTS_PER_CELL} rows ({MIN_POINTS_PER_CELL} per "
                    f"cell, two cells); there are {self.size}"
                )
        elif nlist < 1 or nlist > self.size:
            raise TooFewPointsError(
                f"nlist={nlist} cells need 1 to {self.size} rows' worth; there are {self.size}"
            )
        self.nlist = int(nlist)
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
    """Build a scorer by name: ``exact`` (default) or ``faiss``.

    faiss on a matrix too small to train its cells (:class:`TooFewPointsError`) falls back to the exact scorer,
    which is both exact and fast at that size, with one ``RuntimeWarning`` saying so."""
    if name not in SCORERS:
        raise ValueError(f"unknown scorer {name!r}; choose from {sorted(SCORERS)}")
    try:
        return SCORERS[name](embeddings, **kwargs)
    except TooFewPointsError as e:
        import warnings

        warnings.warn(f"the {name} scorer is not used, search is exact: {e}", RuntimeWarning, stacklevel=2)
        return ExactScorer(embeddings)


def recall_at_k(approx_rows: np.ndarray, exact_rows: np.ndarray) -> float:
    """Mean fraction of the exact top-k rows that the approximate search also returned."""
    hits = [len(set(a.tolist()) & set(e.tolist())) / max(1, len(e)) for a, e in zip(approx_rows, exact_rows)]
    return float(np.mean(hits)) if hits else 0.0
