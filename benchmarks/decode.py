"""Decode benchmark: sparse frame access through vidlab's reader versus its peers, side by side in one run.

Files (generated, cached under ~/.cache/vidlab/bench): short and long, h264 GOP 30 and GOP 250. The long
file is the short one's packets repeated with shifted timestamps (remuxed, not re-encoded), so a
2-hour video costs seconds to make; its frames carry ``index % chunk`` in their index code.
Cases: 16 / 32 / 128 frames, uniform (``uniform_indices``) and random (unsorted) indices.
Peers: decord ``get_batch`` (indices as given; timed in its own block per file, because an open decord
reader keeps a core busy in background threads); PyAV seeking once per frame (seek to the frame's
timestamp, decode forward to it), with PyAV's default threading and with ``thread_type="AUTO"`` (frame +
slice threads); torchcodec in both seek modes (``exact``, ``approximate``); PyAV decoding sequentially from the start to the last requested
frame (the PyAV peers convert to RGB the way vidlab does); vidlab ``open_video(path)`` (auto backend). Readers are opened once
per file (opening is reported separately); every timed call fetches the frames as RGB arrays.
Robust to load: in every case vidlab and each peer run once per round (>= 7 rounds, rotating order), each
peer's time is divided by vidlab's time of the same round, and the table reports the median of these
paired ratios with their range, plus the load average; a peer counts as best when its median is lowest.
A peer that is clearly not the best (after 3 rounds its fastest call took over twice the slowest call of
another peer) stops early; vidlab and the leading peers run every round.
The same pairing in process CPU time (all threads) is reported beside it: on a loaded machine the
scheduler's share, not the decoder, sets much of the wall time, while CPU time follows the work done.
Also measured: peak RSS of a fresh process reading 32 frames from the long (2-hour) video.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import resource
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import bench_args, emit_json, print_table  # noqa: E402
from vidlab.io import atomic_path, atomic_write_json  # noqa: E402
from vidlab.paths import cache_dir  # noqa: E402

EPILOG = """examples:
  python benchmarks/decode.py --quick      # 320x180, short 750 / long 6000 frames, 16 and 32 frames (< 60 s)
  python benchmarks/decode.py --smoke      # 160x96, short 120 / long 240 frames, 16 frames, 3 rounds
  python benchmarks/decode.py              # 640x360, short 3000 / long 174000 frames (2 h 0 m 50 s at 24 fps)
  python benchmarks/decode.py --resume /tmp/dec   # saves each file's cases; run again to continue
  python benchmarks/decode.py --quick --files short-250 --repeats 9   # one file, 9 paired rounds
"""

# x264 veryfast with a fixed IBBBP pyramid: the B-frame layout of typical streaming encodes (x264's
# adaptive B placement picks almost none on this synthetic content). Phone recordings often have no
# B-frames; there vidlab's non-reference skipping has nothing to skip.
X264_BFRAMES = "bframes=3:b-adapt=0:b-pyramid=normal"
X264_TAG = "v2"
CACHE = cache_dir("bench")
FPS = 24


def render_chunk(width: int, height: int, frames: int, gop: int) -> Path:
    """The short benchmark video (cached by its parameters)."""
    from vidlab.video.synth import render_synthetic

    path = CACHE / f"chunk_{width}x{height}_{frames}f_gop{gop}_{X264_TAG}.mp4"
    if not path.exists():
        print(f"rendering {path.name} ...", file=sys.stderr, flush=True)
        params = f"keyint={gop}:min-keyint={gop}:scenecut=0:{X264_BFRAMES}"
        render_synthetic(
            path, frames, fps=FPS, width=width, height=height, seed=11, gop=gop, crf=28, preset="veryfast",
            num_shapes=4, progress=True, options={"x264-params": params},
        )  # fmt: skip
    return path


def tile_video(src: Path, repeats: int) -> Path:
    """Repeat ``src``'s packets ``repeats`` times with shifted timestamps into one longer mp4 (no re-encode)."""
    import av

    dst = src.with_name(f"{src.stem}_x{repeats}.mp4")
    if dst.exists():
        return dst
    print(f"tiling {src.name} x{repeats} -> {dst.name} ...", file=sys.stderr, flush=True)
    inp = av.open(str(src))
    ist = inp.streams.video[0]
    packets = [(p.pts, p.dts, p.is_keyframe, bytes(p), p.duration) for p in inp.demux(ist) if p.size]
    span = max(p[0] for p in packets) - min(p[0] for p in packets) + (packets[-1][4] or 1)
    with atomic_path(dst) as tmp:
        out = av.open(str(tmp), "w", format="mp4")
        ost = out.add_stream_from_template(ist)
        for k in range(repeats):
            for pts, dts, key, data, dur in packets:
                pk = av.Packet(data)
                pk.pts, pk.dts = pts + k * span, dts + k * span
                pk.time_base = ist.time_base
                pk.duration = dur
                pk.is_keyframe = key
                pk.stream = ost
                out.mux(pk)
        out.close()
    inp.close()
    return dst


