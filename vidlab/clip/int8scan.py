"""The int8 first pass of ``ExactScorer``: a numba kernel that streams int8 codes at memory speed.

Why a module of its own: the dot product is written in LLVM IR (``emit_dot``, a numba intrinsic) for the
widest vectors the CPU numba compiles for has (``supported_paths``): on AVX-512BW (``zmm``) every 32 codes cost
one ``vpmovsxbw`` and one ``vpmaddwd`` (int8 x int16 products summed pairwise into int32 lanes) on 512-bit
registers, on AVX2 (``ymm``) every 16 codes on 256-bit ones; with VNNI (AVX512-VNNI, AVX-VNNI) LLVM fuses the
multiply-add and its accumulation into ``vpdpwssd``. Elsewhere (``portable``) ``<16 x i32>`` multiply-adds
that LLVM lowers for the target (SSE2 ``pmaddwd``, NEON ``smlal``). numba's own vectoriser picks 128-bit lanes
for the same loop (measured 1.5x slower). Four accumulators keep a row's multiply-adds in four short dependency
chains (one chain was latency-bound: 1.35x the read floor against 1.16x with four, one run, scratch A/B in
docs/results/clip-search.md). The paths give bit-identical integer dot products, so identical results.
``kernel_instructions()`` counts the instructions in the compiled scan, so a test can check that the kernel
really is the SIMD one on this machine; ``compile_dot`` compiles the dot product for any LLVM target (a test
checks each target's forms on any host).

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

import re
from collections import Counter
from typing import Any

import numpy as np

ROW_BYTES_EXTRA = 8  # scale + l1, float32 each, read per row beside the D code bytes
# Software prefetch distance (bytes ahead of the codes being multiplied). Measured in one run (1M x 512, 15
# queries, load 7): on-CPU time over the read floor 1.41 without, 1.24 with (bare dot products 1.08): the
# loop's arithmetic otherwise limits how many cache-line reads one core keeps in flight.
PREFETCH_AHEAD = 2048

_X86_VREG = re.compile(r"%([xyz]mm)\d+")
_NEON_DEST = re.compile(r"v\d+\.\d*[bhsd]\b")
_KERNELS: dict[str | None, dict[str, Any]] = {}


def query_levels(dim: int) -> int:
    """Quantisation levels each side for an int16 query of dimension ``dim``, so int32 never overflows."""
    return int(min(32767, (2**31 - 1) // (127 * max(1, dim))))


# ---- the SIMD dot product, written once in LLVM IR for every target ----------------------------------------
SIMD_PATHS = ("zmm", "ymm", "portable")
_LANES = {"zmm": 32, "ymm": 16, "portable": 16}  # int8 codes per chunk (one multiply-add instruction on x86)
_CACHE_LINE = 64


def target_features(features: str) -> frozenset[str]:
    """The enabled features of an LLVM feature string (``"+avx2,-avx512f,..."``; plain names separated by
    commas or spaces count as enabled)."""
    return frozenset(
        f[1:] if f[0] == "+" else f for f in features.replace(" ", ",").split(",") if f and f[0] != "-"
    )


def supported_paths(features: frozenset[str] | str, arch: str = "x86_64") -> tuple[str, ...]:
    """The SIMD paths a target can run, widest first: ``zmm`` (AVX-512BW: 32 codes per ``vpmaddwd``, fused
    into ``vpdpwssd`` with AVX512-VNNI), ``ymm`` (AVX2: 16 codes per ``vpmaddwd``, or ``vpdpwssd`` with
    AVX512-VNNI/AVX-VNNI) and ``portable`` (``<16 x i32>`` multiply-adds that LLVM lowers for any target:
    SSE2 ``pmaddwd`` on a plain x86-64, NEON ``smlal`` on aarch64)."""
    f = target_features(features) if isinstance(features, str) else features
    if not arch.startswith("x86"):
        return ("portable",)
    paths = ["portable"]
    if "avx2" in f:
        paths.insert(0, "ymm")
        if "avx512bw" in f:
            paths.insert(0, "zmm")
    return tuple(paths)


def preferred_path(features: frozenset[str] | str, arch: str = "x86_64") -> str:
    """The path the scan uses on a target: the widest it supports."""
    return supported_paths(features, arch)[0]


def _alloca_entry(builder: Any, value: Any) -> Any:
    """A stack slot in the function's entry block (where LLVM promotes it to a register), set to ``value``."""
    with builder.goto_entry_block():
        slot = builder.alloca(value.type)
    builder.store(value, slot)
    return slot


