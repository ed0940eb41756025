"""What this machine runs fast: the training precision (bf16 or fp32) and the CTranslate2 compute type for serving,
and the CPU settings a training run takes.

Every choice carries a one-sentence reason, for logs and model cards. The rules follow this project's measurements
(benchmarks/README.md): bfloat16 matrix multiplies are several times faster than float32 where the CPU has bfloat16
instructions (AMX, AVX-512 BF16) and many times slower where it has not (emulated); CTranslate2's int8 is faster
than float32 on x86 CPUs from AVX2 on, within half a BLEU point.

    choice = choose_precision("auto", best_device())
    logger.info("%s (%s)", choice.reason, describe())
    Seq2SeqTrainingArguments(..., bf16=choice.precision == "bf16")
"""

import logging
import os
import platform
from dataclasses import dataclass

logger = logging.getLogger(__name__)

CPUINFO = "/proc/cpuinfo"
# (flag in /proc/cpuinfo, instruction set), in the order they are tried.
BF16_FLAGS = (("amx_bf16", "AMX"), ("avx512_bf16", "AVX-512 BF16"))
INT8_FLAGS = (("amx_int8", "AMX"), ("avx512_vnni", "AVX-512 VNNI"), ("avx_vnni", "AVX-VNNI"), ("avx2", "AVX2"))
# Why a CPU without those flags gets fp32 / float32.
NO_BF16 = "the CPU has no bfloat16 instructions (no avx512_bf16 or amx_bf16); bf16 would be emulated and slower"
NO_INT8 = "the CPU shows no AVX2, VNNI or AMX; int8 was measured faster only there"
NOTABLE_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16", "amx_int8")
# CTranslate2 compute types on CUDA, fastest first (CTranslate2's own GPU benchmark puts int8_float16 first).
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


def best_device(engine: str = "transformers") -> str:
    """The device to use: cuda where torch.cuda.is_available(), else mps where torch.backends.mps is, else cpu; for
    the CTranslate2 engine, cuda where it sees a GPU, else cpu (asked of ctranslate2: that path imports no torch)."""
    if engine == "ctranslate2":
        import ctranslate2

        return "cuda" if ctranslate2.get_cuda_device_count() else "cpu"
    import torch

    if torch.cuda.is_available():
        return "cuda"
    return "mps" if torch.backends.mps.is_available() else "cpu"


def check_device(device: str) -> str:
    """`device`, or a UsageError for a name torch does not know, or a GPU this machine does not have."""
    from .errors import UsageError

    if device == "cpu":  # the serving path imports no torch
        return device
    import torch

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
    if device.split(":")[0] == "cuda":
        import torch

        return torch.cuda.mem_get_info(torch.device(device))[0]
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
    import torch

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
    kind, _, index = device.partition(":")
    if kind == "cpu":
        found = first_flag(INT8_FLAGS, cpu_flags() if flags is None else flags)
        if found:
            return ComputeType("int8", f"int8: the CPU has {found[1]} ({found[0]})")
        return ComputeType("float32", f"float32: {NO_INT8}")
    if kind == "cuda":
        import ctranslate2  # optional dependency (the serve extra)

        supported = ctranslate2.get_supported_compute_types("cuda", int(index or 0))
        compute_type = next((kind for kind in CUDA_COMPUTE_TYPES if kind in supported), "float32")
        where = f"cuda:{index or 0}"
        return ComputeType(compute_type, f"{compute_type}: the fastest type ctranslate2 supports on {where}")
    raise ValueError(f"CTranslate2 runs on 'cpu' or 'cuda', not {device!r}")


def cpu_cores() -> int:
    """The CPUs this process may run on (its affinity where the system says it, else the machine's)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def describe(cpuinfo: str | os.PathLike | None = None) -> str:
    """One line for logs and model cards: CPU model, logical CPUs, torch threads, notable flags, CUDA device."""
    import torch

    model = cpuinfo_field("model name", cpuinfo) or platform.processor() or "unknown CPU"
    flags = cpu_flags(cpuinfo)
    notable = " ".join(flag for flag in NOTABLE_FLAGS if flag in flags) or "none of AVX2, VNNI, BF16, AMX"
    cuda = f"CUDA: {torch.cuda.get_device_name()}" if torch.cuda.is_available() else "no CUDA"
    count = torch.get_num_threads()
    threads = f"{os.cpu_count()} logical CPUs, torch uses {count} thread{'s' if count != 1 else ''}"
    return f"{model}; {threads}; flags: {notable}; {cuda}"


ONEDNN_CACHE = "ONEDNN_PRIMITIVE_CACHE_CAPACITY"


def keep_compiled_kernels(capacity: int = 65536) -> bool:
    """Let oneDNN keep `capacity` compiled kernels instead of its default 1,024: on a CPU with bfloat16 instructions
    torch's bfloat16 matrix multiplies are oneDNN kernels compiled for each new shape, and batches by tokens bring
    thousands of shapes an epoch, which the default cache would compile again at nearly every step. The variable is
    read when oneDNN makes its first kernel: call this before any. False where the user set it."""
    if ONEDNN_CACHE in os.environ:
        return False
    os.environ[ONEDNN_CACHE] = str(capacity)
    return True


def flush_denormals() -> bool:
    """Make the CPU treat denormal floats (below 1.2e-38) as zero (x86's FTZ and DAZ), in this thread and the
    threads it starts later: call it before the first parallel torch operation, so that the intra-op threads
    inherit it. A trained model's forward and backward passes make denormals, and arithmetic on them is many times
    slower; values that small are below any that matter to training. False where the CPU cannot."""
    import torch

    return torch.set_flush_denormal(True)
