"""The int8 scan's dot product compiled for many LLVM targets: each gets the SIMD forms it should.

Nothing here runs the compiled code, so every target is checked on any host (an AVX2-only, an AVX-512 or a plain
x86-64 CPU, or an aarch64 one); a CPU the installed LLVM does not know is skipped, saying so. The kernel the host
actually runs is checked in test_clip_scorers.py (test_kernel_runs_at_the_hosts_vector_width).
"""

import os
import subprocess
import sys

import pytest

pytest.importorskip("llvmlite")

from vidlab.clip.int8scan import (  # noqa: E402
    compile_dot,
    count_instructions,
    preferred_path,
    supported_paths,
)

X86 = "x86_64-unknown-linux-gnu"
ARM = "aarch64-unknown-linux-gnu"

# (LLVM CPU, triple, SIMD path, instruction forms that must appear, forms that must not)
# "vpmaddwd|vpdpwssd zmm": at least one of the two (LLVM fuses the multiply-add and its accumulation into
# vpdpwssd where the CPU has AVX512-VNNI, or AVX-VNNI for ymm, which it prints as "{vex} vpdpwssd").
TARGETS = [
    ("x86-64", X86, "portable", ["pmaddwd xmm"], ["ymm", "zmm"]),
    ("x86-64-v3", X86, "ymm", ["vpmaddwd ymm", "vpmovsxbw ymm"], ["zmm", "vpdpwssd", "vpmulld"]),
    ("haswell", X86, "ymm", ["vpmaddwd ymm", "vpmovsxbw ymm"], ["zmm", "vpdpwssd", "vpmulld"]),
    ("alderlake", X86, "ymm", ["vpdpwssd ymm", "vpmovsxbw ymm"], ["zmm", "vpmulld"]),  # AVX-VNNI
    ("skylake-avx512", X86, "zmm", ["vpmaddwd zmm", "vpmovsxbw zmm"], ["vpdpwssd", "vpmulld"]),
    ("skylake-avx512", X86, "ymm", ["vpmaddwd ymm", "vpmovsxbw ymm"], ["zmm", "vpdpwssd", "vpmulld"]),
    ("x86-64-v4", X86, "zmm", ["vpmaddwd zmm", "vpmovsxbw zmm"], ["vpdpwssd", "vpmulld"]),
    ("cascadelake", X86, "zmm", ["vpdpwssd zmm", "vpmovsxbw zmm"], ["vpmulld"]),  # AVX512-VNNI
    ("sapphirerapids", X86, "zmm", ["vpdpwssd zmm", "vpmovsxbw zmm"], ["vpmulld"]),
    ("znver4", X86, "zmm", ["vpdpwssd zmm", "vpmovsxbw zmm"], ["vpmulld"]),
    ("znver4", X86, "ymm", ["vpdpwssd ymm", "vpmovsxbw ymm"], ["zmm", "vpmulld"]),
    ("znver5", X86, "zmm", ["vpdpwssd zmm", "vpmovsxbw zmm"], ["vpmulld"]),
    ("znver5", X86, "ymm", ["vpdpwssd ymm", "vpmovsxbw ymm"], ["zmm", "vpmulld"]),  # "{vex} vpdpwssd"
    # aarch64: NEON widening multiply-accumulates (int16 x int16 -> int32). sdot (int8 x int8) does not apply:
    # the query is int16 so that its rounding error stays 1/33000 of its largest value, not 1/127.
    ("generic", ARM, "portable", ["smlal neon", "smlal2 neon", "sshll neon"], ["mul neon"]),
    ("neoverse-v1", ARM, "portable", ["smlal neon", "smlal2 neon"], ["mul neon"]),
    ("apple-m1", ARM, "portable", ["smlal neon", "smlal2 neon"], ["mul neon"]),
]


def _compile(path, cpu, triple):
    try:
        return compile_dot(path, cpu, triple)
    except ValueError as e:  # a CPU or an architecture this LLVM does not know
        pytest.skip(str(e))


@pytest.mark.parametrize(
    ("cpu", "triple", "path", "need", "forbid"),
    TARGETS,
    ids=[f"{t[0]}-{t[2]}" for t in TARGETS],
)
def test_each_target_gets_its_simd_forms(cpu, triple, path, need, forbid):
    ins = count_instructions(_compile(path, cpu, triple))
    for form in need:
        assert ins.get(form, 0) >= 1, f"{cpu} ({path}): no {form} in {sorted(ins)}"
    for bad in forbid:
        found = {k: v for k, v in ins.items() if k == bad or bad in k.split()}  # a form, mnemonic or width
        assert not found, f"{cpu} ({path}): {found}"
    assert ins.get("prefetch", 0) >= 1  # the codes are prefetched ahead of the multiply-adds
    if triple == X86:  # never a 128-bit multiply-add on a wide path (numba's own vectoriser picked xmm)
        assert path == "portable" or ins.get("vpmaddwd xmm", 0) + ins.get("vpdpwssd xmm", 0) == 0