def _for_range(builder: Any, count: Any, body: Any) -> None:
    """``for i in range(count): body(i)`` in IR (``count``: a signed integer value)."""
    fn = builder.function
    pre = builder.block
    head, loop = fn.append_basic_block("for.head"), fn.append_basic_block("for.body")
    done = fn.append_basic_block("for.end")
    builder.branch(head)
    builder.position_at_end(head)
    i = builder.phi(count.type)
    i.add_incoming(count.type(0), pre)
    builder.cbranch(builder.icmp_signed("<", i, count), loop, done)
    builder.position_at_end(loop)
    body(i)
    i.add_incoming(builder.add(i, count.type(1)), builder.block)
    builder.branch(head)
    builder.position_at_end(done)


def emit_dot(builder: Any, caddr: Any, qaddr: Any, chunks: Any, path: str) -> Any:
    """Emit ``sum_i codes[i] * q[i]`` (int32) of ``16 * chunks`` int8 codes at address ``caddr`` and int16
    query values at ``qaddr`` (both i64 values); returns the i32 value.

    Four accumulators, so that the multiply-adds are four short dependency chains, not one long one (a
    ``vpdpwssd`` waits for the previous one's result: one chain of 32 per 512-d row was latency-bound); each
    group of four chunks gets one software prefetch per 64-byte line ``PREFETCH_AHEAD`` bytes ahead
    (non-temporal: the codes are read once per query). On the ``zmm`` path a 16-code chunk left over (an odd
    ``chunks``) takes the ``ymm`` form."""
    from llvmlite import ir

    if path not in SIMD_PATHS:
        raise ValueError(f"unknown SIMD path {path!r}; choose from {SIMD_PATHS}")
    mod = builder.module
    i8, i16, i32 = ir.IntType(8), ir.IntType(16), ir.IntType(32)
    lanes = _LANES[path]
    vcode, vq = ir.VectorType(i8, lanes), ir.VectorType(i16, lanes)

    def declare(name: str, ret: Any, args: list) -> Any:
        return mod.globals.get(name) or ir.Function(mod, ir.FunctionType(ret, args), name)

    def madd_fn(n: int) -> tuple[Any, Any]:  # (intrinsic, accumulator type) of an n-lane int16 multiply-add
        acc = ir.VectorType(i32, n // 2)
        v = ir.VectorType(i16, n)
        name = "llvm.x86.avx512.pmaddw.d.512" if n == 32 else "llvm.x86.avx2.pmadd.wd"
        return declare(name, acc, [v, v]), acc

    if path == "portable":
        acc_t, fn = ir.VectorType(i32, lanes), None
    else:
        fn, acc_t = madd_fn(lanes)
    i8p = i8.as_pointer()
    pf = declare("llvm.prefetch.p0", ir.VoidType(), [i8p, i32, i32, i32])
    n_t = chunks.type
    cp = builder.inttoptr(caddr, vcode.as_pointer())
    qp = builder.inttoptr(qaddr, vq.as_pointer())
    accs = [_alloca_entry(builder, ir.Constant(acc_t, None)) for _ in range(4)]

    def madd(chunk: Any, acc: Any) -> None:
        cv = builder.load(builder.gep(cp, [chunk]), align=1)
        qv = builder.load(builder.gep(qp, [chunk]), align=2)
        if fn is None:
            m = builder.mul(builder.sext(cv, acc_t), builder.sext(qv, acc_t))
        else:
            m = builder.call(fn, [builder.sext(cv, vq), qv])
        builder.store(builder.add(builder.load(acc), m), acc)

    main = builder.sdiv(chunks, n_t(lanes // 16))  # chunks of this path's width
    groups = builder.sdiv(main, n_t(4))

    def group(g: Any) -> None:
        first = builder.mul(g, n_t(4))
        base = builder.add(builder.mul(first, n_t(lanes)), n_t(PREFETCH_AHEAD))
        for line in range(4 * lanes // _CACHE_LINE):
            at = builder.gep(builder.bitcast(cp, i8p), [builder.add(base, n_t(line * _CACHE_LINE))])
            builder.call(pf, [at, i32(0), i32(0), i32(1)])
        for j in range(4):
            madd(builder.add(first, n_t(j)), accs[j])

    _for_range(builder, groups, group)
    done = builder.mul(groups, n_t(4))
    _for_range(builder, builder.sub(main, done), lambda i: madd(builder.add(done, i), accs[0]))
    v = builder.add(
        builder.add(builder.load(accs[0]), builder.load(accs[1])),
        builder.add(builder.load(accs[2]), builder.load(accs[3])),
    )
    total = builder.extract_element(v, i32(0))
    for lane in range(1, acc_t.count):
        total = builder.add(total, builder.extract_element(v, i32(lane)))
    if lanes > 16:  # the 16-code chunk beyond the last full one, on 256-bit registers
        fn16, acc16_t = madd_fn(16)
        rest = _alloca_entry(builder, ir.Constant(acc16_t, None))
        tail = builder.mul(main, n_t(lanes // 16))
        c16 = builder.inttoptr(caddr, ir.VectorType(i8, 16).as_pointer())
        q16 = builder.inttoptr(qaddr, ir.VectorType(i16, 16).as_pointer())

        def chunk16(i: Any) -> None:
            at = builder.add(tail, i)
            cv = builder.load(builder.gep(c16, [at]), align=1)
            qv = builder.load(builder.gep(q16, [at]), align=2)
            m = builder.call(fn16, [builder.sext(cv, ir.VectorType(i16, 16)), qv])
            builder.store(builder.add(builder.load(rest), m), rest)

        _for_range(builder, builder.sub(chunks, tail), chunk16)
        r = builder.load(rest)
        for lane in range(acc16_t.count):
            total = builder.add(total, builder.extract_element(r, i32(lane)))
    return total


def dot_module(path: str, triple: str = "") -> Any:
    """An LLVM IR module (llvmlite ``ir.Module``) with one function ``vidlab_dot_i8_i16(i64 codes_addr, i64
    q_addr, i64 chunks) -> i32``: the scan's dot product on ``path``, to compile for any target (see
    ``compile_dot``)."""
    from llvmlite import ir

    mod = ir.Module(name="vidlab_int8scan")
    if triple:
        mod.triple = triple
    i64 = ir.IntType(64)
    fn = ir.Function(mod, ir.FunctionType(ir.IntType(32), [i64, i64, i64]), "vidlab_dot_i8_i16")
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    caddr, qaddr, chunks = fn.args
    builder.ret(emit_dot(builder, caddr, qaddr, chunks, path))
    return mod


def compile_dot(path: str, cpu: str, triple: str = "x86_64-unknown-linux-gnu", features: str = "") -> str:
    """The assembly (AT&T syntax on x86) of ``dot_module(path)`` compiled at -O3 for an LLVM target: a
    triple, a CPU name (``"x86-64"``, ``"haswell"``, ``"znver4"``, ``"generic"`` ...) and extra features.
    ValueError where the installed LLVM does not know ``cpu`` (it would fall back to a CPU without the
    features and may abort the process) or cannot target ``triple``."""
    import llvmlite.binding as llvm

    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    try:
        target = llvm.Target.from_triple(triple)
    except RuntimeError as e:
        raise ValueError(f"this LLVM {_llvm_version()} cannot target {triple}: {e}") from None
    warning = _stderr_of(lambda: target.create_target_machine(cpu=cpu, features=features, opt=3))
    if "not a recognized processor" in warning:
        raise ValueError(f"this LLVM {_llvm_version()} does not know the CPU {cpu!r} for {triple}")
    tm = target.create_target_machine(cpu=cpu, features=features, opt=3)
    mod = llvm.parse_assembly(str(dot_module(path, triple)))
    mod.data_layout = str(tm.target_data)
    mod.verify()
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3))
    pb.getModulePassManager().run(mod, pb)
    return tm.emit_assembly(mod)


def _llvm_version() -> str:
    import llvmlite.binding as llvm

    return ".".join(map(str, llvm.llvm_version_info))


def _stderr_of(fn: Any) -> str:
    """What ``fn()`` writes to file descriptor 2 (LLVM warns there, not through Python)."""
    import os
    import sys
    import tempfile

    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            fn()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        return tmp.read().decode(errors="replace")


def _numba_target() -> tuple[str, frozenset[str]]:
    """The architecture and features numba compiles for (``NUMBA_CPU_NAME``/``NUMBA_CPU_FEATURES`` or the
    host's): the kernel must not use an instruction its target lacks (LLVM aborts the process)."""
    import llvmlite.binding as llvm
    from numba.core import config

    arch = llvm.get_process_triple().split("-")[0]
    features = getattr(config, "CPU_FEATURES", None)  # set by numba's config from NUMBA_CPU_FEATURES
    if features is not None:
        return arch, target_features(features)
    host = llvm.get_host_cpu_features()
    return arch, frozenset(k for k, v in host.items() if v)


SIMD_FEATURES = (
    "sse4.2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512vnni", "avxvnni",
    "avxvnniint8", "avxvnniint16", "avx512bf16", "avx10.1", "avx10.2", "neon", "dotprod", "sve", "sve2",
)  # fmt: skip


def target_description() -> dict[str, Any]:
    """What the scan is compiled for here: architecture, numba's LLVM CPU name, the SIMD features of
    ``SIMD_FEATURES`` it has, the SIMD paths it supports and the one the scan uses (``None`` without numba)."""
    import llvmlite.binding as llvm

    try:
        from numba.core import config

        cpu = getattr(config, "CPU_NAME", None) or llvm.get_host_cpu_name()
        arch, feats = _numba_target()
    except ImportError:
        cpu, arch = llvm.get_host_cpu_name(), llvm.get_process_triple().split("-")[0]
        feats = frozenset(k for k, v in llvm.get_host_cpu_features().items() if v)
    k = kernels()
    return {
        "arch": arch,
        "llvm_cpu": cpu,
        "simd_features": [f for f in SIMD_FEATURES if f in feats],
        "simd_paths": list(supported_paths(feats, arch)),
        "simd_path": k["simd_path"] if k else None,
    }


def _dot_intrinsic(path: str | None = None) -> Any:
    """A numba intrinsic ``dot(codes_addr, q_addr, chunks) -> int32``: ``emit_dot`` on ``path`` (default:
    the preferred path of numba's target; see ``supported_paths``)."""
    from numba import types
    from numba.extending import intrinsic

    arch, feats = _numba_target()
    ok = supported_paths(feats, arch)
    if path is None:
        path = ok[0]
    elif path not in SIMD_PATHS:
        raise ValueError(f"unknown SIMD path {path!r}; choose from {SIMD_PATHS}")
    elif path not in ok:
        raise ValueError(f"SIMD path {path!r} needs CPU features this target lacks; it supports {ok}")

    @intrinsic
    def dot_i8_i16(typingctx, caddr, qaddr, chunks):
        sig = types.int32(types.uintp, types.uintp, types.intp)

        def codegen(context, builder, signature, args):
            return emit_dot(builder, *args, path)

        return sig, codegen

    # A fixed identity per path. numba keys its on-disk cache (cache=True) by the pickled closure of each
    # kernel, which holds this intrinsic, and an intrinsic pickles a random id by default: every process then
    # missed the cache, compiled again and added one more entry to it.
    set_uuid = getattr(dot_i8_i16, "_set_uuid", None)
    if set_uuid is not None:
        set_uuid(f"vidlab.clip.int8scan.dot_i8_i16.{path}")
    dot_i8_i16.simd_path = path  # type: ignore[attr-defined]
    return dot_i8_i16


def _build(path: str | None = None) -> dict[str, Any]:
    import heapq

    from numba import njit

    dot_i8_i16 = _dot_intrinsic(path)

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

    return {"dot_rows": dot_rows, "scan": scan, "read_floor": read_floor, "simd_path": dot_i8_i16.simd_path}


def kernels(path: str | None = None) -> dict[str, Any] | None:
    """The compiled kernels (``dot_rows``, ``scan``, ``read_floor``; ``simd_path``: the path they use), or
    None without numba. ``path`` forces a SIMD path (one of ``supported_paths`` of this CPU; a ValueError
    otherwise); by default the preferred one."""
    if path not in _KERNELS:
        try:
            _KERNELS[path] = _build(path)
        except ImportError:
            _KERNELS[path] = {}
    return _KERNELS[path] or None


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


_MNEMONICS = ("vpmaddwd", "vpdpwssd", "vpmovsxbw", "vpmulld", "vpmuludq")


def count_instructions(asm: str) -> dict[str, int]:
    """Counts of the vector instructions in an assembly listing, keyed ``"<mnemonic> <width>"`` by the
    destination register: ``zmm``/``ymm``/``xmm`` on x86 (AT&T syntax: the last register; an encoding
    prefix such as ``{vex}``, which LLVM prints before AVX-VNNI forms, is skipped), ``neon`` for aarch64
    vector registers; and ``"prefetch"``: software prefetches (x86 ``prefetch*``, aarch64 ``prfm``)."""
    counts: Counter[str] = Counter()
    for raw in asm.splitlines():
        line = raw.split("//")[0].split("# ")[0].strip()
        if not line or line.endswith(":") or line.startswith("."):
            continue
        tokens = line.split(None, 1)
        while tokens and tokens[0].startswith("{"):  # {vex}, {evex}: encoding prefixes
            tokens = tokens[1].split(None, 1) if len(tokens) > 1 else []
        if not tokens:
            continue
        op, operands = tokens[0], tokens[1] if len(tokens) > 1 else ""
        if op.startswith("prefetch") or op == "prfm":
            counts["prefetch"] += 1
            continue
        x86 = _X86_VREG.findall(operands)
        if x86:
            counts[f"{op} {x86[-1]}"] += 1
        elif _NEON_DEST.match(operands):
            counts[f"{op} neon"] += 1
    return dict(counts)


def kernel_instructions(path: str | None = None) -> dict[str, int]:
    """``count_instructions`` of the compiled ``scan`` (the kernel a search runs, on SIMD ``path``, default
    the preferred one; a check that it vectorised as meant), with a 0 for each absent ``"<m> <w>"`` of
    ``vpmaddwd`` (packed int16 multiply-add; with AVX512-VNNI or AVX-VNNI LLVM fuses it with the accumulating
    add into ``vpdpwssd``), ``vpdpwssd``, ``vpmovsxbw`` (int8 -> int16), ``vpmulld``/``vpmuludq`` (int32
    multiplies) for w in zmm, ymm, xmm; and ``prefetch``."""
    k = kernels(path)
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
    counts = count_instructions("\n".join(scan.inspect_asm().values()))
    base = {"prefetch": 0, **{f"{n} {w}": 0 for n in _MNEMONICS for w in ("zmm", "ymm", "xmm")}}
    return {**base, **counts}
