"""The int8 first pass of ``ExactScorer``: a numba kernel that streams int8 codes at memory speed.

Why a module of its own: the dot product is written in LLVM IR (a numba intrinsic) with 16-lane vectors,
so that on AVX2 every 16 codes cost one ``vpmovsxbw`` and one ``vpmaddwd`` (16 int8 x int16 products
summed pairwise into int32 lanes) on 256-bit registers; numba's own vectoriser picks 128-bit lanes for
the same loop (measured 1.5x slower). Four accumulators keep a row's multiply-adds in four short dependency
chains (one chain was latency-bound: 1.35x the read floor against 1.16x with four, one run, scratch A/B in
docs/results/clip-search.md). ``kernel_instructions()`` counts those instructions in the compiled code, so a test can
check that the kernel really is the SIMD one on this machine.

Per row ``r`` the scan computes ``acc_r = sum_i codes[r, i] * qq[i]`` exactly in int32 (no overflow:
``D * 127 * levels < 2**31``, see ``query_levels``), then the score estimate ``approx = acc_r * scale_r * t``
and its proven error bound ``err = t/2 * l1_r + t/2 * scale_r * qsum`` (plus float slack), and keeps

* a k-element min-heap of lower bounds ``approx - err`` (its minimum: the k-th best lower bound so far);
* every row whose upper bound ``approx + err`` reaches the current heap minimum, as a candidate.

The heap minimum only grows, so every row whose upper bound reaches the *final* k-th lower bound was
kept; the caller filters the candidates by the final threshold and rescores them exactly. Only the
codes (``D`` bytes a row) and two float32 row constants (8 bytes a row) are read; nothing is written
per row except the few candidates.
"""

from __future__ import annotations

from typing import Any

import numpy as np

ROW_BYTES_EXTRA = 8  # scale + l1, float32 each, read per row beside the D code bytes
# Software prefetch distance (bytes ahead of the codes being multiplied). Measured in one run (1M x 512, 15
# queries, load 7): on-CPU time over the read floor 1.41 without, 1.24 with (bare dot products 1.08): the
# loop's arithmetic otherwise limits how many cache-line reads one core keeps in flight.
PREFETCH_AHEAD = 2048

_KERNELS: dict[str, Any] | None = None


def query_levels(dim: int) -> int:
    """Quantisation levels each side for an int16 query of dimension ``dim``, so int32 never overflows."""
    return int(min(32767, (2**31 - 1) // (127 * max(1, dim))))


def _dot_intrinsic() -> Any:
    """A numba intrinsic ``dot(codes_addr, q_addr, chunks) -> int32``: the int8 x int16 dot product of
    ``16 * chunks`` elements, written in LLVM IR with 16-lane vectors. With AVX2 each chunk is one
    ``vpmaddwd`` (``llvm.x86.avx2.pmadd.wd``: 16 int16 products summed pairwise into 8 int32 lanes) after
    one ``vpmovsxbw``; without it, portable ``<16 x i32>`` multiply-adds that LLVM lowers for the host.
    (numba's own loop vectoriser picks 128-bit lanes for this loop: half the throughput.)"""
    import llvmlite.binding as llvm
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic

    avx2 = bool(llvm.get_host_cpu_features().get("avx2", False))

    @intrinsic
    def dot_i8_i16(typingctx, caddr, qaddr, chunks):
        sig = types.int32(types.uintp, types.uintp, types.intp)

        def codegen(context, builder, signature, args):
            c, q, n = args
            i8, i16, i32 = ir.IntType(8), ir.IntType(16), ir.IntType(32)
            v16i8, v16i16 = ir.VectorType(i8, 16), ir.VectorType(i16, 16)
            acc_t = ir.VectorType(i32, 8 if avx2 else 16)
            cp = builder.inttoptr(c, v16i8.as_pointer())
            qp = builder.inttoptr(q, v16i16.as_pointer())
            if avx2:
                mod = builder.module
                name = "llvm.x86.avx2.pmadd.wd"
                fn = mod.globals.get(name) or ir.Function(mod, ir.FunctionType(acc_t, [v16i16, v16i16]), name)
            # four accumulators, so that a row's multiply-adds are four short dependency chains, not one long
            # one (a vpdpwssd waits for the previous one's result: one chain of 32 per 512-d row was latency-
            # bound); each group of four chunks is one 64-byte cache line and gets one software prefetch
            # PREFETCH_AHEAD bytes ahead (non-temporal: the codes are read once per query)
            accs = [cgutils.alloca_once_value(builder, ir.Constant(acc_t, None)) for _ in range(4)]
            i8p = ir.IntType(8).as_pointer()
            pf_name = "llvm.prefetch.p0"
            pf = builder.module.globals.get(pf_name) or ir.Function(
                builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]), pf_name
            )
            four = ir.Constant(n.type, 4)
            ahead_bytes = ir.Constant(n.type, PREFETCH_AHEAD)

            def madd(chunk, acc):
                cv = builder.load(builder.gep(cp, [chunk]), align=1)
                qv = builder.load(builder.gep(qp, [chunk]), align=2)
                if avx2:
                    m = builder.call(fn, [builder.sext(cv, v16i16), qv])
                else:
                    m = builder.mul(builder.sext(cv, acc_t), builder.sext(qv, acc_t))
                builder.store(builder.add(builder.load(acc), m), acc)

            groups = builder.sdiv(n, four)
            with cgutils.for_range(builder, groups) as loop:
                first = builder.mul(loop.index, four)
                at = builder.add(builder.mul(first, ir.Constant(n.type, 16)), ahead_bytes)
                ahead = builder.gep(builder.bitcast(cp, i8p), [at])
                builder.call(pf, [ahead, ir.Constant(i32, 0), ir.Constant(i32, 0), ir.Constant(i32, 1)])
                for j in range(4):
                    madd(builder.add(first, ir.Constant(n.type, j)), accs[j])
            done = builder.mul(groups, four)
            with cgutils.for_range(builder, builder.sub(n, done)) as loop:  # chunks beyond a multiple of 4
                madd(builder.add(done, loop.index), accs[0])
            acc = accs[0]
            builder.store(
                builder.add(
                    builder.add(builder.load(accs[0]), builder.load(accs[1])),
                    builder.add(builder.load(accs[2]), builder.load(accs[3])),
                ),
                acc,
            )
            v = builder.load(acc)
            total = builder.extract_element(v, ir.Constant(i32, 0))
            for lane in range(1, acc_t.count):
                total = builder.add(total, builder.extract_element(v, ir.Constant(i32, lane)))
            return total

        return sig, codegen

    return dot_i8_i16


