"""ANN at corpus scale: faiss IVF (Flat, SQ8, PQ) and HNSW against vidlab's exact search, one core.

What it measures, per index and per nprobe / efSearch on a grid (the recall/latency curve):
recall@10 against vidlab's exact top-10 over the same stored fp16 rows, median and p90 latency of one query
at a time, the exact search's latency on the same queries interleaved with them (the figure is the ratio),
build time (coarse k-means training, assignment, add), index bytes and the process's RSS (current and peak).

The data are CLIP-like frame embeddings, not iid noise (``ClipLikeCorpus``): unit-norm rows in a random
rotation of an anisotropic space (variance of latent dimension i ~ 1/(i+10)), with a shared mean direction
(unrelated frames have cosine ~0.45, as CLIP image embeddings do) and a hierarchy topic -> video -> scene ->
frame (cosine ~0.73 within a topic, ~0.87 within a video, ~0.96 within a scene); videos of 60-360 frames,
scenes of ~15 frames, rows stored video after video as an index of 1-fps frames would be. Queries are held
out: half are unseen frames of stored scenes (a moment of an indexed video), half are frames of unseen
videos of the same topics. The rows are generated in chunks into an fp16 file (cached under ``--work``),
so 10M x 512 (10 GB) never needs a full fp32 copy; the exact ground truth is vidlab's ``ExactScorer`` run
over ``--exact-chunk`` rows at a time with the per-chunk top-10s merged exactly (float64 rescoring of the
stored rows, ties by lower row id), so it is the exact top-10 of all stored rows.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import math
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

from benchmarks._common import bench_args, emit_json, print_table  # noqa: E402

EPILOG = """examples:
  python benchmarks/ann.py --quick                       # 20k rows, < 60 s on an idle core
  python benchmarks/ann.py --smoke                       # 8k rows, two knobs per index, a fresh work folder
  python benchmarks/ann.py --rows 1000000                # IVFFlat, IVF-SQ8, IVF-PQ, HNSW32
  python benchmarks/ann.py --rows 10000000 --indexes ivfsq8,ivfpq --nlist 4096 --queries 200
"""

KINDS = ("ivfflat", "ivfsq8", "ivfpq", "hnsw")
NPROBE_GRID = (1, 2, 4, 8, 16, 32, 64, 128, 256)
EF_GRID = (16, 32, 64, 128, 256)


@dataclass(frozen=True)
class ClipLikeCorpus:
    """Parameters of the CLIP-like data (see the module docstring); ``*_var`` are squared norms."""

    rows: int
    dim: int = 512
    seed: int = 0
    topics: int = 1000
    mean_norm: float = 1.26  # shared direction: unrelated rows have cosine ~ m^2 / (m^2 + sum of vars)
    topic_var: float = 1.0
    video_var: float = 0.5
    scene_var: float = 0.3
    frame_var: float = 0.15
    video_frames: tuple[int, int] = (60, 360)
    scene_frames: float = 15.0
    videos_per_chunk: int = 1024

    def key(self) -> str:
        return f"cliplike-{self.rows}x{self.dim}-s{self.seed}"


class _Space:
    def __init__(self, c: ClipLikeCorpus) -> None:
        self.c = c
        rng = np.random.default_rng([c.seed, 0])
        self.rot = np.linalg.qr(rng.standard_normal((c.dim, c.dim)))[0].astype(np.float32)
        spec = 1.0 / (np.arange(c.dim) + 10.0)
        self.sd = np.sqrt(spec / spec.sum()).astype(np.float32)
        mu = rng.standard_normal(c.dim).astype(np.float32)
        self.mean = c.mean_norm * mu / np.linalg.norm(mu)
        self.topics = self.draw(rng, c.topics, c.topic_var)

    def draw(self, rng: np.random.Generator, n: int, var: float) -> np.ndarray:
        return rng.standard_normal((n, self.c.dim), dtype=np.float32) * (self.sd * np.float32(math.sqrt(var)))

    def finish(self, latent: np.ndarray) -> np.ndarray:
        x = (latent + self.mean) @ self.rot.T
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        return x.astype(np.float16)

    def video(self, rng: np.random.Generator, n: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """One video's frame latents [n, D] and its scene centres (latent) [s, D]."""
        c = self.c
        n = int(rng.integers(c.video_frames[0], c.video_frames[1] + 1)) if n is None else n
        centre = self.topics[rng.integers(c.topics)] + self.draw(rng, 1, c.video_var)[0]
        cuts = np.cumsum(rng.geometric(1.0 / c.scene_frames, size=n))
        scene_of = np.searchsorted(cuts, np.arange(n), side="right")
        scenes = centre + self.draw(rng, int(scene_of.max()) + 1, c.scene_var)
        return scenes[scene_of] + self.draw(rng, n, c.frame_var), scenes


