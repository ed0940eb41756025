"""What this machine runs fast: the training precision (bf16 or fp32) and the CTranslate2 compute type for serving.

Every choice carries a one-sentence reason, for logs and model cards. The rules follow this project's measurements
(benchmarks/README.md): bfloat16 matrix multiplies are several times faster than float32 where the CPU has bfloat16
instructions (AMX, AVX-512 BF16) and 27x slower where it has not (emulated, on an AVX2-only CPU); CTranslate2's int8
was 2.1x faster than float32 at batch 1 and 1.4x at batch 32 on that AVX2-only CPU, within 0.5 BLEU.

    choice = choose_precision("auto", best_device())
    logger.info("%s (%s)", choice.reason, describe())
    Seq2SeqTrainingArguments(..., bf16=choice.precision == "bf16")
"""

import ctypes
import ctypes.util
import logging
import os
import platform
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

logger = logging.getLogger(__name__)

CPUINFO = "/proc/cpuinfo"
# (flag in /proc/cpuinfo, instruction set), in the order they are tried.
BF16_FLAGS = (("amx_bf16", "AMX"), ("avx512_bf16", "AVX-512 BF16"))
INT8_FLAGS = (("amx_int8", "AMX"), ("avx512_vnni", "AVX-512 VNNI"), ("avx_vnni", "AVX-VNNI"), ("avx2", "AVX2"))
# Why a CPU without those flags gets fp32 / float32.
NO_BF16 = "the CPU has no bfloat16 instructions (no avx512_bf16 or amx_bf16); bf16 would be emulated and slower"
NO_INT8 = "the CPU shows no AVX2, VNNI or AMX; int8 was measured faster only there"
NOTABLE_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16", "amx_int8")
# CTranslate2 compute types on CUDA, fastest first (int8_float16 led CTranslate2's T4 benchmark, within 0.2 BLEU).
CUDA_COMPUTE_TYPES = ("int8_float16", "float16", "int8_float32", "float32")
PRECISIONS = {"auto": "auto", "bf16": "bf16", "bfloat16": "bf16", "fp32": "fp32", "float32": "fp32"}


@dataclass(frozen=True)
class Choice:
    """A training precision, "bf16" or "fp32", and why, as one sentence starting with the precision."""

    precision: str
    reason: str


@dataclass(frozen=True)
class ComputeType:
    """A CTranslate2 compute type ("int8", "float32", "int8_float16", ...) and why, starting with the type."""

    compute_type: str
    reason: str


