"""Precision and compute-type choices from the hardware: CPU flags faked for each machine of the project, CUDA faked."""

import ctypes.util
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import ctranslate2
import pytest
import torch

from hf_tiny_transformer import hardware
from hf_tiny_transformer.hardware import (
    Choice,
    ComputeType,
    best_device,
    choose_precision,
    cpu_flags,
    cpuinfo_field,
    ctranslate2_compute_type,
    describe,
)
from running import AMX, AVX2, AVX512_BF16, ROOT, fresh_python_number

AVX_VNNI = frozenset({"fma", "avx2", "avx_vnni"})  # Intel Alder Lake
# An Intel Ice Lake of the project: lscpu's Flags line, AVX-512 and VNNI, no avx512_bf16.
ICE_LAKE_LSCPU = (
    "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ss ht "
    "syscall nx pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology nonstop_tsc cpuid tsc_known_freq pni "
    "pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave avx f16c rdrand "
    "hypervisor lahf_lm abm 3dnowprefetch cpuid_fault ssbd ibrs ibpb stibp ibrs_enhanced fsgsbase tsc_adjust bmi1 "
    "avx2 smep bmi2 erms invpcid avx512f avx512dq rdseed adx smap avx512ifma clflushopt clwb avx512cd sha_ni "
    "avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves wbnoinvd arat avx512vbmi umip pku ospke avx512_vbmi2 gfni "
    "vaes vpclmulqdq avx512_vnni avx512_bitalg avx512_vpopcntdq rdpid fsrm md_clear flush_l1d arch_capabilities"
)
ICE_LAKE = frozenset(ICE_LAKE_LSCPU.split())
# The reasons' sentences, written out here so that a change of wording shows.
NO_BF16 = "the CPU has no bfloat16 instructions (no avx512_bf16 or amx_bf16); bf16 would be emulated and slower"
NO_INT8 = "the CPU shows no AVX2, VNNI or AMX; int8 was measured faster only there"


def real_cpuinfo() -> str:
    """/proc/cpuinfo's text, or a skip where there is none."""
    path = Path("/proc/cpuinfo")
    if not path.exists():
        pytest.skip("no /proc/cpuinfo (not Linux)")
    return path.read_text()


@pytest.fixture
def fake_cuda(monkeypatch):
    """Installs a fake CUDA device; returns the devices get_device_name was asked about."""
    asked = []

    def install(name: str, bf16: bool) -> list:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        # As torch does: with emulation counted, every GPU "supports" bfloat16.
        monkeypatch.setattr(
            torch.cuda, "is_bf16_supported", lambda including_emulation=True: bf16 or including_emulation
        )
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: asked.append(device) or name)
        return asked

    return install


@pytest.mark.parametrize(
    "flags, expected",
    [
        (AMX, Choice("bf16", "bf16: the CPU has AMX (amx_bf16)")),
        (AVX512_BF16, Choice("bf16", "bf16: the CPU has AVX-512 BF16 (avx512_bf16)")),
        (AVX2, Choice("fp32", f"fp32: {NO_BF16}")),
        (ICE_LAKE, Choice("fp32", f"fp32: {NO_BF16}")),
        (frozenset(), Choice("fp32", f"fp32: {NO_BF16}")),
    ],
    ids=["amx", "avx512_bf16", "avx2", "ice_lake", "no_flags"],
)
def test_auto_on_cpu_takes_bf16_only_with_bfloat16_instructions(flags, expected):
    assert choose_precision("auto", "cpu", flags=flags) == expected


def test_auto_on_cpu_reads_this_machines_flags(monkeypatch):
    monkeypatch.setattr(hardware, "cpu_flags", lambda: AVX512_BF16)
    assert choose_precision("auto", "cpu").precision == "bf16"
    monkeypatch.setattr(hardware, "cpu_flags", lambda: AVX2)
    assert choose_precision("auto", "cpu").precision == "fp32"


def test_bf16_asked_for_without_bfloat16_instructions_is_honoured_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="hf_tiny_transformer.hardware"):
        choice = choose_precision("bfloat16", "cpu", flags=AVX2)
    assert choice == Choice("bf16", f"bf16: asked for, but {NO_BF16}")
    assert [record.getMessage() for record in caplog.records] == [choice.reason]


def test_bf16_asked_for_with_amx_gives_no_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="hf_tiny_transformer.hardware"):
        choice = choose_precision("BF16", "cpu", flags=AMX)
    assert choice == Choice("bf16", "bf16: asked for, and the CPU has AMX (amx_bf16)")
    assert caplog.records == []


@pytest.mark.parametrize("requested", ["fp32", "float32"])
def test_fp32_asked_for_is_fp32_even_with_amx(requested):
    assert choose_precision(requested, "cpu", flags=AMX) == Choice("fp32", "fp32: asked for")


