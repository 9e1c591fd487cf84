"""``vidlab index`` (build frame-index caches for many videos, local or Ray) and ``vidlab search`` (query them)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path

from vidlab.errors import UserError
from vidlab.outcome import ALL_OK, NONE_OK, SOME_FAILED

from .indexing import IndexConfig

INDEX_EPILOG = """examples:
  vidlab index videos/ --cache-dir outputs/index                       # tiny built-in model, 1 frame/s
  vidlab index videos/ --cache-dir outputs/index --model ViT-B-16:openai --sampling fps=2
  vidlab index list.txt --cache-dir outputs/index --backend ray --workers 2
  vidlab index videos/ --preset my_index.yaml        # IndexConfig keys, e.g. run: {workers: 4, gpus_per_worker: 0.5}
  vidlab index videos/ --cache-dir outputs/index sampling=every=12 batch_size=32   # key=value overrides
  RAY_ADDRESS=ray://head:10001 vidlab index /data/videos --cache-dir /data/index --backend ray \\
      --workers 16 --gpus-per-worker 0.25

Inputs are folders (searched recursively for video files), list files (.txt: one path per line) or
video files. Each video gets one cache file in --cache-dir, keyed by its content identity, the model
tag, the sampling spec and the preprocessing version, so renamed videos are not re-embedded and a
rerun only does what is missing (failures are retried). Writes DIR/manifest.json (what `vidlab search`
reads; indexing more videos into DIR merges them in, and another --sampling gets its own entry), the
job's records (DIR/jobs/<model>__<sampling>/results.jsonl), summary.json and config.yaml. Settings:
defaults <- --preset <- key=value words <- explicit flags. A second `vidlab index` into the same DIR
while one runs is refused (one line).
The default model is the tiny built-in one (random weights: plumbing only); use a real CLIP such as
ViT-B-16:openai (VideoBrain's) for meaningful retrieval.
Exit status: 0 all indexed; 2 a user error (one line on stderr); 3 some videos failed, 4 all of them (each
named on stderr with its reason, all in the job folder's failures.jsonl; a rerun retries them). List files
name videos relative to their own folder (docs/reference/cli.md, "Paths and exit codes").
"""

SEARCH_EPILOG = """examples:
  vidlab search "a red ball rolling" --index outputs/index -k 10
  vidlab search "goal celebration" --index outputs/index -k 5 --nms 48 --json
  vidlab search "a dog" --index outputs/index --scorer faiss --nprobe 32       # ANN for huge corpora
  vidlab search "a dog" --index outputs/index --sampling fps=2       # only the videos indexed at fps=2

Scores are cosine similarities between the query's text embedding and the cached frame embeddings
(exact unless --scorer faiss; faiss on fewer than 78 frames falls back to exact search, with a note).
--nms N keeps results of one video more than N frames apart; candidates are widened until k results
survive, so fewer than k come back only when the indexed frames cannot give k that far apart.
By default every video indexed with the newest model is searched (a video indexed with several
samplings counts once, from the newest index).
"""


class IndexInputError(UserError):
    """A bad ``vidlab index``/``vidlab search`` argument: sampling spec, model name, input path."""


# flag dest -> config key
_FLAGS = {"cache_dir": "cache_dir", "model": "model", "sampling": "sampling", "backend": "run.backend",
          "workers": "run.workers", "cpus_per_worker": "run.cpus_per_worker",
          "gpus_per_worker": "run.gpus_per_worker", "device": "device", "batch_size": "batch_size",
          "max_retries": "run.retries", "torch_threads": "torch_threads",
          "decode_workers": "decode_workers", "queue_depth": "queue_depth"}  # fmt: skip


def _index_parser() -> argparse.ArgumentParser:
    from vidlab.config import add_config_args

    from .frame_index import default_cache_dir

    p = argparse.ArgumentParser(
        prog="vidlab index",
        description="Build CLIP frame-embedding caches for videos (resumable; local or Ray workers).",
        epilog=INDEX_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "inputs",
        nargs="+",
        help="video folders, list files (.txt) or video files; key=value words are overrides",
    )
    p.add_argument("--cache-dir", default=None, help=f"where caches + manifest go ({default_cache_dir()})")
    p.add_argument("--model", default=None, help="CLIP spec: vidlab-tiny, ViT-B-16:openai, hf-hub:..., DIR")
    p.add_argument(
        "--sampling", default=None, help=f"fps=R | every=N | indices=a,b,c ({IndexConfig.sampling})"
    )
    p.add_argument("--backend", choices=("local", "ray"), default=None, help="executor backend (local)")
    p.add_argument("--workers", type=int, default=None, help="Ray actors, each loading the model once (1)")
    p.add_argument("--cpus-per-worker", type=float, default=None, help="Ray num_cpus per actor (1.0)")
    p.add_argument("--gpus-per-worker", type=float, default=None, help="Ray num_gpus per actor (0.0)")
    p.add_argument("--device", default=None, help="torch device for embedding: auto, cpu, cuda (auto)")
    p.add_argument("--batch-size", type=int, default=None, help="frames per embedding batch (64)")
    p.add_argument("--max-retries", type=int, default=None, help="retries per failed video (2)")
    p.add_argument(
        "--torch-threads", type=int, default=None, help="torch threads per worker (default: torch's)"
    )
    p.add_argument(
        "--decode-workers",
        type=int,
        default=None,
        help="decoding threads per worker, running ahead of the encoder (2; 0 = serial decode then embed)",
    )
    p.add_argument(
        "--queue-depth", type=int, default=None, help="decoded batches that may wait for the encoder (2)"
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_config_args(p, positional=False)
    return p


def _check_inputs(inputs: list[str]) -> None:
    """Refuse inputs that can never be read (a path that does not exist, a symlink loop, a FIFO, a device...)
    before anything is written.

    A video listed in a list file (or found in a folder) that is missing or undecodable is left to the job (a
    recorded failure); a video named on the command line must exist and open as a video (its container header
    is read, nothing is decoded), so a corrupt file is one line, before the cache folder is made."""
    from vidlab.datafiles import resolve_path
    from vidlab.io import InputFileError, file_problem

    for raw in inputs:
        p = Path(raw).expanduser()
        if p.is_dir():
            continue
        why = file_problem(p, allow_empty=True)
        if why == "no such file":
            raise IndexInputError(f"input {raw!r} does not exist (give video folders, list files or videos)")
        if why is not None:
            raise InputFileError(raw, f"cannot read input: {why}")
        if why is None and p.suffix.lower() in (".txt", ".lst", ".list"):
            for line in p.read_text().splitlines():
                if line.strip() and not line.strip().startswith("#"):
                    q = resolve_path(line.strip(), p)  # the one path rule: against the list file's folder
                    bad = file_problem(q, allow_empty=True)
                    if bad is not None and bad.startswith("symlink loop"):
                        raise InputFileError(q, f"cannot read video listed in {raw}: {bad}")
        elif why is None:
            from vidlab.video.probe import check_path, open_container

            container, _ = open_container(check_path(p))  # VideoReadError (one line) on a corrupt file
            container.close()


def _index_config(args: argparse.Namespace) -> tuple[IndexConfig, list[str]]:
    """defaults <- --preset <- key=value words <- explicit flags; the inputs without the key=value words."""
    from vidlab.config import config_from_args

    from .frame_index import default_cache_dir

    inputs = [x for x in args.inputs if not ("=" in x and not Path(x).exists())]
    args.overrides = [x for x in args.inputs if x not in inputs]
    if not inputs:
        raise IndexInputError("no inputs: give video folders, list files (.txt) or video files")
    flags = {key: getattr(args, dest) for dest, key in _FLAGS.items()}
    cfg = config_from_args(IndexConfig, args, flags)
    cfg.inputs = tuple(inputs)
    cfg.cache_dir = cfg.cache_dir or str(default_cache_dir())
    return cfg, inputs


def index_main(argv: list[str] | None = None) -> int:
    """``vidlab index``: see INDEX_EPILOG. Every mistake is a UserError (one line, exit 2); what the job
    skipped or redid is one ``vidlab index: warning:`` line each."""
    from vidlab.errors import command_reporting

    with command_reporting("vidlab index"):
        return _index(argv)


def _index(argv: list[str] | None) -> int:
    from vidlab.config import save_resolved
    from vidlab.distributed import job_lock
    from vidlab.io import atomic_write_json

    from .indexing import collect_videos, index_videos
    from .models import MissingWeightsError, ModelLoadError, UnknownModelError, check_model_spec
    from .sampling import Sampling, SamplingError

    args = _index_parser().parse_intermixed_args(argv)
    # before torch loads (OpenMP reads it once): the encoder's threads sleep while they wait instead of spinning
    # on the cores the decode workers need (docs/guides/clip-index.md); a value the user set is kept
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    cfg, inputs = _index_config(args)
    try:
        sampling = Sampling.parse(cfg.sampling).spec
    except SamplingError as e:
        raise IndexInputError(f"--sampling {cfg.sampling!r}: {e}") from e
    _check_inputs(inputs)
    try:
        check_model_spec(cfg.model)  # a misspelt model is one line before torch and open_clip load
    except (UnknownModelError, ModelLoadError, MissingWeightsError) as e:
        raise IndexInputError(str(e)) from e
    try:
        videos = collect_videos(inputs)
    except FileNotFoundError as e:
        raise IndexInputError(str(e)) from e
    if not videos:
        raise IndexInputError(f"no videos found in {inputs}")
    from vidlab.devices import check_devices
    from vidlab.distributed import check_run

    # a GPU this machine lacks (--device, or GPU workers on a Ray started here): one line, before the model loads
    check_devices({"--device": cfg.device}, backend=cfg.run.backend, gpus_per_worker=cfg.run.gpus_per_worker)
    check_run(cfg.run)  # an unreachable RAY_ADDRESS: one line, before the cache folder or its lock exists
    cache = Path(cfg.cache_dir)
    created = not cache.exists()
    try:
        # One index run per cache folder at a time (the manifest is shared); taken before anything is written.
        with job_lock(cache):
            cfg.sampling = sampling
            report = index_videos(videos, cfg, progress=False if args.quiet else None)
            save_resolved(cfg, report.job_dir)
            atomic_write_json(Path(report.job_dir) / "summary.json", asdict(report), indent=1)
    except (UnknownModelError, ModelLoadError, SamplingError) as e:
        _remove_if_empty(cache, created)
        raise IndexInputError(str(e)) from e
    except UserError:
        _remove_if_empty(cache, created)
        raise
    print(
        f"videos: {report.videos}  indexed: {report.indexed}  cached: {report.cached}  failures: {report.failures}  "
        f"frames: {report.frames}  embedded: {report.frames_embedded} in {report.seconds:.2f}s "
        f"({report.frames_per_s:.1f} frames/s)"
    )
    print(f"manifest: {report.manifest}\njob records: {report.job_dir}/results.jsonl")
    from vidlab.outcome import BatchOutcome, failure_from, finish

    failed = [failure_from({**e, "path": e["id"]}) for e in report.errors]
    return finish("vidlab index", BatchOutcome(report.videos, failed, report.failures_file), what="video")


def _remove_if_empty(folder: Path, created: bool) -> None:
    """Undo the folder this run created when it failed before writing anything but its lock file."""
    from vidlab.distributed.job import LOCK_FILE

    if not created or not folder.is_dir():
        return
    left = [p.name for p in folder.iterdir()]
    if set(left) <= {LOCK_FILE}:
        for name in left:
            os.unlink(folder / name)
        os.rmdir(folder)


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
    p.add_argument("--sampling", default=None, help="search only the index built with this sampling spec")
    p.add_argument("--json", action="store_true", help="print JSON lines instead of a table")
    p.add_argument(
        "--no-verify", action="store_true", help="skip re-hashing each cache on load (huge, trusted corpora)"
    )
    return p


def search_main(argv: list[str] | None = None) -> int:
    """``vidlab search``: see SEARCH_EPILOG. Every mistake is a UserError (one line, exit 2)."""
    from vidlab.devices import check_devices

    from .corpus import Corpus, read_manifest, select_videos
    from .models import ModelLoadError, UnknownModelError, check_model_spec, load_model

    args = _search_parser().parse_args(argv)
    if not args.query.strip():
        raise IndexInputError(
            'the query is empty: give a few words describing what to find, e.g. "a red ball"'
        )
    if args.k < 1:
        raise IndexInputError(f"-k must be >= 1, got {args.k}")
    if args.nms is not None and args.nms < 0:
        raise IndexInputError(f"--nms must be >= 0 frames, got {args.nms}")
    _, manifest = read_manifest(args.index)
    newest, _ = select_videos(manifest, sampling=args.sampling)
    check_devices({"--device": args.device})  # a GPU this machine lacks: one line, before the model loads
    try:
        check_model_spec(args.model or newest["model"])
        model = load_model(args.model or newest["model"], device=args.device)
    except (UnknownModelError, ModelLoadError) as e:
        raise IndexInputError(str(e)) from e
    kw = {"nprobe": args.nprobe} if args.scorer == "faiss" else {}
    try:
        corpus = Corpus.open(
            args.index,
            model=model,
            scorer=args.scorer,
            verify=not args.no_verify,
            sampling=args.sampling,
            warn=False,  # each skipped video is one line below, printed here only
            **kw,
        )
    except ImportError as e:  # faiss not installed
        raise IndexInputError(f"--scorer {args.scorer} needs faiss: pip install 'vidlab[ann]' ({e})") from e
    for skip in corpus.skipped:
        print(f"vidlab search: {skip}", file=sys.stderr)
    if corpus.skipped and not corpus.indexes:  # the batch rule's "nothing succeeded" (vidlab.outcome)
        print(
            f"vidlab search: error: nothing to search: all {len(corpus.skipped)} indexed videos were skipped (their "
            f"caches are missing or fail their check); rerun `vidlab index` on them with --cache-dir {corpus.dir}",
            file=sys.stderr,
        )
        return NONE_OK
    rows = corpus.search(args.query, k=args.k, nms_window=args.nms)
    if args.json:
        for r in rows:
            print(json.dumps(r))
    else:
        print(
            f"{len(rows)} results for {args.query!r} over {len(corpus)} frames of {len(corpus.indexes)} videos"
            + (f" ({len(corpus.skipped)} skipped)" if corpus.skipped else "")
        )
        for rank, r in enumerate(rows, 1):
            print(f"{rank:>3}  {r['score']:+.4f}  {r['time']:>9.2f}s  frame {r['frame']:>7}  {r['video']}")
    return SOME_FAILED if corpus.skipped else ALL_OK  # a skipped video is a failed item (vidlab.outcome)