def cpuinfo_field(name: str, cpuinfo: str | os.PathLike | None = None) -> str:
    """The value of the first `name : value` line of /proc/cpuinfo (or `cpuinfo`; the first CPU's); "" where there
    is none. CPUINFO is read at each call, so that tests can point it at another machine's file."""
    try:
        with open(cpuinfo or CPUINFO, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                key, _, value = line.partition(":")
                if key.strip() == name:
                    return value.strip()
    except OSError:  # not Linux
        pass
    return ""


def cpu_flags(cpuinfo: str | os.PathLike | None = None) -> frozenset[str]:
    """The CPU's feature flags ("avx2", "avx512_bf16", "amx_bf16", ...); empty where /proc/cpuinfo has none."""
    return frozenset(cpuinfo_field("flags", cpuinfo).split())


def best_device() -> str:
    """The device to use: cuda where torch.cuda.is_available(), else mps where torch.backends.mps is, else cpu."""
    if torch.cuda.is_available():
        return "cuda"
    return "mps" if torch.backends.mps.is_available() else "cpu"


def check_device(device: str) -> str:
    """`device`, or a UsageError for a name torch does not know, or a GPU this machine does not have."""
    from .errors import UsageError

    try:
        kind = torch.device(device).type
    except (RuntimeError, ValueError):
        raise UsageError(f"{device!r} is not a device; pass cpu, cuda, cuda:1 or mps") from None
    available = {"cuda": torch.cuda.is_available(), "mps": torch.backends.mps.is_available()}.get(kind, kind == "cpu")
    if not available:
        raise UsageError(f"{device}: this machine has no {kind} device; pass cpu")
    return device


def free_memory(device: str) -> int:
    """Bytes free for new tensors on `device`: what CUDA reports free there, or the memory the kernel says is
    available to a new program (/proc/meminfo's MemAvailable; the free physical pages where there is none)."""
    target = torch.device(device)
    if target.type == "cuda":
        return torch.cuda.mem_get_info(target)[0]
    try:
        with open("/proc/meminfo", encoding="ascii") as lines:
            for line in lines:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def first_flag(table: tuple[tuple[str, str], ...], flags: frozenset[str]) -> tuple[str, str] | None:
    """The first (flag, instruction set) of `table` whose flag is in `flags`; None if there is none."""
    return next(((flag, name) for flag, name in table if flag in flags), None)


def bf16_support(device: str, flags: frozenset[str] | None = None) -> tuple[bool, str]:
    """Whether `device` runs bfloat16 matrix multiplies natively, faster than float32, and the evidence as a phrase.

    CPU: yes with AMX (amx_bf16) or AVX-512 BF16 (avx512_bf16) in `flags` (None: this CPU's). CUDA: yes where
    torch.cuda.is_bf16_supported(including_emulation=False), which looks at the current CUDA device. Others: no.
    """
    kind = torch.device(device).type
    if kind == "cpu":
        found = first_flag(BF16_FLAGS, cpu_flags() if flags is None else flags)
        if found:
            return True, f"the CPU has {found[1]} ({found[0]})"
        return False, NO_BF16
    if kind == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {device!r} but torch.cuda.is_available() is False; pass 'cpu' or best_device()")
        name = torch.cuda.get_device_name(torch.device(device))
        if torch.cuda.is_bf16_supported(including_emulation=False):
            return True, f"CUDA device {name} supports bfloat16"
        return False, f"CUDA device {name} has no native bfloat16 (compute capability below 8.0)"
    return False, f"{kind} is not known to run bfloat16 faster than float32"


def precision_name(requested: str) -> str:
    """The precision asked for, as "auto", "bf16" or "fp32"; "bfloat16" and "float32" are accepted spellings."""
    try:
        return PRECISIONS[requested.lower()]
    except KeyError:
        allowed = ", ".join(PRECISIONS)
        raise ValueError(f"precision {requested!r} is not one of {allowed}; pass 'auto' to pick") from None


def choose_precision(requested: str, device: str, flags: frozenset[str] | None = None) -> Choice:
    """The training precision for `device`, as asked or, for "auto", from the hardware (see bf16_support).

    "auto" gives bf16 where the device has native bfloat16, fp32 elsewhere. "bf16" and "fp32" are honoured; bf16
    asked for on hardware without native bfloat16 is logged as a warning, since it runs slower than fp32 there.
    """
    wanted = precision_name(requested)
    if wanted == "fp32":
        return Choice("fp32", "fp32: asked for")
    native, evidence = bf16_support(device, flags)
    if wanted == "auto":
        precision = "bf16" if native else "fp32"
        reason = f"{precision}: {evidence}"
    else:
        precision = "bf16"
        reason = f"bf16: asked for, and {evidence}" if native else f"bf16: asked for, but {evidence}"
    if precision == "bf16" and not native:
        logger.warning(reason)
    return Choice(precision, reason)


def ctranslate2_compute_type(device: str, flags: frozenset[str] | None = None) -> ComputeType:
    """The fastest CTranslate2 compute type within 0.5 BLEU of float32 on `device`.

    CPU: "int8" where `flags` (None: this CPU's) show AVX2 or better; AMX, AVX-512 VNNI and AVX-VNNI add int8
    dot-product instructions, and without them int8 still measured faster on AVX2. "float32" elsewhere (int8 was
    not measured there). CUDA: the first of CUDA_COMPUTE_TYPES that ctranslate2.get_supported_compute_types reports.
    """
    target = torch.device(device)
    if target.type == "cpu":
        found = first_flag(INT8_FLAGS, cpu_flags() if flags is None else flags)
        if found:
            return ComputeType("int8", f"int8: the CPU has {found[1]} ({found[0]})")
        return ComputeType("float32", f"float32: {NO_INT8}")
    if target.type == "cuda":
        import ctranslate2  # optional dependency (the serve extra)

        supported = ctranslate2.get_supported_compute_types("cuda", target.index or 0)
        compute_type = next((kind for kind in CUDA_COMPUTE_TYPES if kind in supported), "float32")
        where = f"cuda:{target.index or 0}"
        return ComputeType(compute_type, f"{compute_type}: the fastest type ctranslate2 supports on {where}")
    raise ValueError(f"CTranslate2 runs on 'cpu' or 'cuda', not {device!r}")


def describe(cpuinfo: str | os.PathLike | None = None) -> str:
    """One line for logs and model cards: CPU model, logical CPUs, torch threads, notable flags, CUDA device."""
    model = cpuinfo_field("model name", cpuinfo) or platform.processor() or "unknown CPU"
    flags = cpu_flags(cpuinfo)
    notable = " ".join(flag for flag in NOTABLE_FLAGS if flag in flags) or "none of AVX2, VNNI, BF16, AMX"
    cuda = f"CUDA: {torch.cuda.get_device_name()}" if torch.cuda.is_available() else "no CUDA"
    count = torch.get_num_threads()
    threads = f"{os.cpu_count()} logical CPUs, torch uses {count} thread{'s' if count != 1 else ''}"
    return f"{model}; {threads}; flags: {notable}; {cuda}"


# glibc's mallopt parameters (malloc.h) and the largest value it takes (an int).
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, INT_MAX = -1, -3, 2**31 - 1


def keep_freed_memory() -> bool:
    """Tell glibc's allocator to keep the memory a training step frees for the next step, instead of returning it
    to the system and faulting fresh pages in again (+6-8 % training speed measured on CPU, benchmarks/allocator.py):
    no buffer up to 2 GiB is mmap'ed, and the heap is never trimmed. Affects this process's later allocations;
    False where there is no glibc, or where the user set glibc's malloc tunables (GLIBC_TUNABLES) themselves."""
    if not sys.platform.startswith("linux") or "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", ""):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, INT_MAX)) and bool(mallopt(M_TRIM_THRESHOLD, INT_MAX))