def test_a_bad_precision_names_the_allowed_ones():
    with pytest.raises(ValueError) as error:
        choose_precision("fp16", "cpu", flags=AMX)
    assert str(error.value) == "precision 'fp16' is not one of auto, bf16, bfloat16, fp32, float32; pass 'auto' to pick"


def test_auto_on_a_cuda_gpu_with_bf16(fake_cuda):
    asked = fake_cuda("NVIDIA H200", bf16=True)
    assert choose_precision("auto", "cuda:1", flags=AVX2) == Choice(
        "bf16", "bf16: CUDA device NVIDIA H200 supports bfloat16"
    )
    assert asked == [torch.device("cuda:1")]


def test_auto_on_a_cuda_gpu_without_native_bf16_is_fp32(fake_cuda):
    fake_cuda("Tesla V100-SXM2-16GB", bf16=False)
    reason = "fp32: CUDA device Tesla V100-SXM2-16GB has no native bfloat16 (compute capability below 8.0)"
    assert choose_precision("auto", "cuda", flags=AMX) == Choice("fp32", reason)


def test_cuda_asked_for_without_cuda_is_an_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match=r"^device 'cuda' but torch.cuda.is_available\(\) is False; pass 'cpu'"):
        choose_precision("auto", "cuda")


def test_auto_on_mps_is_fp32():
    expected = Choice("fp32", "fp32: mps is not known to run bfloat16 faster than float32")
    assert choose_precision("auto", "mps", flags=AMX) == expected


@pytest.mark.parametrize("cuda, mps, expected", [(True, True, "cuda"), (False, True, "mps"), (False, False, "cpu")])
def test_best_device(monkeypatch, cuda, mps, expected):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)
    assert best_device() == expected


@pytest.mark.parametrize(
    "flags, expected",
    [
        (AMX, ComputeType("int8", "int8: the CPU has AMX (amx_int8)")),
        (AVX512_BF16, ComputeType("int8", "int8: the CPU has AVX-512 VNNI (avx512_vnni)")),
        (ICE_LAKE, ComputeType("int8", "int8: the CPU has AVX-512 VNNI (avx512_vnni)")),
        (AVX_VNNI, ComputeType("int8", "int8: the CPU has AVX-VNNI (avx_vnni)")),
        (AVX2, ComputeType("int8", "int8: the CPU has AVX2 (avx2)")),
        (frozenset(), ComputeType("float32", f"float32: {NO_INT8}")),
    ],
    ids=["amx", "avx512_bf16", "ice_lake", "avx_vnni", "avx2", "no_flags"],
)
def test_ctranslate2_compute_type_on_cpu(flags, expected):
    assert ctranslate2_compute_type("cpu", flags=flags) == expected


def test_the_cpu_compute_type_is_one_ctranslate2_supports_here():
    assert ctranslate2_compute_type("cpu").compute_type in ctranslate2.get_supported_compute_types("cpu")


@pytest.mark.parametrize(
    "supported, expected",
    [
        ({"float32", "int8_float16", "float16", "int8", "int8_float32", "bfloat16", "int8_bfloat16"}, "int8_float16"),
        ({"float32", "int8", "int8_float32"}, "int8_float32"),  # compute capability 6.1
        ({"float32"}, "float32"),
    ],
)
def test_ctranslate2_compute_type_on_cuda(monkeypatch, supported, expected):
    asked = []
    monkeypatch.setattr(ctranslate2, "get_supported_compute_types", lambda *args: asked.append(args) or supported)
    reason = f"{expected}: the fastest type ctranslate2 supports on cuda:2"
    assert ctranslate2_compute_type("cuda:2") == ComputeType(expected, reason)
    assert asked == [("cuda", 2)]


def test_ctranslate2_on_mps_is_an_error():
    with pytest.raises(ValueError, match=r"^CTranslate2 runs on 'cpu' or 'cuda', not 'mps'$"):
        ctranslate2_compute_type("mps")


def test_cpuinfo_is_read_from_the_first_processor(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\nflags\t\t: fpu avx2 amx_bf16\n\n"
        "processor\t: 1\nmodel name\t: Other\nflags\t\t: fpu\n"
    )
    assert cpuinfo_field("model name", cpuinfo) == "Intel(R) Xeon(R) Platinum 8480+"
    assert cpu_flags(cpuinfo) == frozenset({"fpu", "avx2", "amx_bf16"})
    assert cpu_flags(tmp_path / "missing") == frozenset()


def test_cpu_flags_of_this_machine_match_proc_cpuinfo():
    line = re.search(r"^flags\s*:(.*)$", real_cpuinfo(), re.MULTILINE)
    assert cpu_flags() == frozenset(line.group(1).split() if line else ())