def make_corpus(c: ClipLikeCorpus, n_queries: int, work: Path) -> tuple[Path, np.ndarray, np.ndarray]:
    """Write ``c.rows`` x ``c.dim`` fp16 rows to ``work/<key>.f16`` (cached) and return (path, queries
    [n_queries, D] float32 unit rows, kind per query: 0 = unseen frame of a stored scene, 1 = frame of an
    unseen video)."""
    from vidlab.io import atomic_path, atomic_write_json

    data = work / f"{c.key()}.f16"
    qfile = work / f"{c.key()}.q{n_queries}.npz"
    meta = work / f"{c.key()}.json"
    if data.exists() and qfile.exists() and meta.exists() and json.loads(meta.read_text()) == _jsonable(c):
        z = np.load(qfile)
        return data, z["queries"], z["kinds"]
    sp = _Space(c)
    n_in, n_new = n_queries - n_queries // 2, n_queries // 2
    est_videos = c.rows / (0.5 * sum(c.video_frames))
    per_video = 3.0 * n_in / est_videos  # oversample, then keep n_in at random
    picked: list[np.ndarray] = []
    written, vid = 0, 0
    with atomic_path(data) as tmp, open(tmp, "wb") as f:
        while written < c.rows:
            rng = np.random.default_rng([c.seed, 1, vid])
            lat = []
            for _ in range(c.videos_per_chunk):
                frames, scenes = sp.video(rng)
                lat.append(frames)
                for _ in range(rng.poisson(per_video)):  # held-out moments: new frames of stored scenes
                    s = scenes[rng.integers(len(scenes))]
                    picked.append(s + sp.draw(rng, 1, c.frame_var)[0])
                written += len(frames)
                vid += 1
                if written >= c.rows:
                    break
            x = sp.finish(np.concatenate(lat))
            if written > c.rows:
                x = x[: len(x) - (written - c.rows)]
            f.write(x.tobytes())
    written = c.rows
    rng = np.random.default_rng([c.seed, 2])
    if len(picked) < n_in:
        raise RuntimeError(f"only {len(picked)} in-corpus queries drawn for {n_in}; use more rows")
    q_in = np.stack([picked[i] for i in np.sort(rng.choice(len(picked), n_in, replace=False))])
    q_new = np.stack([sp.video(rng, n=1)[0][0] for _ in range(n_new)])
    queries = sp.finish(np.concatenate([q_in, q_new])).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    kinds = np.repeat([0, 1], [n_in, n_new]).astype(np.int8)
    with atomic_path(qfile) as tmp:
        np.savez(tmp, queries=queries, kinds=kinds)
    atomic_write_json(meta, _jsonable(c))
    return data, queries, kinds


def _jsonable(c: ClipLikeCorpus) -> dict:
    return json.loads(json.dumps(asdict(c)))


def read_rows(path: Path, dim: int, start: int, stop: int) -> np.ndarray:
    """Rows [start, stop) of an fp16 row file, read (not mapped: RSS counts only what is held)."""
    with open(path, "rb") as f:
        f.seek(start * dim * 2)
        return np.fromfile(f, dtype=np.float16, count=(stop - start) * dim).reshape(-1, dim)