def test_the_zmm_path_takes_32_codes_per_instruction():
    """Per 16-code chunk, the zmm path issues half the multiply-adds of the ymm path (same target)."""
    zmm = count_instructions(_compile("zmm", "skylake-avx512", X86))
    ymm = count_instructions(_compile("ymm", "skylake-avx512", X86))
    assert zmm["vpmaddwd zmm"] >= 4 and ymm["vpmaddwd ymm"] >= 4  # the four accumulators' group, at least


def test_supported_paths_follow_the_features():
    assert supported_paths("+avx2,+avx512f,+avx512bw,+avx512vl,+avx512vnni") == ("zmm", "ymm", "portable")
    assert supported_paths("+avx2,-avx512f,-avx512bw,+avxvnni") == ("ymm", "portable")
    assert supported_paths("+avx512f,-avx512bw,+avx2") == ("ymm", "portable")  # Knights Landing: no BW
    assert supported_paths("+sse4.2,-avx2") == ("portable",)
    assert supported_paths("+neon,+dotprod", arch="aarch64") == ("portable",)
    assert preferred_path("+avx2") == "ymm"
    assert preferred_path("") == "portable"


def test_instruction_counting_reads_encoding_prefixes_and_both_syntaxes():
    """The bug that failed the host check on a Zen 5: LLVM prints AVX-VNNI's form as "{vex} vpdpwssd", and the
    count took "{vex}" for the mnemonic (0 vpdpwssd, 0 vpmaddwd)."""
    asm = """
    .LBB0_3:                                # %for.body
    \t{vex}\tvpdpwssd\t32(%rsi,%r9,2), %ymm5, %ymm3
    \tvpdpwssd\t(%rsi), %zmm4, %zmm1       # comment %xmm9
    \tvpmovsxbw\t(%rdi), %ymm4
    \tprefetchnta\t2048(%rdi)
    \tpmaddwd\t%xmm1, %xmm0
    \tsmlal2\tv0.4s, v1.8h, v2.8h            // comment
    \tsshll\tv3.8h, v4.8b, #0
    \tprfm\tpstl1strm, [x0, #2048]
    \tadd\tx0, x0, #1
    """
    assert count_instructions(asm) == {
        "vpdpwssd ymm": 1,
        "vpdpwssd zmm": 1,
        "vpmovsxbw ymm": 1,
        "pmaddwd xmm": 1,
        "smlal2 neon": 1,
        "sshll neon": 1,
        "prefetch": 2,
    }


def test_a_generic_numba_target_gets_the_portable_kernel(tmp_path):
    """NUMBA_CPU_NAME=generic (numba's setting for caches shared across machines) compiles for a CPU without
    AVX2 even on an AVX2 host: the kernel must follow numba's target, not the host (the AVX2 intrinsic made
    LLVM abort the process there). Run in a child process: an LLVM abort would take pytest down with it."""
    pytest.importorskip("numba")
    code = (
        "import numpy as np\n"
        "from vidlab.clip.int8scan import kernels\n"
        "k = kernels()\n"
        "c = np.arange(-60, 60, dtype=np.int8).reshape(3, 40)\n"
        "q = np.arange(40, dtype=np.int16) * 300\n"
        "out = np.zeros(3, np.int32)\n"
        "k['dot_rows'](c, q, 0, 3, out)\n"
        "assert (out == c.astype(np.int64) @ q.astype(np.int64)).all()\n"
        "print(k['simd_path'])\n"
    )
    env = {**os.environ, "NUMBA_CPU_NAME": "generic", "NUMBA_CACHE_DIR": str(tmp_path)}
    env.pop("NUMBA_CPU_FEATURES", None)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "portable"


def test_a_second_process_loads_the_compiled_kernels_from_numba_s_cache(tmp_path):
    """cache=True works: the kernels' cache key holds the dot-product intrinsic, which must pickle the same in
    every process (with numba's random default id each process compiled again and added an entry)."""
    pytest.importorskip("numba")
    code = (
        "import numpy as np\n"
        "from vidlab.clip.int8scan import kernels\n"
        "k = kernels()\n"
        "out = np.zeros(2, np.int32)\n"
        "k['dot_rows'](np.ones((2, 32), np.int8), np.ones(32, np.int16), 0, 2, out)\n"
        "assert out.tolist() == [32, 32]\n"
        "print(sum(k['dot_rows'].stats.cache_hits.values()))\n"
    )
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    hits = []
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        hits.append(int(r.stdout.strip()))
    assert hits == [0, 1]
    assert len(list(tmp_path.rglob("*dot_rows*.nbc"))) == 1
