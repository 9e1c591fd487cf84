"""CLIP frame index benchmark: cached clip_sample vs decode+embed, Ray vs local indexing, 1M-row exact search.

Three measurements, each side by side in one run, printed as ratios:
1. clip_sample (VideoBrain): K=128 candidates at round(linspace(start, end-1, 128)) in an interval, the
   prompt embedded, the 4 best returned in time order. Reference = decode + embed the candidates on every
   call (what the authors' code does); cached = ``FrameIndex.candidates`` on a warm index. Target >= 50x.
2. Indexing throughput (frames/s), 2 Ray workers vs 1 local worker on the same videos, every frame,
   one torch thread per worker. Steady-state figure excludes worker start-up (actor start + model
   load: ``JobSummary.startup_seconds``); end-to-end includes it. Target >= 1.6x on 2 cores.
3. Exact top-10 latency over 1M random unit fp16 embeddings, D=512, one query at a time on one core: vidlab's
   ExactScorer (int8 scan + exact rescoring) next to torch fp16, numpy fp32 BLAS and faiss IndexFlatIP in the
   same run, plus the time to merely read the int8 codes (the bandwidth floor). Target <= 60 ms/query.
   (full run only, ``--ann``) faiss IVF recall@10 and latency against exact search.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# One thread per process for every native pool (BLAS, OpenMP, ffmpeg via OMP): Ray gives its actors
# OMP_NUM_THREADS=num_cpus, so the in-process local worker must run under the same setting to compare.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

from benchmarks._common import bench_args, emit_json, print_table, time_side_by_side  # noqa: E402

EPILOG = """examples:
  python benchmarks/clip_index.py --quick          # < 60 s
  python benchmarks/clip_index.py                  # larger videos, more rounds
  python benchmarks/clip_index.py --model vidlab-small --ann
"""


def _extra(ap):
    ap.add_argument(
        "--model", default="vidlab-tiny", help="CLIP spec used for 1 and 2 (default: tiny built-in)"
    )
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows for the exact-search measurement")
    ap.add_argument("--ann", action="store_true", help="also measure faiss IVF recall/latency (slow)")
    ap.add_argument("--skip-ray", action="store_true", help="skip measurement 2")
    ap.add_argument("--search-only", action="store_true", help="run measurement 3 only")
    ap.add_argument(
        "--threads", type=int, default=1, help="torch threads for measurements 1 and 3 (default 1)"
    )


def cores() -> dict:
    import torch

    return {
        "cpu_count": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "torch_threads": torch.get_num_threads(),
    }


def bench_clip_sample(args, work: Path) -> dict:
    """Measurement 1."""
    from vidlab.clip import FrameIndex, load_model
    from vidlab.video import open_video
    from vidlab.video.synth import render_synthetic

    n_frames = 720 if args.quick else 4800
    video = render_synthetic(work / "long.mp4", n_frames, fps=24, width=320, height=240, seed=0, gop=48)
    model = load_model(args.model)
    idx = FrameIndex.build(video, model, "fps=1", cache_dir=work / "cache", progress=False)
    rng = np.random.default_rng(0)
    queries = []
    for j in range(3 if args.quick else 8):
        s = int(rng.integers(0, n_frames // 2))
        e = int(rng.integers(s + 256, n_frames + 1))
        queries.append(
            (s, e, ["a red circle", "blue square moving", "text on screen", "a green shape"][j % 4])
        )
    reader = open_video(video)

    def top4(frames, emb, prompt):
        q = model.embed_texts([prompt])[0]
        best = np.argsort(-(emb @ q))[:4]
        return np.sort(frames[best])

    def reference():
        out = []
        for s, e, p in queries:
            frames = np.unique(np.round(np.linspace(s, e - 1, 128)).astype(np.int64))
            emb = model.embed_images(reader.get_frames(frames), progress=False)
            out.append(top4(frames, emb, p))
        return out

    def cached():
        return [top4(*idx.candidates(s, e, 128), p) for s, e, p in queries]

    t0 = time.perf_counter()
    cold = cached()  # first call per interval decodes + embeds the missing candidates and caches them
    cold_s = time.perf_counter() - t0
    ref_out = reference()
    agree = float(np.mean([len(set(a) & set(b)) / 4 for a, b in zip(ref_out, cold)]))
    s0, e0, _ = queries[
        0
    ]  # parity of the vectors themselves: cached (2x-short-side decode, fp16) vs reference
    f0, cached_emb = idx.candidates(s0, e0, 128)
    ref_emb = model.embed_images(reader.get_frames(f0), progress=False)
    cos = np.sum(cached_emb * ref_emb, axis=1) / np.linalg.norm(cached_emb, axis=1)
    t = time_side_by_side(
        {"reference": reference, "cached": cached}, repeats=args.repeats, budget_s=args.budget
    )
    lookup = time_side_by_side(
        {"lookup": lambda: [idx.candidates(s, e, 128) for s, e, _ in queries]}, repeats=5, budget_s=1
    )
    per = len(queries)
    return {
        "video_frames": n_frames,
        "calls_per_round": per,
        "reference_ms_per_call": 1e3 * t["reference"]["best"] / per,
        "cached_ms_per_call": 1e3 * t["cached"]["best"] / per,
        "lookup_only_ms_per_call": 1e3 * lookup["lookup"]["best"] / per,
        "cold_first_call_ms": 1e3 * cold_s / per,
        "speedup": t["reference"]["best"] / t["cached"]["best"],
        "top4_agreement_with_reference": agree,
        "candidate_cosine_cached_vs_reference_min": float(cos.min()),
    }


def _spin(n: int) -> int:
    acc = 0
    for i in range(n):
        acc += i * i
    return acc


def parallel_headroom(iterations: int = 3_000_000) -> float:
    """Throughput of 2 busy processes vs 1, side by side: how many cores are actually free right now."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(2, mp_context=mp.get_context("spawn")) as pool:  # never fork a threaded process
        list(pool.map(_spin, [1000, 1000]))  # start both processes first
        t0 = time.perf_counter()
        pool.submit(_spin, iterations).result()
        one = time.perf_counter() - t0
        t0 = time.perf_counter()
        list(pool.map(_spin, [iterations, iterations]))
        two = time.perf_counter() - t0
    return 2 * one / two