def test_describe_this_machine_names_its_cpu_model():
    model = re.search(r"^model name\s*:\s*(.*?)\s*$", real_cpuinfo(), re.MULTILINE)
    if model is None:
        pytest.skip("/proc/cpuinfo has no model name here")
    assert describe().startswith(f"{model.group(1)}; ")


def test_describe_with_everything_faked(tmp_path, monkeypatch, fake_cuda):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"model name\t: Intel(R) Xeon(R) Platinum 8480+\nflags\t\t: {' '.join(sorted(AMX))}\n")
    monkeypatch.setattr(hardware.os, "cpu_count", lambda: 96)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 48)
    fake_cuda("NVIDIA H200", bf16=True)
    assert describe(cpuinfo) == (
        "Intel(R) Xeon(R) Platinum 8480+; 96 logical CPUs, torch uses 48 threads; "
        "flags: avx2 avx512f avx512_vnni avx512_bf16 amx_bf16 amx_int8; CUDA: NVIDIA H200"
    )
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    cpuinfo.write_text("model name\t: Old CPU\nflags\t\t: fpu sse2\n")
    assert (
        describe(cpuinfo)
        == "Old CPU; 96 logical CPUs, torch uses 48 threads; flags: none of AVX2, VNNI, BF16, AMX; no CUDA"
    )
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    assert "; 96 logical CPUs, torch uses 1 thread; " in describe(cpuinfo)


DENORMALS_LEFT = """
import sys, torch
from hf_tiny_transformer.hardware import flush_denormals
if sys.argv[1] == "flush":
    assert flush_denormals()
torch.set_num_threads(2)
tiny = torch.full((4_000_000,), 1e-39)  # a denormal float32, in every chunk the intra-op threads take
print(int((tiny * 1.0 != 0).sum()))
"""


def test_denormals_are_flushed_in_every_thread_torch_starts_after():
    """FTZ/DAZ set before the first parallel operation reaches the intra-op threads too (they inherit it)."""
    left = {mode: fresh_python_number(DENORMALS_LEFT, mode) for mode in ("keep", "flush")}
    assert left == {"keep": 4_000_000, "flush": 0}


# What a process runs on: whether tcmalloc is among the libraries mapped into it.
ON_TCMALLOC = "print(any('libtcmalloc' in line for line in open('/proc/self/maps')))"


def make_train_line(target: str, *variables: str) -> str:
    """The command `make -n target` would train with (the line that runs training/train.py), as a make run from a
    shell would (none of the variables of a `make test` that runs this suite)."""
    shell = {name: value for name, value in os.environ.items() if name not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    command = ["make", "-n", target, *variables]
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=True, env=shell)
    return next(line for line in result.stdout.splitlines() if "training/train.py" in line)


@pytest.mark.parametrize("target", ["demo", "train-en-ja", "train-ja-en"])
def test_make_trains_on_tcmalloc_where_the_machine_has_it(tmp_path, target):
    """The Makefile's detection faked where it starts (the python it asks, $(PYTHON), answering as find_library
    would), then as this machine answers it."""
    answers = {"libtcmalloc_minimal.so.4": 'LD_PRELOAD="libtcmalloc_minimal.so.4${LD_PRELOAD:+ $LD_PRELOAD}" ', "": ""}
    for answer, prefix in answers.items():
        python = tmp_path / "python"
        python.write_text(f"#!/bin/sh\necho '{answer}'\n")
        python.chmod(0o755)
        assert make_train_line(target, f"PYTHON={python}").startswith(f"{prefix}.venv/bin/python training/train.py ")
    assert make_train_line(target, "TCMALLOC=").startswith(".venv/bin/python training/train.py ")  # opted out


def test_make_s_command_runs_on_the_allocator_it_names():
    """The Makefile's own prefix, with this machine's detection, run in a shell: the process it starts is on
    tcmalloc where the machine has it, on glibc where not."""
    line = make_train_line("demo")
    prefix = line[: line.index(".venv/bin/python")]
    command = f'{prefix}{sys.executable} -c "{ON_TCMALLOC}"'
    preloaded = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True).stdout.strip()
    installed = bool(ctypes.util.find_library("tcmalloc_minimal") or ctypes.util.find_library("tcmalloc"))
    assert preloaded == str(installed), command


def test_the_ctranslate2_engine_takes_a_gpu_ctranslate2_sees_without_asking_torch(monkeypatch):
    """The default translate path (the shipped CTranslate2 export) imports no torch: CTranslate2 says where a GPU is."""
    ctranslate2 = pytest.importorskip("ctranslate2")
    from hf_tiny_transformer.hardware import best_device

    monkeypatch.setattr(ctranslate2, "get_cuda_device_count", lambda: 1)
    assert best_device("ctranslate2") == "cuda"
    monkeypatch.setattr(ctranslate2, "get_cuda_device_count", lambda: 0)
    assert best_device("ctranslate2") == "cpu"