def stored(path: Path, dim: int) -> np.ndarray:
    return np.memmap(path, dtype=np.float16, mode="r").reshape(-1, dim)


def rescore(rows: np.ndarray, q: np.ndarray, store: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact (float64) top ``k`` of the candidate ``rows`` for one query, ties by lower row id."""
    rows = np.unique(rows[rows >= 0])
    s = store[rows].astype(np.float64) @ q.astype(np.float64)
    order = np.lexsort((rows, -s))[:k]
    return s[order], rows[order]


def exact_topk(
    path: Path, dim: int, queries: np.ndarray, k: int, chunk: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """vidlab's exact top-k over every stored row, ``chunk`` rows per ``ExactScorer``; returns (rows [Q, k],
    seconds [Q] = the sum over chunks of each query's search time, one query at a time, and the same in
    on-CPU time of this thread)."""
    from vidlab.clip.scorers import ExactScorer

    n = os.path.getsize(path) // (2 * dim)
    store = stored(path, dim)
    cand: list[list[np.ndarray]] = [[] for _ in queries]
    secs = np.zeros(len(queries))
    cpu = np.zeros(len(queries))
    for a in range(0, n, chunk):
        scorer = ExactScorer(read_rows(path, dim, a, min(n, a + chunk)))
        scorer.search(queries[0], k)  # warm-up: compile cache, page faults
        for i, q in enumerate(queries):
            c0, t0 = time.thread_time(), time.perf_counter()
            _, r = scorer.search(q, k)
            secs[i] += time.perf_counter() - t0
            cpu[i] += time.thread_time() - c0
            cand[i].append(r[0] + a)
        del scorer
    if n <= chunk:
        return np.stack([c[0] for c in cand]), secs, cpu
    merged = [rescore(np.concatenate(c), q, store, k)[1] for c, q in zip(cand, queries)]
    return np.stack(merged), secs, cpu


def default_nlist(rows: int) -> int:
    """4 sqrt(rows), rounded to a power of two."""
    return int(2 ** round(math.log2(4 * math.sqrt(rows))))


def index_bytes(index: Any) -> int:
    """Bytes the index holds: codes + ids per row, centroids / trained tables, HNSW graph."""
    import faiss

    if isinstance(index, faiss.IndexHNSW):
        h: Any = index.hnsw  # (faiss's stubs lack the graph's vectors)
        storage: Any = faiss.downcast_index(index.storage)
        graph = 4 * h.neighbors.size() + 4 * h.levels.size() + 8 * h.offsets.size()
        return int(graph + index.ntotal * storage.code_size)
    ivf = faiss.extract_index_ivf(index)
    inv: Any = ivf.invlists
    sizes = np.array([inv.list_size(i) for i in range(inv.nlist)], np.int64)
    extra = 0
    if isinstance(index, faiss.IndexIVFPQ):
        extra = 4 * index.pq.centroids.size()
    elif isinstance(index, faiss.IndexIVFScalarQuantizer):
        extra = 4 * index.sq.trained.size()
    return int(sizes.sum() * (ivf.code_size + 8) + 4 * ivf.nlist * ivf.d + extra)


def predicted_bytes(kind: str, rows: int, dim: int, pq_m: int, hnsw_m: int) -> int:
    per_row = {"ivfflat": 4 * dim + 8, "ivfsq8": dim + 8, "ivfpq": pq_m + 8}.get(kind)
    if per_row is None:  # HNSW: fp32 rows + ~2 M neighbours of 4 bytes at level 0 (+ upper levels ~5%)
        per_row = 4 * dim + int(1.05 * 2 * hnsw_m * 4) + 12
    return rows * per_row


def _return_freed_memory() -> None:
    """Hand freed heap pages back to the OS (glibc), so RSS and the next index's build see them free."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def _rss() -> dict:
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS", "VmHWM")):
                out[line.split(":")[0]] = int(line.split()[1]) / 1024
    return {
        "rss_mb": round(out.get("VmRSS", float("nan"))),
        "peak_rss_mb": round(out.get("VmHWM", float("nan"))),
    }


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def build_ivf(kinds: list[str], path: Path, dim: int, nlist: int, args) -> tuple[dict, dict]:
    """Train one coarse quantizer (k-means, inner product) and fill every IVF index in ``kinds`` in one
    pass over the stored rows: each chunk is assigned once and added to each index."""
    import faiss

    n = os.path.getsize(path) // (2 * dim)
    rng = np.random.default_rng(7)
    n_train = min(n, args.train_per_list * nlist)
    train = stored(path, dim)[np.sort(rng.choice(n, n_train, replace=False))].astype(np.float32)
    quant = faiss.IndexFlatIP(dim)
    indexes: dict[str, Any] = {}
    for kind in kinds:
        if kind == "ivfflat":
            indexes[kind] = faiss.IndexIVFFlat(quant, dim, nlist, faiss.METRIC_INNER_PRODUCT)
        elif kind == "ivfsq8":
            indexes[kind] = faiss.IndexIVFScalarQuantizer(
                quant, dim, nlist, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT
            )
        else:
            indexes[kind] = faiss.IndexIVFPQ(quant, dim, nlist, args.pq_m, 8, faiss.METRIC_INNER_PRODUCT)
    info: dict[str, dict] = {k: {"train_rows": n_train} for k in kinds}
    clock = _Clock()
    first = indexes[kinds[0]]
    first.cp.niter = args.kmeans_iter
    with clock("train"):
        first.train(train)  # trains the shared quantizer (and this index's own codec)
    for kind in kinds[1:]:
        with clock(kind):
            indexes[kind].train(train)  # quantizer already trained: only the codec (SQ ranges, PQ tables)
    for kind in kinds:
        for c in ("s", "cpu_s"):
            info[kind][f"train_{c}"] = clock.t["train"][c] + (clock.t[kind][c] if kind in clock.t else 0.0)
    del train
    for a in range(0, n, args.add_chunk):
        x = read_rows(path, dim, a, min(n, a + args.add_chunk)).astype(np.float32)
        with clock("assign"):
            _, assign = quant.search(x, 1)
        assign = np.ascontiguousarray(assign.ravel(), dtype=np.int64)
        for kind, index in indexes.items():
            with clock(f"add {kind}"):
                index.add_core(len(x), faiss.swig_ptr(x), None, faiss.swig_ptr(assign))
        print(f"  added {a + len(x):,} / {n:,} rows (load {_load()})", file=sys.stderr, flush=True)
    for kind, index in indexes.items():
        assert index.ntotal == n, (kind, index.ntotal, n)
        info[kind]["nlist"] = nlist
        for c in ("s", "cpu_s"):  # wall and on-CPU seconds: the shared k-means and assignment count for each
            info[kind][f"assign_{c}"] = clock.t["assign"][c]
            info[kind][f"add_{c}"] = clock.t[f"add {kind}"][c]
            info[kind][f"build_{c}"] = (
                info[kind][f"train_{c}"] + clock.t["assign"][c] + clock.t[f"add {kind}"][c]
            )
    return indexes, info