def bench_indexing(args, work: Path) -> dict:
    """Measurement 2."""
    from vidlab.clip.indexing import index_videos
    from vidlab.distributed.ray_backend import ensure_ray
    from vidlab.video.synth import render_synthetic

    n_videos, n_frames = (6, 120) if args.quick else (12, 720)
    vids = [
        render_synthetic(work / "many" / f"v{i}.mp4", n_frames, fps=24, width=160, height=120, seed=i)
        for i in range(n_videos)
    ]
    headroom_before = parallel_headroom()
    runs: dict[str, list[dict]] = {"local_1": [], "ray_2": []}
    # local, ray, local: Ray is started only for its own run (its idle processes would slow the local
    # worker), and the local figure is the mean of the runs bracketing the Ray run (load drifts).
    for k, (name, backend, workers) in enumerate(
        (("local_1", "local", 1), ("ray_2", "ray", 2), ("local_1", "local", 1))
    ):
        if backend == "ray":
            ensure_ray(num_cpus=2)
        t0 = time.perf_counter()
        rep = index_videos(
            vids, work / f"idx_{name}_{k}", args.model, "every=1", backend=backend, workers=workers,
            torch_threads=1, progress=False, device="cpu",
        )  # fmt: skip
        wall = time.perf_counter() - t0
        assert rep.failures == 0, rep.errors
        runs[name].append(
            {"end_to_end_fps": rep.frames_embedded / wall, "steady_fps": rep.steady_frames_per_s}
        )
        if backend == "ray":
            import ray

            ray.shutdown()
    out = {name: {m: float(np.mean([r[m] for r in rs])) for m in rs[0]} for name, rs in runs.items()}
    return {
        "parallel_headroom_2proc": round(0.5 * (headroom_before + parallel_headroom()), 3),
        "videos": n_videos,
        "frames_per_video": n_frames,
        **{f"{k}_{m}": v[m] for k, v in out.items() for m in ("end_to_end_fps", "steady_fps")},
        "local_1_steady_fps_runs": [r["steady_fps"] for r in runs["local_1"]],
        "steady_speedup": out["ray_2"]["steady_fps"] / out["local_1"]["steady_fps"],
        "end_to_end_speedup": out["ray_2"]["end_to_end_fps"] / out["local_1"]["end_to_end_fps"],
    }