def _build() -> dict[str, Any]:
    import heapq

    from numba import njit

    dot_i8_i16 = _dot_intrinsic()

    @njit(cache=True, boundscheck=False, nogil=True)
    def dot_rows(codes, qq, a, b, out):  # pragma: no cover - compiled
        """``out[r - a] = sum_i codes[r, i] * qq[i]`` (int32) for rows ``a <= r < b`` (C-contiguous)."""
        d = codes.shape[1]
        chunks = d // 16
        base = codes.ctypes.data
        qaddr = qq.ctypes.data
        for r in range(a, b):
            s = dot_i8_i16(base + r * d, qaddr, chunks)
            for i in range(16 * chunks, d):  # the tail of a dimension that is no multiple of 16
                s = np.int32(s + np.int32(np.int32(codes[r, i]) * np.int32(qq[i])))
            out[r - a] = s

    @njit(cache=True, boundscheck=False, nogil=True)
    def scan(codes, qq, scale, l1, t, qsum, k, cand_rows, cand_hi):  # pragma: no cover - compiled
        """One pass; returns ``(kth_lo, n_candidates)``; candidates (row, upper bound) in ``cand_*``.

        Each row's bound is checked right after its dot product, inside one loop: the software prefetch
        keeps the next rows' reads in flight while the few scalar operations of the bound run (a separate
        bound loop over a block of dot products left the memory idle meanwhile: 1.16 -> see docs/results/clip-search.md)."""
        n, d = codes.shape
        chunks = d // 16
        base = codes.ctypes.data
        qaddr = qq.ctypes.data
        heap = [-np.inf] * k
        thr = heap[0]  # the heap's minimum: the k-th best lower bound so far (only grows)
        half_t = 0.5 * t
        half_tq = 0.5 * t * qsum
        nc = 0
        for r in range(n):
            acc = dot_i8_i16(base + r * d, qaddr, chunks)
            for i in range(16 * chunks, d):  # the tail of a dimension that is no multiple of 16
                acc = np.int32(acc + np.int32(np.int32(codes[r, i]) * np.int32(qq[i])))
            s = np.float64(scale[r])
            approx = np.float64(acc) * s * t
            err = half_t * np.float64(l1[r]) + half_tq * s + 1e-6 + 1e-6 * abs(approx)
            hi = approx + err
            if hi >= thr:
                cand_rows[nc] = r
                cand_hi[nc] = hi
                nc += 1
                lo = approx - err
                if lo > thr:
                    heapq.heapreplace(heap, lo)
                    thr = heap[0]
        return thr, nc

    @njit(cache=True, boundscheck=False, nogil=True)
    def read_floor(codes, scale, l1):  # pragma: no cover - compiled
        """Touch every byte ``scan`` reads (codes as int64 words, the two row constants as int32 words),
        XOR-folded so that the loops vectorise (a float sum would be one serial add chain, ~1 ms per 1M rows
        of latency that would flatter the scan): the time of this is the memory-read floor of a scan."""
        v = codes.reshape(-1).view(np.int64)
        x = np.int64(0)
        for i in range(v.size):
            x ^= v[i]
        si, li = scale.view(np.int32), l1.view(np.int32)
        y = np.int32(0)
        for i in range(si.size):
            y ^= si[i] ^ li[i]
        return x, y

    return {"dot_rows": dot_rows, "scan": scan, "read_floor": read_floor}