class _Clock:
    """Wall and on-CPU (this process) seconds per named step, summed over its uses."""

    def __init__(self) -> None:
        self.t: dict[str, dict[str, float]] = {}

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        c0, t0 = time.process_time(), time.perf_counter()
        try:
            yield
        finally:
            d = self.t.setdefault(name, {"s": 0.0, "cpu_s": 0.0})
            d["s"] += time.perf_counter() - t0
            d["cpu_s"] += time.process_time() - c0


def build_hnsw(path: Path, dim: int, args) -> tuple[Any, dict]:
    import faiss

    n = os.path.getsize(path) // (2 * dim)
    index = faiss.IndexHNSWFlat(dim, args.hnsw_m, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = args.ef_construction
    clock = _Clock()
    for a in range(0, n, args.add_chunk):
        x = read_rows(path, dim, a, min(n, a + args.add_chunk)).astype(np.float32)
        with clock("build"):
            index.add(x)
        print(
            f"  HNSW added {min(n, a + args.add_chunk):,} / {n:,} (load {_load()})",
            file=sys.stderr,
            flush=True,
        )
    return index, {
        "build_s": clock.t["build"]["s"],
        "build_cpu_s": clock.t["build"]["cpu_s"],
        "M": args.hnsw_m,
        "efConstruction": args.ef_construction,
    }


def measure(
    name: str, index: Any, knobs: list[int], queries: np.ndarray, kinds: np.ndarray, truth: np.ndarray,
    exact: Any, store: np.ndarray, args,
) -> list[dict]:  # fmt: skip
    """Every query one at a time at every knob (interleaved query by query, so load hits all alike); the
    exact search runs on every ``args.exact_every``-th query in the same loop, for the paired ratio."""
    import faiss

    from vidlab.clip.scorers import recall_at_k

    hnsw = isinstance(index, faiss.IndexHNSW)
    rerank = name.endswith("+rerank")
    kk = args.rerank if rerank else args.k

    def set_knob(v: int) -> None:
        if hnsw:
            index.hnsw.efSearch = v
        else:
            faiss.extract_index_ivf(index).nprobe = v

    secs = np.zeros((len(knobs), len(queries)))
    cpu = np.zeros((len(knobs), len(queries)))
    ex_cpu: list[float] = []
    got = np.zeros((len(knobs), len(queries), args.k), np.int64)
    ex_secs: list[float] = []
    ex_idx: list[int] = []
    set_knob(knobs[0])
    index.search(queries[:1], kk)
    for i, q in enumerate(queries):
        if exact is not None and i % args.exact_every == 0:
            c0, t0 = time.thread_time(), time.perf_counter()
            exact.search(q, args.k)
            ex_secs.append(time.perf_counter() - t0)
            ex_cpu.append(time.thread_time() - c0)
            ex_idx.append(i)
        for j, v in enumerate(knobs):
            set_knob(v)
            c0, t0 = time.thread_time(), time.perf_counter()
            _, r = index.search(q[None], kk)
            if rerank:
                r = rescore(r[0], q, store, args.k)[1][None]
            secs[j, i] = time.perf_counter() - t0
            cpu[j, i] = time.thread_time() - c0
            got[j, i, : r.shape[1]] = r[0][: args.k]
            got[j, i, r.shape[1] :] = -1
    rows = []
    for j, v in enumerate(knobs):
        row = {
            "index": name, "knob": ("efSearch " if hnsw else "nprobe ") + str(v),
            "recall@10": recall_at_k(got[j], truth),
            "recall@10 in-corpus": recall_at_k(got[j][kinds == 0], truth[kinds == 0]),
            "recall@10 new-video": recall_at_k(got[j][kinds == 1], truth[kinds == 1]),
            "ms median": 1e3 * float(np.median(secs[j])), "ms p90": 1e3 * float(np.percentile(secs[j], 90)),
            "cpu ms median": 1e3 * float(np.median(cpu[j])), "cpu ms p90": 1e3 * float(np.percentile(cpu[j], 90)),
        }  # fmt: skip
        if ex_secs:  # paired: exact and this setting on the same queries in the same loop
            row["exact/ann paired median"] = float(np.median(np.array(ex_secs) / secs[j, ex_idx]))
            row["exact/ann paired cpu median"] = float(np.median(np.array(ex_cpu) / cpu[j, ex_idx]))
        rows.append(row)
    return rows


def _extra(ap) -> None:
    ap.add_argument("--rows", type=int, default=1_000_000, help="stored rows (default 1M)")
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--queries", type=int, default=400, help="held-out queries, half of each kind (>= 200)")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--indexes", default=",".join(KINDS), help=f"comma list of {', '.join(KINDS)}")
    ap.add_argument(
        "--nlist", type=int, default=0, help="IVF cells (0: 4 sqrt(rows) rounded to a power of 2)"
    )
    ap.add_argument("--nprobe", default=",".join(map(str, NPROBE_GRID)), help="nprobe grid")
    ap.add_argument("--ef-search", default=",".join(map(str, EF_GRID)), help="HNSW efSearch grid")
    ap.add_argument("--pq-m", type=int, default=64, help="IVF-PQ sub-quantizers (bytes per row)")
    ap.add_argument(
        "--rerank",
        type=int,
        default=100,
        help="IVF-SQ8/PQ candidates rescored exactly from the stored rows (0: none)",
    )
    ap.add_argument("--hnsw-m", type=int, default=32)
    ap.add_argument("--ef-construction", type=int, default=40)
    ap.add_argument("--kmeans-iter", type=int, default=10, help="coarse k-means iterations")
    ap.add_argument("--train-per-list", type=int, default=40, help="k-means training rows per IVF cell")
    ap.add_argument("--add-chunk", type=int, default=262144)
    ap.add_argument("--exact-chunk", type=int, default=1_000_000, help="rows per ExactScorer (ground truth)")
    ap.add_argument("--exact-every", type=int, default=5, help="time exact search on every n-th query")
    ap.add_argument(
        "--max-index-gb", type=float, default=6.5, help="skip indexes predicted above this, together"
    )
    ap.add_argument("--work", default="/tmp/vidlab-ann", help="cache folder for the generated rows")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--out", default="", help="also write the figures so far to this JSON file after each index"
    )