def random_unit_fp16(rows: int, dim: int, seed: int = 0, chunk: int = 131072) -> np.ndarray:
    """[rows, dim] unit-norm fp16 rows generated chunk by chunk (no fp32 copy of the whole matrix)."""
    rng = np.random.default_rng(seed)
    out = np.empty((rows, dim), np.float16)
    for a in range(0, rows, chunk):  # centred uniform then normalised: cheap to draw, random directions
        x = rng.random((min(chunk, rows - a), dim), dtype=np.float32) - 0.5
        out[a : a + len(x)] = x / np.linalg.norm(x, axis=1, keepdims=True)
    return out


def _read_bandwidth_ms(codes: np.ndarray) -> float | None:
    """Best time to stream ``codes`` once (xor of int64 words, numba): the memory-bandwidth floor of a scan."""
    try:
        from numba import njit
    except ImportError:
        return None

    @njit(cache=True, boundscheck=False)
    def xor_all(v):
        acc = np.int64(0)
        for i in range(v.size):
            acc ^= v[i]
        return acc

    v = codes.reshape(-1).view(np.int64)
    xor_all(v)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        xor_all(v)
        best = min(best, time.perf_counter() - t0)
    return 1e3 * best


def bench_search(args) -> dict:
    """Measurement 3: exact top-10 latency, one query at a time, vidlab's int8 scan next to its peers."""
    from vidlab.clip.scorers import ExactScorer, make_scorer, recall_at_k

    emb = random_unit_fp16(args.rows, 512)
    qs = random_unit_fp16(8 if args.quick else 24, 512, seed=1).astype(np.float32)
    t0 = time.perf_counter()
    scorer = ExactScorer(emb)
    res = {"rows": args.rows, "dim": 512, "k": 10, "vidlab_backend": scorer.backend}
    res["vidlab_build_s"] = time.perf_counter() - t0
    x32 = emb.astype(np.float32)
    contenders = {"vidlab exact (int8 scan + exact rescoring)": lambda q: scorer.search(q, 10)[1][0]}
    torch_scorer = ExactScorer(emb, backend="torch")
    contenders["torch fp16 mv + rescoring (previous vidlab)"] = lambda q: torch_scorer.search(q, 10)[1][0]

    def numpy_blas(q):
        s = x32 @ q
        top = np.argpartition(-s, 9)[:10]
        return top[np.lexsort((top, -s[top]))]

    contenders["numpy fp32 BLAS + argpartition"] = numpy_blas
    try:
        import faiss

        faiss.omp_set_num_threads(args.threads)
        flat = faiss.IndexFlatIP(512)
        flat.add(x32)
        contenders["faiss IndexFlatIP (fp32)"] = lambda q: flat.search(q[None], 10)[1][0]
    except ImportError:
        res["faiss"] = "not installed (pip install 'vidlab[ann]')"
    times = {name: [] for name in contenders}
    answers = {name: [] for name in contenders}
    for fn in contenders.values():
        fn(qs[0])  # warm-up (numba compile cache, page faults)
    for q in qs:  # alternate contenders query by query so machine load hits all alike
        for name, fn in contenders.items():
            t1 = time.perf_counter()
            answers[name].append(np.asarray(fn(q)))
            times[name].append(time.perf_counter() - t1)
    ref = answers["numpy fp32 BLAS + argpartition"]
    res["table"] = [
        {
            "method": name,
            "ms/query median": 1e3 * float(np.median(t)),
            "ms/query best": 1e3 * float(np.min(t)),
            "same top-10 as numpy": float(np.mean([set(a) == set(b) for a, b in zip(answers[name], ref)])),
        }
        for name, t in times.items()
    ]
    first = res["table"][0]
    res["ms_per_query_median"] = first["ms/query median"]
    res["ms_per_query_best"] = first["ms/query best"]
    res["vidlab_candidates_rescored"] = scorer.last_candidates
    if scorer.backend == "int8":
        res["read_int8_codes_ms"] = _read_bandwidth_ms(scorer.codes)
        if res["read_int8_codes_ms"]:
            res["gb_per_s_floor"] = scorer.codes.nbytes / 1e9 / (res["read_int8_codes_ms"] / 1e3)
    if args.ann:
        sub = emb[:200_000]
        exact = ExactScorer(sub)
        _, ex_rows = exact.search(qs, 10)
        t0 = time.perf_counter()
        ann = make_scorer("faiss", sub.astype(np.float32), nlist=512, nprobe=32)
        res["ann_build_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        _, an_rows = ann.search(qs, 10)
        res["ann_ms_per_query"] = 1e3 * (time.perf_counter() - t0) / len(qs)
        res["ann_recall_at_10_random_200k"] = recall_at_k(an_rows, ex_rows)
        # clustered rows, closer to real frame embeddings (many near-duplicate frames per scene)
        rng = np.random.default_rng(2)
        centres = random_unit_fp16(2000, 512, seed=3).astype(np.float32)
        x = centres[rng.integers(0, 2000, 200_000)] + 0.02 * (
            rng.random((200_000, 512), dtype=np.float32) - 0.5
        )
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        cq = x[rng.integers(0, 200_000, len(qs))] + 0.01 * (
            rng.random((len(qs), 512), dtype=np.float32) - 0.5
        )
        _, ex_rows = ExactScorer(x.astype(np.float16)).search(cq, 10)
        ann = make_scorer("faiss", x, nlist=512, nprobe=32)
        res["ann_recall_at_10_clustered_200k"] = recall_at_k(ann.search(cq, 10)[1], ex_rows)
    return res


def _print_clip_sample(cs: dict) -> None:
    print_table(
        [{"path": "reference (decode+embed)", "ms/call": cs["reference_ms_per_call"]},
         {"path": "cached FrameIndex.candidates", "ms/call": cs["cached_ms_per_call"]},
         {"path": "  of which candidate lookup", "ms/call": cs["lookup_only_ms_per_call"]},
         {"path": "cold first call (fills cache)", "ms/call": cs["cold_first_call_ms"]}],
        ["path", "ms/call"],
    )  # fmt: skip
    print(f"1. clip_sample speedup (warm cache vs reference): {cs['speedup']:.1f}x  (target >= 50x)\n")


def main(argv=None) -> int:
    args = bench_args(__doc__.splitlines()[0], EPILOG, argv, extra=_extra)
    import torch

    torch.set_num_threads(args.threads)  # the 2 cores are shared; more threads than free cores thrash
    if args.quick:
        args.rows = min(args.rows, 1_000_000)
    figures: dict = {"benchmark": "clip_index", "quick": args.quick, "model": args.model, "cores": cores()}
    with tempfile.TemporaryDirectory(prefix="vidlab-bench-") as tmp:
        work = Path(tmp)
        t0 = time.perf_counter()
        if args.search_only:
            args.skip_ray = True
        cs = {} if args.search_only else bench_clip_sample(args, work)
        if cs:
            figures["clip_sample"] = cs
            _print_clip_sample(cs)
        if not args.skip_ray:
            figures["indexing"] = ix = bench_indexing(args, work)
            print_table(
                [{"run": k, "end-to-end fps": ix[f"{k}_end_to_end_fps"], "steady fps": ix[f"{k}_steady_fps"]}
                 for k in ("local_1", "ray_2")],
                ["run", "end-to-end fps", "steady fps"],
            )  # fmt: skip
            print(
                f"2. indexing speedup, 2 Ray workers vs 1 local: steady {ix['steady_speedup']:.2f}x, "
                f"end-to-end {ix['end_to_end_speedup']:.2f}x (target >= 1.6x; cores: {figures['cores']}); "
                f"2 plain busy processes get {ix['parallel_headroom_2proc']:.2f}x on this machine right now\n"
            )
        figures["search"] = se = bench_search(args)
        print_table(se["table"], ["method", "ms/query median", "ms/query best", "same top-10 as numpy"])
        floor = se.get("read_int8_codes_ms")
        print(
            f"3. exact top-10 over {se['rows']:,} x 512 (stored fp16), one query at a time, one core: vidlab "
            f"{se['ms_per_query_median']:.1f} ms/query median (target <= 60 ms); reading its int8 codes once "
            f"takes {floor or float('nan'):.1f} ms here (memory-bandwidth floor, "
            f"{se.get('gb_per_s_floor', float('nan')):.1f} GB/s); {se['vidlab_candidates_rescored']} rows rescored"
        )
        if "ann_recall_at_10_random_200k" in se:
            print(
                f"   faiss IVF (nlist 512, nprobe 32) on 200k random rows: recall@10 "
                f"{se['ann_recall_at_10_random_200k']:.3f} (clustered rows: {se['ann_recall_at_10_clustered_200k']:.3f}), "
                f"{se['ann_ms_per_query']:.2f} ms/query"
            )
        figures["seconds"] = round(time.perf_counter() - t0, 1)
    emit_json(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
