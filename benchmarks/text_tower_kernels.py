"""Where a question's text time goes: the CLIP text tower's matrix products at a question's few positions.

A question fills about 8 of the text tower's 77 positions (``vidlab.clip.text_tower`` runs only those), so each
linear layer is an [M, K] x [K, N] product with M = 8: a skinny product whose weights are read from memory once
per call. This benchmark times the tower's 48 products (ViT-B-32's shapes by default: 12 layers of q/k/v, out,
fc and proj) on one torch thread, in the same run:

  read floor        one pass summing every weight (the bytes a call must bring from memory, at best)
  M = 1             one position: a matrix-vector product per layer (close to the read floor)
  M = 2 ... 32      the kernels torch uses for ``F.linear`` (MKL's sgemm on x @ W.T), and the same product on a
                    pre-transposed weight, oneDNN's linear (``torch._C._nn.mkldnn_linear``) and NumPy's BLAS
  whole tower       ``ClipModel.embed_texts`` of a new 8-position prompt, own tokens and the full 77 positions

Medians of ``--repeats`` rounds after one warm-up each, the contenders of a figure alternating round by round.
The figures say how far a question's text is from the read floor on this machine, and whether another kernel
closes the gap: docs/results/qa-speed.md.

    python benchmarks/text_tower_kernels.py                     # ViT-B-32 shapes (about 1 minute)
    python benchmarks/text_tower_kernels.py --width 768 --layers 12 --no-tower
    python benchmarks/text_tower_kernels.py --smoke                             # every part, seconds
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # one thread for every BLAS, NumPy's too (set before NumPy loads its BLAS)

import argparse  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import add_smoke_arg, cpu_name, emit_json, time_side_by_side  # noqa: E402


def _medians_ms(fns: dict, repeats: int) -> dict[str, float]:
    """Median ms per contender, timed in alternating rounds after one warm-up each (``time_side_by_side``)."""
    timed = time_side_by_side(fns, repeats=repeats, budget_s=float("inf"), warmup=True)
    return {k: round(v["median"] * 1000, 2) for k, v in timed.items()}


def products(width: int, layers: int, rows: list[int], repeats: int) -> dict:
    """ms for the tower's 48 (by default) linear layers at each row count, per kernel."""
    import torch

    g = torch.Generator().manual_seed(0)
    shapes = [(3 * width, width), (width, width), (4 * width, width), (width, 4 * width)] * layers
    weights = [torch.randn(o, i, generator=g) for o, i in shapes]
    biases = [torch.randn(o, generator=g) for o, _ in shapes]
    transposed = [w.t().contiguous() for w in weights]
    flat = torch.cat([w.reshape(-1) for w in weights])
    flat_np = flat.numpy()
    # the faster of two single-thread reductions over every weight byte
    floors = _medians_ms({"torch": flat.sum, "numpy": flat_np.sum}, repeats)
    out: dict = {"weights_mb": round(flat.numel() * 4 / 2**20, 1), "read_floor_ms": min(floors.values())}
    try:
        dnn_w = [w.to_mkldnn() for w in weights]
        dnn_b = [b.to_mkldnn() for b in biases]
    except RuntimeError:  # a torch built without oneDNN
        dnn_w = dnn_b = None
    np_w = [w.numpy() for w in weights]
    by_rows = {}
    for m in rows:
        xs = {k: torch.randn(m, k, generator=g) for k in (width, 4 * width)}
        xn = {k: v.numpy() for k, v in xs.items()}
        fns = {
            "linear": lambda xs=xs: [
                torch.nn.functional.linear(xs[w.shape[1]], w, b) for w, b in zip(weights, biases)
            ],
            "pre_transposed": lambda xs=xs: [
                torch.addmm(b, xs[w.shape[1]], t) for w, t, b in zip(weights, transposed, biases)
            ],
        }
        if dnn_w is not None:
            xd = {k: v.to_mkldnn() for k, v in xs.items()}
            fns["onednn"] = lambda xd=xd: [
                torch._C._nn.mkldnn_linear(xd[w.shape[1]], dw, db) for w, dw, db in zip(weights, dnn_w, dnn_b)
            ]
        fns["numpy"] = lambda xn=xn: [xn[w.shape[1]] @ w.T for w in np_w]
        cell = _medians_ms(fns, repeats)
        by_rows[str(m)] = cell
    out["products_ms_by_rows"] = by_rows
    return out


def tower(model_name: str, repeats: int) -> dict:
    """embed_texts of a new prompt (no text cache): own tokens against the full padded pass."""
    from vidlab.clip import load_model

    model = load_model(model_name)
    model.embed_texts(["warm up"])
    n = iter(range(10**6))  # a new prompt every call: nothing from the text cache

    def ask(prefix: bool) -> None:
        model.text_prefix = prefix
        model.embed_texts([f"a red shape number {next(n)} {prefix}"])

    timed = _medians_ms({"own_tokens_ms": lambda: ask(True), "full_pass_ms": lambda: ask(False)}, repeats)
    model.text_prefix = True
    res: dict = dict(timed)
    res["positions"] = model.token_count("a red shape number 123 True")
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--width", type=int, default=512, help="text width (ViT-B-32: 512)")
    ap.add_argument("--layers", type=int, default=12, help="text layers (ViT-B-32: 12)")
    ap.add_argument("--rows", default="1,2,4,8,16,32", help="row counts (positions) to time")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--model", default="ViT-B-32", help="CLIP for the whole-tower figure (random weights)")
    ap.add_argument("--no-tower", action="store_true", help="skip the whole-tower figure")
    add_smoke_arg(ap)  # every part at its smallest: 2 layers, rows 1 and 8, vidlab-tiny
    ap.add_argument(
        "--quick", action="store_true", help="ViT-B-32's shapes at 1 and 8 rows, 5 repeats: seconds"
    )
    args = ap.parse_args(argv)
    if args.quick:
        args.rows, args.repeats = "1,8", 5
    if args.smoke:
        args.layers, args.rows, args.repeats, args.model = 2, "1,8", 2, "vidlab-tiny"
    rows = [int(r) for r in args.rows.split(",") if r.strip()]
    if not rows or min(rows) < 1:
        ap.error(f"--rows: positive integers separated by commas, got {args.rows!r}")

    import torch

    torch.set_num_threads(1)
    with torch.inference_mode():
        result = {
            "cpu": cpu_name(),
            "load_before": round(os.getloadavg()[0], 2),
            "torch": torch.__version__,
            "threads": 1,
            **products(args.width, args.layers, rows, args.repeats),
        }
    if not args.no_tower:
        result["tower"] = tower(args.model, args.repeats)
    result["load_after"] = round(os.getloadavg()[0], 2)
    floor = result["read_floor_ms"]
    for m, cell in result["products_ms_by_rows"].items():
        best = min(cell, key=cell.get)
        print(
            f"M={m:>3}: "
            + "  ".join(f"{k} {v:.1f}" for k, v in cell.items())
            + f"  (best {best}; read floor {floor:.1f} ms)"
        )
    emit_json(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