def ground_truth(path: Path, c: ClipLikeCorpus, queries: np.ndarray, args) -> dict:
    """``exact_topk`` once per (data, queries, k, chunk): cached beside the data, with when it was measured."""
    from vidlab.io import atomic_path, atomic_write_json

    cache = Path(args.work) / f"{c.key()}.q{len(queries)}.k{args.k}.c{args.exact_chunk}.truth"
    if cache.with_suffix(".npz").exists() and cache.with_suffix(".json").exists():
        z = np.load(cache.with_suffix(".npz"))
        cached = {
            "rows": z["rows"],
            "secs": z["secs"],
            "cpu": z["cpu"] if "cpu" in z else np.full(len(z["secs"]), np.nan),
        }
        return {**json.loads(cache.with_suffix(".json").read_text()), **cached}
    t0 = time.perf_counter()
    load0 = _load()
    rows, secs, cpu = exact_topk(path, args.dim, queries, args.k, args.exact_chunk)
    info = {
        "s": round(time.perf_counter() - t0, 1), "chunks": math.ceil(c.rows / args.exact_chunk),
        "ms median": 1e3 * float(np.median(secs)), "ms p90": 1e3 * float(np.percentile(secs, 90)),
        "cpu ms median": 1e3 * float(np.median(cpu)), "cpu ms p90": 1e3 * float(np.percentile(cpu, 90)),
        "bytes scanned per query": c.rows * (c.dim + 8), "loadavg_before_after": [load0, _load()],
        "measured_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
    }  # fmt: skip
    with atomic_path(cache.with_suffix(".npz")) as tmp:
        np.savez(tmp, rows=rows, secs=secs, cpu=cpu)
    atomic_write_json(cache.with_suffix(".json"), info)
    return {**info, "rows": rows, "secs": secs, "cpu": cpu}