FILES = ("short-30", "long-30", "short-250", "long-250")


def _files(text: str) -> list[str]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    bad = [t for t in names if t not in FILES]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"choose from {','.join(FILES)}, got {text!r}")
    return names


def _extra(ap) -> None:
    ap.add_argument(
        "--resume", metavar="DIR", default=None,
        help="write each file's cases to DIR/<file>.json as it finishes and skip files already there (same "
        "sizes, rounds, backends and reader source); delete DIR to measure again",
    )  # fmt: skip
    ap.add_argument(
        "--files", type=_files, default=None, help=f"only these files, comma-separated: {','.join(FILES)}"
    )


def reader_source_hash() -> str:
    """Hash of vidlab's video package source: a resumed file's cases count only for the same reader."""
    root = Path(__file__).resolve().parents[1] / "vidlab" / "video"
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def resumed(folder: str | None, key: str, signature: dict) -> list[dict] | None:
    """The saved cases of ``key`` in ``folder`` if they were measured under ``signature``, else None."""
    if not folder:
        return None
    path = Path(folder) / f"{key}.json"
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return saved["rows"] if saved.get("signature") == signature else None


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _spread(x) -> dict:
    a = np.asarray(x, float)
    return {"median": float(np.median(a)), "min": float(a.min()), "max": float(a.max()), "n": int(a.size)}


