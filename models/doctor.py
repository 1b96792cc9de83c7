"""``amber doctor``: is this install able to judge offline, and how was llama.cpp built?"""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import os
from typing import Any

from ambereval.models.registry import known_models

PORTABLE_FLAGS = ("GGML_NATIVE=OFF", "GGML_AVX512=OFF", "GGML_AMX_TILE=OFF",
                  "GGML_AMX_INT8=OFF", "GGML_AMX_BF16=OFF")


def _version(package: str) -> str | None:
    try:
        return md.version(package)
    except md.PackageNotFoundError:
        return None


def _cpu_flags() -> list[str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    wanted = ("sse3", "ssse3", "avx", "avx2", "fma", "f16c", "avx512f",
                              "amx_tile")
                    return [f for f in wanted if f in flags]
    except OSError:
        pass
    return []


def llama_build_info() -> dict[str, Any]:
    """llama.cpp's own system info string, parsed, plus whether AVX-512/AMX are in use."""
    info: dict[str, Any] = {"installed": _version("llama_cpp_python") or
                            _version("llama-cpp-python")}
    if info["installed"] is None:
        return info
    import llama_cpp

    text = llama_cpp.llama_print_system_info().decode("utf-8", errors="replace")
    features = {}
    for part in text.replace("CPU :", "|").split("|"):
        name, sep, value = part.partition("=")
        if sep:
            features[name.strip()] = value.strip()
    in_use = sorted(k for k, v in features.items() if v == "1")
    info.update({
        "system_info": text.strip(),
        "features_in_use": in_use,
        "portable": not any(k.startswith(("AVX512", "AMX")) for k in in_use),
        "expected_build_flags": list(PORTABLE_FLAGS),
    })
    return info


def cpu_sharing() -> dict[str, Any]:
    """Cores, load, and whether llama.cpp's OpenMP threads spin while they wait. They do
    by default: fastest alone, but a judge sharing its cores with other busy processes
    loses most of its time to spinning (docs/scale.md, "Sharing the cores")."""
    cores = os.cpu_count() or 1
    try:
        load = round(os.getloadavg()[0], 2)
    except OSError:
        load = None
    policy = os.environ.get("OMP_WAIT_POLICY")
    advice = None
    if policy is None and load is not None and load >= cores / 2:
        advice = ("other work is using these cores: start amber with OMP_WAIT_POLICY=PASSIVE "
                  "so llama.cpp's threads sleep instead of spinning while they wait")
    return {"cores": cores, "load_average_1m": load, "omp_wait_policy": policy,
            "advice": advice}


def doctor_report() -> dict[str, Any]:
    models = [m.as_dict() for m in known_models()]
    llama = llama_build_info()
    offline_ready = (
        all(m["present"] for m in models)
        and llama.get("installed") is not None
        and importlib.util.find_spec("sentence_transformers") is not None
        and importlib.util.find_spec("faiss") is not None
    )
    torch_version = _version("torch")
    return {
        "llama_cpp": llama,
        "cpu_flags": _cpu_flags(),
        "cpu": cpu_sharing(),
        "torch": {"version": torch_version, "cpu_build": bool(torch_version and
                                                             "+cpu" in torch_version)},
        "faiss": _version("faiss-cpu"),
        "sentence_transformers": _version("sentence-transformers"),
        "models": models,
        "hf_hub_offline": os.environ.get("HF_HUB_OFFLINE") == "1",
        "offline_ready": offline_ready,
    }