def kernels() -> dict[str, Any] | None:
    """The compiled kernels (``dot_rows``, ``scan``, ``read_floor``), or None without numba."""
    global _KERNELS
    if _KERNELS is None:
        try:
            _KERNELS = _build()
        except ImportError:
            _KERNELS = {}
    return _KERNELS or None


def quantize_rows(emb: np.ndarray, chunk: int = 8192) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-row symmetric int8 codes: ``(codes [N, D] int8, scale [N] float32, l1 [N] float32)``.

    Guarantees, for the stored values ``x = emb[r]`` (fp16 or fp32, exact in float64):
    ``|x[i] - scale[r] * codes[r, i]| <= scale[r] / 2`` (the codes are rounded against the float32 scale
    itself) and ``l1[r] >= sum_i |x[i]|`` (rounded up to float32)."""
    n, d = emb.shape
    codes = np.empty((n, d), np.int8)
    scale = np.empty(n, np.float32)
    l1 = np.empty(n, np.float32)
    for a in range(0, n, chunk):
        x = emb[a : a + chunk].astype(np.float64)
        m = np.abs(x).max(axis=1)
        m[m == 0] = 1.0
        s = (m / 127.0).astype(np.float32)
        s[s == 0] = np.float32(np.finfo(np.float32).tiny)
        codes[a : a + len(x)] = np.clip(np.rint(x / s.astype(np.float64)[:, None]), -127, 127)
        scale[a : a + len(x)] = s
        sums = np.abs(x).sum(axis=1)
        up = sums.astype(np.float32)
        low = up.astype(np.float64) < sums
        up[low] = np.nextafter(up[low], np.float32(np.inf))
        l1[a : a + len(x)] = up
    return codes, scale, l1


def kernel_instructions() -> dict[str, int]:
    """Counts of the SIMD instructions in the compiled ``scan`` (the kernel a search runs; a check that it
    vectorised): ``vpmaddwd`` (packed int16 multiply-add; on a CPU with AVX-VNNI, LLVM fuses it with the
    accumulating add into ``vpdpwssd``), ``vpmovsxbw`` (int8 -> int16), ``vpmulld`` (packed int32 multiply) and
    ``vpmuludq``, and ``prefetch`` (software prefetch instructions)."""
    k = kernels()
    if k is None:
        return {}
    from numba import njit

    # a fresh, uncached compile of the same function: numba cannot show the assembly of cached code
    scan = njit(boundscheck=False, nogil=True)(k["scan"].py_func)
    z = np.zeros(4, np.float32)
    scan(
        np.zeros((4, 16), np.int8),
        np.zeros(16, np.int16),
        z,
        z,
        1.0,
        0.0,
        2,
        np.zeros(4, np.int64),
        np.zeros(4),
    )
    asm = "\n".join(scan.inspect_asm().values())
    prefetches = sum(1 for line in asm.splitlines() if line.strip().startswith("prefetch"))
    names = ("vpmaddwd", "vpdpwssd", "vpmovsxbw", "vpmulld", "vpmuludq")
    ops = [line.split() for line in asm.splitlines() if line.strip()]
    return {
        "prefetch": prefetches,
        **{
            f"{n} {w}": sum(1 for o in ops if o[0] == n and o[-1].startswith(f"%{w}"))
            for n in names
            for w in ("ymm", "xmm")
        },
    }
