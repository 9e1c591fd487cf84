"""``vidlab index`` (build frame-index caches for many videos, local or Ray) and ``vidlab search`` (query them)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass

INDEX_EPILOG = """examples:
  vidlab index videos/ --cache-dir outputs/index                       # tiny built-in model, 1 frame/s
  vidlab index videos/ --cache-dir outputs/index --model ViT-B-16:openai --sampling fps=2
  vidlab index list.txt --cache-dir outputs/index --backend ray --workers 2
  vidlab index videos/ --preset my_index.yaml        # IndexConfig keys, e.g. workers: 4, gpus_per_worker: 0.5
  RAY_ADDRESS=ray://head:10001 vidlab index /data/videos --cache-dir /data/index --backend ray \\
      --workers 16 --gpus-per-worker 0.25

Inputs are folders (searched recursively for video files), list files (.txt: one path per line) or
video files. Each video gets one cache file in --cache-dir, keyed by its content identity, the model
tag, the sampling spec and the preprocessing version, so renamed videos are not re-embedded and a
rerun only does what is missing (failures are retried). Writes DIR/manifest.json (what `vidlab search`
reads), the job's records (DIR/jobs/<model>__<sampling>/results.jsonl), summary.json and config.yaml.
The default model is the tiny built-in one (random weights: plumbing only); use a real CLIP such as
ViT-B-16:openai (VideoBrain's) for meaningful retrieval.
Exit status: 0 all indexed, 2 some videos failed (listed in the summary), 1 bad arguments.
"""

SEARCH_EPILOG = """examples:
  vidlab search "a red ball rolling" --index outputs/index -k 10
  vidlab search "goal celebration" --index outputs/index -k 5 --nms 48 --json
  vidlab search "a dog" --index outputs/index --scorer faiss --nprobe 32       # ANN for huge corpora

Scores are cosine similarities between the query's text embedding and the cached frame embeddings
(exact matmul unless --scorer faiss). --nms N keeps results of one video at least N frames apart.
"""


@dataclass
class IndexConfig:
    """Options of ``vidlab index`` (saved as config.yaml in the job folder)."""

    inputs: tuple = ()
    cache_dir: str = ""
    model: str = "vidlab-tiny"
    sampling: str = "fps=1"
    backend: str = "local"
    workers: int = 1
    cpus_per_worker: float = 1.0
    gpus_per_worker: float = 0.0
    device: str = "auto"
    batch_size: int = 64
    max_retries: int = 2
    torch_threads: int | None = None


def _index_parser() -> argparse.ArgumentParser:
    from .frame_index import default_cache_dir

    p = argparse.ArgumentParser(
        prog="vidlab index",
        description="Build CLIP frame-embedding caches for videos (resumable; local or Ray workers).",
        epilog=INDEX_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("inputs", nargs="+", help="video folders, list files (.txt) or video files")
    p.add_argument(
        "--cache-dir", default=str(default_cache_dir()), help="where caches + manifest go (%(default)s)"
    )
    p.add_argument(
        "--model", default=IndexConfig.model, help="CLIP spec: vidlab-tiny, ViT-B-16:openai, hf-hub:..., DIR"
    )
    p.add_argument(
        "--sampling", default=IndexConfig.sampling, help="fps=R | every=N | indices=a,b,c (%(default)s)"
    )
    p.add_argument(
        "--backend", choices=("local", "ray"), default="local", help="executor backend (%(default)s)"
    )
    p.add_argument(
        "--workers", type=int, default=1, help="Ray actors, each loading the model once (%(default)s)"
    )
    p.add_argument("--cpus-per-worker", type=float, default=1.0, help="Ray num_cpus per actor (%(default)s)")
    p.add_argument("--gpus-per-worker", type=float, default=0.0, help="Ray num_gpus per actor (%(default)s)")
    p.add_argument(
        "--device", default="auto", help="torch device for embedding: auto, cpu, cuda (%(default)s)"
    )
    p.add_argument("--batch-size", type=int, default=64, help="frames per embedding batch (%(default)s)")
    p.add_argument("--max-retries", type=int, default=2, help="retries per failed video (%(default)s)")
    p.add_argument(
        "--torch-threads", type=int, default=None, help="torch threads per worker (default: torch's)"
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--preset",
        default=None,
        help="YAML preset (path or configs/ name) with IndexConfig keys; flags override it",
    )
    return p


def index_main(argv: list[str] | None = None) -> int:
    """``vidlab index``: see INDEX_EPILOG."""
    from pathlib import Path

    from vidlab.config import save_resolved

    from .indexing import collect_videos, index_videos
    from .models import ModelLoadError, UnknownModelError
    from .sampling import Sampling, SamplingError

    parser = _index_parser()
    known, _ = parser.parse_known_args(argv)
    if known.preset:  # defaults <- preset <- explicit flags
        from vidlab.config import ConfigError, resolve

        try:
            preset = resolve(IndexConfig, known.preset)
        except ConfigError as e:
            print(f"vidlab index: {e}", file=sys.stderr)
            return 1
        parser.set_defaults(**{k: v for k, v in asdict(preset).items() if k not in ("inputs",) and v != ""})
    args = parser.parse_args(argv)
    cfg = IndexConfig(**{k: v for k, v in vars(args).items() if k in IndexConfig.__dataclass_fields__})
    cfg.inputs = tuple(args.inputs)
    try:
        sampling = Sampling.parse(args.sampling).spec
        videos = collect_videos(list(args.inputs))
        if not videos:
            print(f"vidlab index: no videos found in {list(args.inputs)}", file=sys.stderr)
            return 1
        report = index_videos(
            videos,
            args.cache_dir,
            args.model,
            sampling=sampling,
            backend=args.backend,
            workers=args.workers,
            cpus_per_worker=args.cpus_per_worker,
            gpus_per_worker=args.gpus_per_worker,
            device=args.device,
            batch_size=args.batch_size,
            max_retries=args.max_retries,
            torch_threads=args.torch_threads,
            progress=False if args.quiet else None,
        )
    except (SamplingError, UnknownModelError, ModelLoadError, FileNotFoundError, ValueError) as e:
        print(f"vidlab index: {e}", file=sys.stderr)
        return 1
    save_resolved(cfg, report.job_dir)
    summary = asdict(report)
    (Path(report.job_dir) / "summary.json").write_text(json.dumps(summary, indent=1))
    print(
        f"videos: {report.videos}  indexed: {report.indexed}  cached: {report.cached}  failures: {report.failures}  "
        f"frames: {report.frames}  embedded: {report.frames_embedded} in {report.seconds:.2f}s "
        f"({report.frames_per_s:.1f} frames/s)"
    )
    for err in report.errors:
        print(f"  failed: {err['id']}: {err['type']}: {err['message']}", file=sys.stderr)
    print(f"manifest: {report.manifest}\njob records: {report.job_dir}/results.jsonl")
    return 2 if report.failures else 0


def _search_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="vidlab search",
        description="Search indexed videos with a text query (exact cosine top-k by default).",
        epilog=SEARCH_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("query", help="text query (a few words work best)")
    p.add_argument("--index", required=True, help="the --cache-dir of `vidlab index`, or its manifest.json")
    p.add_argument("-k", type=int, default=10, help="results to return (%(default)s)")
    p.add_argument("--nms", type=int, default=None, help="min frame distance between results of one video")
    p.add_argument("--scorer", choices=("exact", "faiss"), default="exact", help="%(default)s")
    p.add_argument("--nprobe", type=int, default=16, help="faiss cells scanned per query (%(default)s)")
    p.add_argument(
        "--model", default=None, help="override the manifest's model spec (must give the same tag)"
    )
    p.add_argument("--device", default="auto", help="torch device for the text encoder (%(default)s)")
    p.add_argument("--json", action="store_true", help="print JSON lines instead of a table")
    p.add_argument(
        "--no-verify", action="store_true", help="skip re-hashing each cache on load (huge, trusted corpora)"
    )
    return p


def search_main(argv: list[str] | None = None) -> int:
    """``vidlab search``: see SEARCH_EPILOG."""
    from .corpus import Corpus, read_manifest
    from .models import ModelLoadError, UnknownModelError, load_model

    args = _search_parser().parse_args(argv)
    if args.k < 1:
        print("vidlab search: -k must be >= 1", file=sys.stderr)
        return 1
    try:
        _, manifest = read_manifest(args.index)
        model = load_model(args.model or manifest["model"], device=args.device)
        kw = {"nprobe": args.nprobe} if args.scorer == "faiss" else {}
        corpus = Corpus.open(args.index, model=model, scorer=args.scorer, verify=not args.no_verify, **kw)
        rows = corpus.search(args.query, k=args.k, nms_window=args.nms)
    except (FileNotFoundError, ValueError, UnknownModelError, ModelLoadError, ImportError) as e:
        print(f"vidlab search: {e}", file=sys.stderr)
        return 1
    if args.json:
        for r in rows:
            print(json.dumps(r))
        return 0
    print(f"{len(rows)} results for {args.query!r} over {len(corpus)} frames of {len(corpus.indexes)} videos")
    for rank, r in enumerate(rows, 1):
        print(f"{rank:>3}  {r['score']:+.4f}  {r['time']:>9.2f}s  frame {r['frame']:>7}  {r['video']}")
    return 0