# gperftools' tcmalloc, its light build first: the libraries `ldconfig` names, e.g. libtcmalloc_minimal.so.4.
TCMALLOC_LIBRARIES = ("tcmalloc_minimal", "tcmalloc")
PROCESS_MAPS = "/proc/self/maps"
# Allocators a process can be started with (LD_PRELOAD), by the name their library's file starts with.
PRELOADED_ALLOCATORS = ("tcmalloc", "jemalloc", "mimalloc")
INSTALL_TCMALLOC = "install gperftools' tcmalloc (Debian, Ubuntu: apt-get install libtcmalloc-minimal4)"


def tcmalloc_library() -> str | None:
    """The installed tcmalloc library's name, for LD_PRELOAD (e.g. libtcmalloc_minimal.so.4), or None."""
    return next(filter(None, map(ctypes.util.find_library, TCMALLOC_LIBRARIES)), None)


def memory_allocator() -> str:
    """The allocator behind this process's malloc: "tcmalloc", "jemalloc" or "mimalloc" where the process was
    started with it (LD_PRELOAD, or linked in), "glibc" on other Linux processes, "the system's" elsewhere (no
    PROCESS_MAPS: the libraries mapped into this process)."""
    try:
        with open(PROCESS_MAPS, encoding="utf-8", errors="replace") as lines:
            files = {Path(line.split()[-1]).name for line in lines if "/" in line}
    except OSError:
        return "the system's"
    loaded = (name for name in PRELOADED_ALLOCATORS if any(file.startswith(f"lib{name}") for file in files))
    return next(loaded, "glibc")


def allocator_advice(precision: str, native: bool, device: str, allocator: str, library: str | None) -> str | None:
    """What to do where bfloat16 training on a CPU with bfloat16 instructions (`native`) runs on glibc's allocator,
    None elsewhere. Batches by tokens bring new shapes, and oneDNN keeps the bfloat16 kernels made for each, with
    their memory, among the steps' own buffers: glibc's heap fragments, and a bf16 step slows as the run goes (a
    fifth by a few hundred steps on the AMX CPU; float32 makes no such kernels). tcmalloc keeps the step as fast as
    at the start (benchmarks/README.md)."""
    if precision != "bf16" or not native or device != "cpu" or allocator != "glibc":
        return None
    start = f"run with LD_PRELOAD={library}" if library else f"{INSTALL_TCMALLOC} and run with LD_PRELOAD set to it"
    return (
        f"bf16 on this CPU trains about a fifth slower with glibc's allocator than with tcmalloc: {start} "
        "(make train-* and make demo do where it is installed)"
    )


ONEDNN_CACHE = "ONEDNN_PRIMITIVE_CACHE_CAPACITY"


def keep_compiled_kernels(capacity: int = 65536) -> bool:
    """Let oneDNN keep `capacity` compiled kernels instead of its default 1,024. On a CPU with bfloat16
    instructions torch's bfloat16 matrix multiplies are oneDNN kernels, compiled for each shape the first time it
    is seen (1-3 ms each); batches by tokens bring thousands of shapes an epoch, so with the default cache the
    kernels were compiled again at nearly every step: a bf16 training step took 250 ms instead of 200 on this
    project's AMX CPU (benchmarks/README.md). The variable is read when oneDNN makes its first kernel: call this
    before any. False where the user set it."""
    if ONEDNN_CACHE in os.environ:
        return False
    os.environ[ONEDNN_CACHE] = str(capacity)
    return True


def flush_denormals() -> bool:
    """Make the CPU treat denormal floats (below 1.2e-38) as zero (x86's FTZ and DAZ), in this thread and the
    threads it starts later: call it before the first parallel torch operation, so that the intra-op threads
    inherit it. A training run's optimizer state and gradients fill with denormals as it goes, and arithmetic on
    them is many times slower: late in a run, steps took 25-35 % longer without it (benchmarks/README.md). Values
    that small are below any that matter to training; False where the CPU cannot."""
    return torch.set_flush_denormal(True)