def paired_rounds(fns: dict, idx, rounds: int, drop_after: int = 3, dominated: float = 2.0) -> dict:
    """Run every contender once per round (the order rotates round by round, after one untimed warm-up
    call each); returns ``{name: [seconds per round], "vidlab_vs": {peer: [t_peer / t_vidlab per round]},
    "cpu_vs": {peer: [...]}, "dropped": {peer: rounds run}}`` (the paired ratio: vidlab's speed over the
    peer's, both timed in the same round; ``cpu_vs`` pairs the process's CPU time instead of wall time: what
    a loaded machine's scheduler does not distort, and all threads count, so a contender gains nothing by
    spreading work over threads).

    A peer that cannot be the best one stops early, to spend the time on the contenders that matter: after
    ``drop_after`` rounds, a peer whose fastest round so far took more than ``dominated`` times the slowest
    round of another peer leaves (its ratios keep the rounds it ran, each paired with vidlab's time of that
    round). vidlab and the fastest peers always run every round."""
    names = list(fns)
    for fn in fns.values():
        fn(idx)
    times: dict = {k: [] for k in names}
    cpu: dict = {k: [] for k in names}
    faults: dict = {k: [] for k in names}
    live = list(names)
    dropped: dict = {}
    for r in range(rounds):
        for name in live[r % len(live) :] + live[: r % len(live)]:
            f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            c0, t0 = time.process_time(), time.perf_counter()
            fns[name](idx)
            times[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
            faults[name].append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
        if r + 1 >= drop_after and r + 1 < rounds:
            peers = [k for k in live if k != "vidlab"]
            for k in peers:
                if any(
                    min(times[k]) > dominated * max(times[o]) for o in peers if o != k and o not in dropped
                ):
                    dropped[k] = r + 1
            live = [k for k in live if k not in dropped]
    v, vc = np.asarray(times["vidlab"]), np.maximum(np.asarray(cpu["vidlab"]), 1e-9)
    times["vidlab_vs"] = {k: list(np.asarray(times[k]) / v[: len(times[k])]) for k in names if k != "vidlab"}
    times["cpu_vs"] = {k: list(np.asarray(cpu[k]) / vc[: len(cpu[k])]) for k in names if k != "vidlab"}
    times["dropped"] = dropped
    times["faults"] = {k: float(np.median(v)) for k, v in faults.items()}  # page faults per call (process)
    return times


# peers --------------------------------------------------------------------------------------------
def _rgb_converter():
    """Frame -> RGB array through one shared swscale context, as vidlab does, so that the PyAV peers
    differ from vidlab only in how they seek and decode (``to_ndarray`` per frame is ~20x slower)."""
    from av.video.reformatter import VideoReformatter

    reformatter = VideoReformatter()
    return lambda frame: reformatter.reformat(frame, format="rgb24").to_ndarray()


class PyAVSeekPerFrame:
    """The common recipe: for each index seek to its timestamp (backward to a keyframe), decode forward to it."""

    def __init__(self, path: Path, thread_type: str | None = None):
        import av

        self.c = av.open(str(path))
        self.s = self.c.streams.video[0]
        if thread_type:  # "AUTO": frame + slice threads, PyAV's fastest documented setting
            self.s.thread_type = thread_type
        self.tb = self.s.time_base
        self.start = self.s.start_time or 0
        self.rate = Fraction(self.s.average_rate)
        self.rgb = _rgb_converter()

    def pts_of(self, i: int) -> int:
        return self.start + int(round(Fraction(i) / self.rate / self.tb))

    def __call__(self, indices) -> np.ndarray:
        out = []
        for i in indices:
            target = self.pts_of(int(i))
            self.c.seek(target, stream=self.s, backward=True)
            for f in self.c.decode(self.s):
                if f.pts is not None and f.pts >= target:
                    out.append(self.rgb(f))
                    break
        return np.stack(out)


class PyAVSequential:
    """Decode from the start to the last requested frame, converting the requested ones."""

    def __init__(self, path: Path):
        self.path = path
        self.rgb = _rgb_converter()

    def __call__(self, indices, limit: int | None = None) -> np.ndarray:
        import av

        want = {int(i) for i in indices}
        last = max(want) if limit is None else min(max(want), limit)
        got = {}
        with av.open(str(self.path)) as c:
            s = c.streams.video[0]
            for k, f in enumerate(c.decode(s)):
                if k in want:
                    got[k] = self.rgb(f)
                if k >= last:
                    break
        return np.stack([got[int(i)] for i in indices if int(i) in got])


def peak_rss(path: Path, backend: str) -> dict:
    """Peak RSS (MB) of a fresh process that opens ``path`` and reads 32 uniform frames.

    Uses the child's own high-water mark (``VmHWM``): ``ru_maxrss`` would carry the parent's peak over the
    fork on Linux.
    """
    code = (
        "import json, resource, sys, time\n"
        "from vidlab.video import open_video, uniform_indices\n"
        "t = time.perf_counter()\n"
        f"r = open_video({str(path)!r}, backend={backend!r})\n"
        "t_open = time.perf_counter() - t\n"
        "f = r.get_frames(uniform_indices(0, r.num_frames - 1, 32))\n"
        "t_all = time.perf_counter() - t\n"
        "hwm = [int(x.split()[1]) for x in open('/proc/self/status') if x.startswith('VmHWM')]\n"
        "rss_kb = hwm[0] if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "print(json.dumps({'rss_mb': rss_kb / 1024,"
        " 'backend': r.backend, 'frames': r.num_frames, 'shape': list(f.shape),"
        " 'open_s': t_open, 'total_s': t_all}))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    if res.returncode != 0:
        return {"error": res.stderr.strip().splitlines()[-1:]}
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    args = bench_args(__doc__.splitlines()[0], EPILOG, argv, extra=_extra)
    from vidlab.video import available_backends, open_video, uniform_indices
    from vidlab.video.testing import codes_of

    counts: tuple[int, ...]
    if args.smoke:  # every file, peer and case kind once over: 160x96, short 120 / long 240 frames, 16 frames
        width, height, chunk, tiles, counts = 160, 96, 120, 2, (16,)
    elif args.quick:
        width, height, chunk, tiles, counts = 320, 180, 750, 8, (16, 32)
    else:
        width, height, chunk, tiles, counts = 640, 360, 3000, 58, (16, 32, 128)
    have = available_backends()
    t_start = time.perf_counter()
    load_start = _load()
    rounds = 3 if args.smoke else max(7, args.repeats)
    files = []
    for gop in (30, 250):
        short = render_chunk(width, height, chunk, gop)
        files += [("short", gop, short), ("long", gop, tile_video(short, tiles))]
    print(
        f"# decode benchmark ({'quick' if args.quick else 'full'}): {width}x{height} h264 @ {FPS} fps; short = "
        f"{chunk} frames ({chunk / FPS:.0f} s), long = {chunk * tiles} frames ({chunk * tiles / FPS / 60:.1f} min)"
        f"; backends here: {have}",
        flush=True,
    )
    rows: list[dict] = []
    cases = rows
    signature = {"size": [width, height], "chunk": chunk, "tiles": tiles, "counts": list(counts),
                 "rounds": rounds, "backends": have, "reader_source": reader_source_hash()}  # fmt: skip
    for kind, gop, path in files:
        key = f"{kind}-{gop}"
        if args.files and key not in args.files:
            continue
        saved = resumed(args.resume, key, signature)
        if saved is not None:
            print(
                f"  {kind} gop{gop}: resumed from {args.resume}/{key}.json ({len(saved)} cases)", flush=True
            )
            rows.extend(saved)
            continue
        file_rows: list[dict] = []
        rng = np.random.default_rng([0, gop, len(kind)])  # per file, so a resumed run draws the same indices
        t0 = time.perf_counter()
        reader = open_video(path)
        open_s = {"vidlab": time.perf_counter() - t0}
        n_frames = reader.num_frames
        peers: dict = {"pyav-seek": PyAVSeekPerFrame(path), "pyav-seek-auto": PyAVSeekPerFrame(path, "AUTO")}
        if "torchcodec" in have:
            from torchcodec.decoders import VideoDecoder

            for mode, name in (("exact", "tc-exact"), ("approximate", "tc-approx")):
                t0 = time.perf_counter()
                dec = VideoDecoder(str(path), seek_mode=mode, dimension_order="NHWC")
                open_s[name] = time.perf_counter() - t0
                peers[name] = lambda idx, dec=dec: dec.get_frames_at(indices=list(map(int, idx))).data.numpy()
        # PyAV sequential decodes to the last requested frame, whatever the count: timed once per file on
        # the largest random case; on files longer than the cap it is timed over `cap` frames and scaled.
        seq = PyAVSequential(path)
        cap = 2000 if args.quick else 6000
        probe_idx = np.sort(rng.choice(n_frames, size=max(counts), replace=False))
        to_decode = int(probe_idx.max()) + 1
        t0 = time.perf_counter()
        seq(probe_idx, limit=cap - 1)
        seq_s = (time.perf_counter() - t0) * (to_decode / min(to_decode, cap))
        plan = []
        for n in counts:
            for pattern in ("uniform", "random"):
                idx = (
                    uniform_indices(0, n_frames - 1, n)
                    if pattern == "uniform"
                    else rng.choice(n_frames, n, False)
                )
                plan.append((n, pattern, idx))
        if to_decode <= cap:  # short file: sequential decoding is a real contender, timed every round
            peers["pyav-seq"] = seq
        # vidlab and every peer run in each round, in a rotating order; each peer's time is paired with
        # vidlab's time of the same round (adjacent in time, so load hits both alike)
        timings = []
        vid = lambda idx, reader=reader: reader.get_frames(idx)  # noqa: E731
        for _n, _pattern, idx in plan:
            fns = {"vidlab": vid, **peers}
            timings.append(paired_rounds(fns, idx, rounds))
        # decord's reader keeps ~1 core busy in background threads for as long as it is open (measured:
        # 1.0-1.6 CPU-s per idle second), which would slow whatever else runs on a small machine; so it is
        # paired with vidlab in a block of its own, with no other reader open. vidlab runs while decord's
        # threads spin here too: that costs vidlab, never decord.
        if "decord" in have:
            from vidlab.video.reader import import_decord

            decord = import_decord()
            t0 = time.perf_counter()
            vr = decord.VideoReader(str(path), ctx=decord.cpu(0))
            open_s["decord"] = time.perf_counter() - t0
            for (_, _, idx), res in zip(plan, timings):
                fns = {
                    "vidlab": vid,
                    "decord": lambda idx, vr=vr: vr.get_batch(list(map(int, idx))).asnumpy(),
                }
                more = paired_rounds(fns, idx, rounds)
                res["decord"] = more["decord"]
                res["vidlab_vs"]["decord"] = more["vidlab_vs"]["decord"]
                # in CPU time decord's idle threads, spinning during vidlab's turn, count against vidlab
                res["cpu_vs"]["decord"] = more["cpu_vs"]["decord"]
                res["faults"]["decord"] = more["faults"]["decord"]
                res["vidlab"] = res["vidlab"] + more["vidlab"]
            del vr, fns  # the lambdas hold the reader too: drop both so its threads stop
            gc.collect()
        print(
            f"  {kind} gop{gop}: {n_frames} frames, vidlab backend={reader.backend}; open s {open_s}; "
            f"load {_load()}",
            flush=True,
        )
        for (n, pattern, idx), res in zip(plan, timings):
            exact = codes_of(reader.get_frames(idx)) == [int(i) % chunk for i in idx]
            fps = {
                k: n / float(np.median(v))
                for k, v in res.items()
                if k not in ("vidlab_vs", "cpu_vs", "dropped", "faults")
            }
            ratios = {k: _spread(v) for k, v in res["vidlab_vs"].items()}
            cpu_ratios = {k: _spread(v) for k, v in res["cpu_vs"].items()}
            if "pyav-seq" not in ratios:  # long file: estimated once per file, unpaired
                fps["pyav-seq"] = n / seq_s
                ratios["pyav-seq"] = _spread([fps["vidlab"] / fps["pyav-seq"]])
            best = min(ratios, key=lambda k: ratios[k]["median"])
            row = {
                "file": kind,
                "gop": gop,
                "n": n,
                "pattern": pattern,
                **{k: round(v, 1) for k, v in fps.items()},
                "best_peer": best,
                "vs_best": round(ratios[best]["median"], 2),
                "vs_best_range": f"{ratios[best]['min']:.2f}-{ratios[best]['max']:.2f}",
                "pairs": ratios[best]["n"],
                "vs_best_cpu": round(cpu_ratios[best]["median"], 2) if best in cpu_ratios else None,
                "vs_seek": round(ratios["pyav-seek"]["median"], 2),
                "backend": reader.backend,
                "exact": exact,
                "seq": "" if to_decode <= cap else "est",
                "dropped_after_rounds": res["dropped"],
                "page_faults_per_call": res["faults"],
                "paired_ratios": {k: {m: round(x, 3) for m, x in v.items()} for k, v in ratios.items()},
                "paired_cpu_ratios": {
                    k: {m: round(x, 3) for m, x in v.items()} for k, v in cpu_ratios.items()
                },
            }
            file_rows.append(row)
            print(
                f"    n={n:<3d} {pattern:7s} vidlab {fps['vidlab']:8.1f} f/s  best peer {best} "
                f"{fps[best]:8.1f} f/s  paired ratio median {row['vs_best']:.2f}x "
                f"(range {row['vs_best_range']}, {row['pairs']} pairs; CPU-time {row['vs_best_cpu']})  "
                f"vs seek {row['vs_seek']:.2f}x",
                flush=True,
            )
        reader.close()
        peers.clear()
        rows.extend(file_rows)
        if args.resume:
            atomic_write_json(Path(args.resume) / f"{key}.json", {"signature": signature, "rows": file_rows})
    if not rows:
        print("no file selected", file=sys.stderr)
        return 2
    cols = ["file", "gop", "n", "pattern", "vidlab", *(["decord"] if "decord" in have else []), "pyav-seek",
            "pyav-seek-auto", "pyav-seq", *(["tc-exact", "tc-approx"] if "torchcodec" in have else []),
            "best_peer", "vs_best", "vs_best_range", "pairs", "vs_best_cpu", "vs_seek", "backend", "exact", "seq"]  # fmt: skip
    print(
        "\nframes/s from median times (higher is better); vs_best = median over rounds of the paired ratio"
        "\nvidlab fps / peer fps, for the peer with the lowest such median (range: min-max of its pairs);"
        "\nvs_best_cpu = the same pairing in process CPU time (all threads; decord's idle threads count against"
        "\nvidlab); vs_seek = the same against PyAV seek-per-frame; exact = vidlab's frames carry the asked indices;"
        "\nseq = est: pyav-seq timed once on a prefix and scaled (long files; unpaired)"
    )
    print_table(rows, cols)
    long_250 = [p for k, g, p in files if k == "long" and g == 250][0]
    rss = {b: peak_rss(long_250, b) for b in ("auto", "pyav")}
    print(f"\npeak RSS reading 32 frames of the long video ({chunk * tiles} frames): {rss}")
    g250 = [r["vs_seek"] for r in cases if r["gop"] == 250]
    figures = {
        "benchmark": "decode",
        "quick": bool(args.quick),
        "resolution": f"{width}x{height}",
        "short_frames": chunk,
        "long_frames": chunk * tiles,
        "rounds": rounds,
        "loadavg_start_end": [load_start, _load()],
        "min_vs_best_peer": min(r["vs_best"] for r in cases),
        "cases_below_1": [
            f"{r['file']} gop{r['gop']} n={r['n']} {r['pattern']} vs {r['best_peer']} {r['vs_best']} "
            f"({r['vs_best_range']})"
            for r in cases
            if r["vs_best"] < 1.0
        ],  # fmt: skip
        "min_vs_best_peer_cpu": min(
            (r["vs_best_cpu"] for r in cases if r["vs_best_cpu"] is not None), default=None
        ),
        "geomean_vs_best_peer": float(np.exp(np.mean(np.log([r["vs_best"] for r in cases])))),
        "min_vs_pyav_seek_gop250": min(g250),
        "all_exact": all(r["exact"] for r in cases),
        "peak_rss_mb": {k: v.get("rss_mb") for k, v in rss.items()},
        "wall_s": round(time.perf_counter() - t_start, 1),
        "cases": cases,
    }
    emit_json(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