def _save_index(work: Path, name: str, index: Any, info: dict) -> None:
    import faiss

    from vidlab.io import atomic_path, atomic_write_json

    with atomic_path(work / f"{name}.faiss") as tmp:
        faiss.write_index(index, str(tmp))
    atomic_write_json(
        work / f"{name}.json", {**info, "built_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())}
    )


def _load_index(work: Path, name: str) -> tuple[Any, dict] | None:
    import faiss

    if not ((work / f"{name}.faiss").exists() and (work / f"{name}.json").exists()):
        return None
    info = json.loads((work / f"{name}.json").read_text())
    return faiss.read_index(str(work / f"{name}.faiss")), {**info, "loaded_from": f"{name}.faiss"}


def _partial(args, res: dict, builds: dict, table: list) -> None:
    if args.out:
        from vidlab.io import atomic_write_json

        atomic_write_json(
            args.out, {**res, "builds": builds, "table": table, "partial": True, "loadavg_now": _load()}
        )


def run(args) -> dict:
    import faiss

    faiss.omp_set_num_threads(1)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    res: dict = {"benchmark": "ann", "rows": args.rows, "dim": args.dim, "k": args.k, "threads": 1,
                 "loadavg_start": _load(), "faiss": faiss.__version__}  # fmt: skip
    corpus = ClipLikeCorpus(rows=args.rows, dim=args.dim, seed=args.seed)
    res["data"] = _jsonable(corpus)
    t0 = time.perf_counter()
    path, queries, kinds = make_corpus(corpus, args.queries, work)
    res["data_s"] = round(time.perf_counter() - t0, 1)
    res["queries"] = {"in_corpus": int((kinds == 0).sum()), "new_video": int((kinds == 1).sum())}
    store = stored(path, args.dim)
    sample = store[np.random.default_rng(1).choice(args.rows, 2000, replace=False)].astype(np.float32)
    cos = sample @ sample.T
    res["data_cosine_unrelated_median"] = float(np.median(cos[np.triu_indices(len(cos), 1)]))
    res["exact"] = ground_truth(path, corpus, queries, args)
    truth, ex_secs, ex_cpu = (res["exact"].pop(k) for k in ("rows", "secs", "cpu"))
    ex_med, ex_cpu_med = float(np.median(ex_secs)), float(np.median(ex_cpu))
    res["truth_top1_cosine_median"] = {
        kind: float(np.median([store[truth[i, 0]].astype(np.float32) @ queries[i] for i in np.where(kinds == k)[0]]))
        for k, kind in enumerate(("in_corpus", "new_video"))
    }  # fmt: skip
    exact = None
    if args.rows <= args.exact_chunk:  # hold it for the paired latency ratio
        from vidlab.clip.scorers import ExactScorer

        exact = ExactScorer(read_rows(path, args.dim, 0, args.rows))
    wanted = [k.strip() for k in args.indexes.split(",") if k.strip()]
    nlist = args.nlist or default_nlist(args.rows)
    table: list[dict] = []
    builds: dict[str, dict] = {}
    budget = args.max_index_gb * 1e9
    ivf_kinds = []
    for kind in ("ivfflat", "ivfsq8", "ivfpq"):
        if kind not in wanted:
            continue
        need = predicted_bytes(kind, args.rows, args.dim, args.pq_m, args.hnsw_m)
        if need > budget:
            builds[kind] = {"skipped": f"needs ~{need / 1e9:.1f} GB > --max-index-gb {args.max_index_gb}"}
            continue
        budget -= need
        ivf_kinds.append(kind)
    if ivf_kinds:
        cache_names = {
            k: f"{corpus.key()}.{k}{args.pq_m if k == 'ivfpq' else ''}.nlist{nlist}" for k in ivf_kinds
        }
        got = {k: _load_index(work, n) for k, n in cache_names.items()}
        if all(got.values()):  # built by an earlier run on the same rows: its build figures come along
            indexes = {k: g[0] for k, g in got.items() if g}
            info = {k: g[1] for k, g in got.items() if g}
        else:
            indexes, info = build_ivf(ivf_kinds, path, args.dim, nlist, args)
            for k, n in cache_names.items():
                _save_index(work, n, indexes[k], info[k])
        knobs = [p for p in map(int, args.nprobe.split(",")) if p <= nlist]
        for kind in ivf_kinds:
            info[kind].update(index_bytes=index_bytes(indexes[kind]), **_rss())
            info[kind]["bytes_per_row"] = info[kind]["index_bytes"] / args.rows
            builds[kind] = info[kind]
        for kind in ivf_kinds:
            names = [kind] + ([f"{kind}+rerank"] if kind in ("ivfsq8", "ivfpq") and args.rerank else [])
            for name in names:
                table += measure(name, indexes[kind], knobs, queries, kinds, truth, exact, store, args)
                print(f"  measured {name} (load {_load()})", file=sys.stderr, flush=True)
                _partial(args, res, builds, table)
        del indexes
        _return_freed_memory()  # the 1M run kept ~2.6 GB of freed IVF lists in its heap into the HNSW build
    _partial(args, res, builds, table)
    if "hnsw" in wanted:
        need = predicted_bytes("hnsw", args.rows, args.dim, args.pq_m, args.hnsw_m)
        if need > args.max_index_gb * 1e9:
            builds["hnsw"] = {"skipped": f"needs ~{need / 1e9:.1f} GB > --max-index-gb {args.max_index_gb}"}
        else:
            rss0 = _rss()["rss_mb"]
            hname = f"{corpus.key()}.hnsw{args.hnsw_m}.efc{args.ef_construction}"
            got_h = _load_index(work, hname)
            if got_h:
                index, hinfo = got_h
            else:
                index, hinfo = build_hnsw(path, args.dim, args)
                _save_index(work, hname, index, hinfo)
            hinfo.update(index_bytes=index_bytes(index), **_rss())
            hinfo["bytes_per_row"] = hinfo["index_bytes"] / args.rows
            hinfo["rss_growth_mb"] = hinfo["rss_mb"] - rss0
            builds["hnsw"] = hinfo
            knobs = list(map(int, args.ef_search.split(",")))
            table += measure("hnsw", index, knobs, queries, kinds, truth, exact, store, args)
            del index
    for row in table:  # exact's median (all queries, its own pass) over this setting's: for every setting
        row["exact/ann medians"] = ex_med / (row["ms median"] / 1e3)
        row["exact/ann cpu medians"] = ex_cpu_med / (row["cpu ms median"] / 1e3)
    res["nlist"] = nlist
    res["builds"] = builds
    res["table"] = table
    res["first_reaching_recall_0.95"] = {
        name: next((r["knob"] for r in table if r["index"] == name and r["recall@10"] >= 0.95), None)
        for name in dict.fromkeys(r["index"] for r in table)
    }
    res["loadavg_end"] = _load()
    res.update(_rss())
    return res


def main(argv=None) -> int:
    args = bench_args(__doc__.splitlines()[0], EPILOG, argv, extra=_extra)
    if args.quick:
        args.rows = min(args.rows, 8_000 if args.smoke else 20_000)
        args.queries = min(args.queries, 200)
    t0 = time.perf_counter()
    if args.smoke:  # every index on a fresh folder (nothing cached from an earlier run), two knobs each
        import tempfile

        args.nprobe, args.ef_search = "1,8", "16,64"
        with tempfile.TemporaryDirectory(prefix="vidlab-ann-smoke-") as work:
            args.work = work
            res = run(args)
    else:
        res = run(args)
    res["seconds"] = round(time.perf_counter() - t0, 1)
    cols = ["index", "knob", "recall@10", "recall@10 in-corpus", "recall@10 new-video", "ms median", "ms p90",
            "cpu ms median", "cpu ms p90", "exact/ann paired cpu median"]  # fmt: skip
    print_table(res["table"], cols)
    print_table(
        [{"index": k, **{c: v.get(c) for c in ("build_s", "build_cpu_s", "train_s", "add_s", "index_bytes", "bytes_per_row",
                                                 "peak_rss_mb", "skipped")}} for k, v in res["builds"].items()],
        ["index", "build_s", "build_cpu_s", "train_s", "add_s", "index_bytes", "bytes_per_row", "peak_rss_mb", "skipped"],
    )  # fmt: skip
    print(f"exact: {res['exact']['ms median']:.1f} ms/query median over {args.rows:,} rows; "
          f"load {res['loadavg_start']} -> {res['loadavg_end']}")  # fmt: skip
    emit_json(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
