"""In-process llama.cpp judge (llama-cpp-python, GGUF, CPU).

Greedy decoding (temperature 0), fixed seed, grammar-constrained JSON built from the
schema, the model's own chat template. Weights load on the first live call only, so
replaying from a ledger never loads them.

Context rule (documented, recorded): when the rendered prompt plus ``max_tokens`` does
not fit ``n_ctx``, the longest user message is shortened by dropping whole paragraphs
(blank-line separated) from its end; if a single paragraph is still too long it is cut
at a word boundary and ``[...]`` appended. The call's ``truncation`` records the message
index, paragraphs dropped, characters kept and cut. A prompt that cannot fit even then
raises ModelError.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ambereval.errors import ModelError, PromptError, PromptTooLong
from ambereval.models.decision import decision_spec
from ambereval.models.gguf import read_metadata
from ambereval.models.judge import Completion, Message
from ambereval.models.registry import file_sha256

CUT_MARK = " [...]"


class LlamaCppBackend:
    name = "llamacpp"
    scores_labels = True  # decides labels from log-probabilities (models/decision.py)

    def __init__(self, model_path: str | Path, n_ctx: int = 4096, n_threads: int | None = None,
                 n_batch: int = 512) -> None:
        self.model_path = Path(model_path)
        self.meta = read_metadata(self.model_path)  # clear error for missing/corrupt files
        self.template = str(self.meta.get("tokenizer.chat_template") or "")
        if not self.template:
            raise ModelError(f"{self.model_path}: GGUF has no chat template",
                             hint="use an instruct/chat model")
        self.n_ctx = n_ctx
        self.n_threads = n_threads or max(1, os.cpu_count() or 1)
        self.n_batch = n_batch
        self._llm: Any = None
        self._vocab: Any = None  # the vocabulary alone, to count tokens (tokenizer())
        self._formatter: Any = None
        self._grammars: dict[str, Any] = {}
        self._lock = threading.Lock()

    def identity(self) -> dict[str, Any]:
        return {
            "model": {"sha256": file_sha256(self.model_path), "name": self.model_path.name},
            "chat_template_sha256": hashlib.sha256(self.template.encode()).hexdigest(),
            "n_ctx": self.n_ctx,
        }

    # -- loading -----------------------------------------------------------------------
    def llm(self) -> Any:
        if self._llm is None:
            from llama_cpp import Llama
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            try:
                # n_threads_batch too: prompt reading (most of a judge's time) runs on the
                # batch threads, which llama-cpp-python otherwise sets to every core
                self._llm = Llama(model_path=str(self.model_path), n_ctx=self.n_ctx,
                                  n_threads=self.n_threads, n_threads_batch=self.n_threads,
                                  n_batch=self.n_batch, seed=0, n_gpu_layers=0,
                                  verbose=False)
            except (ValueError, RuntimeError) as err:
                raise ModelError(f"{self.model_path}: llama.cpp could not load it ({err})",
                                 hint="expected a valid GGUF model") from None
            eos = self._token_text(self._llm.token_eos())
            bos = self._token_text(self._llm.token_bos())
            self._formatter = Jinja2ChatFormatter(self.template, eos_token=eos, bos_token=bos)
        return self._llm

    def _token_text(self, token: int, llm: Any = None) -> str:
        if token < 0:
            return ""
        llm = llm or self._llm
        return llm.detokenize([token], special=True).decode("utf-8", errors="ignore")

    def tokenizer(self) -> Any:
        """The loaded model, or its vocabulary alone (``vocab_only``: no weights read),
        which tokenizes exactly as the model does: enough to count a prompt's tokens."""
        if self._llm is not None:
            return self._llm
        if self._vocab is None:
            from llama_cpp import Llama
            from llama_cpp._utils import suppress_stdout_stderr
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            try:
                with suppress_stdout_stderr(disable=False):  # llama.cpp's context notes
                    self._vocab = Llama(model_path=str(self.model_path), vocab_only=True,
                                        verbose=False)
            except (ValueError, RuntimeError) as err:
                raise ModelError(f"{self.model_path}: llama.cpp could not read its "
                                 f"vocabulary ({err})", hint="expected a valid GGUF model"
                                 ) from None
            if self._formatter is None:
                self._formatter = Jinja2ChatFormatter(
                    self.template, eos_token=self._token_text(self._vocab.token_eos(),
                                                              self._vocab),
                    bos_token=self._token_text(self._vocab.token_bos(), self._vocab))
        return self._vocab

    def prompt_ids(self, messages: list[Message], schema: dict[str, Any],
                   max_tokens: int) -> list[int]:
        """The prompt's tokens as :meth:`complete` will send them (after the context rule),
        tokenised without loading the weights."""
        spec = decision_spec(schema)
        sent, _ = self.fit(messages, 16 if spec is not None else max_tokens)
        prompt, _ = self.render(sent)
        if spec is not None:
            prompt += '{"' + spec.field + ('":' if spec.literal else '": "')
        return list(self.tokenizer().tokenize(prompt.encode("utf-8"), special=True))

    def prompt_tokens(self, messages: list[Message], schema: dict[str, Any],
                      max_tokens: int) -> int:
        """The prompt tokens :meth:`complete` will report for this call."""
        return len(self.prompt_ids(messages, schema, max_tokens))

    def grammar(self, schema: dict[str, Any]) -> Any:
        from llama_cpp import LlamaGrammar

        key = json.dumps(schema, sort_keys=True)
        if key not in self._grammars:
            try:
                self._grammars[key] = LlamaGrammar.from_json_schema(key, verbose=False)
            except Exception as err:  # llama.cpp raises plain errors for unsupported schemas
                raise PromptError(f"the schema cannot be enforced by llama.cpp: {err}") from None
        return self._grammars[key]

    # -- prompting ---------------------------------------------------------------------
    def render(self, messages: list[Message]) -> tuple[str, list[str]]:
        from jinja2.exceptions import TemplateError

        self.tokenizer()  # the chat formatter, without loading the weights
        try:
            out = self._formatter(messages=messages)
        except (TemplateError, ValueError) as err:  # llama-cpp's raise_exception: ValueError
            # Gemma-2's template refuses a system turn: fold it into the first user turn
            # (what Gemma-3's template does by itself); any other refusal is the prompt's.
            if not messages or messages[0]["role"] != "system" or len(messages) < 2:
                raise PromptError(f"the model's chat template refused the messages: {err}",
                                  hint="this model cannot be used as a judge as is") from None
            system, first, *rest = messages
            folded = {**first, "content": f"{system['content']}\n\n{first['content']}"}
            try:
                out = self._formatter(messages=[folded, *rest])
            except (TemplateError, ValueError) as again:
                raise PromptError(f"the model's chat template refused the messages: {again}",
                                  hint="this model cannot be used as a judge as is") from None
        stops = out.stop if isinstance(out.stop, list) else [out.stop] if out.stop else []
        return out.prompt, stops

    def count_messages(self, messages: list[Message]) -> int:
        """Tokens of ``messages`` as the model's chat template renders them (countTokens)."""
        with self._lock:
            return self.count(self.render(messages)[0])

    def count(self, prompt: str) -> int:
        return len(self.tokenizer().tokenize(prompt.encode("utf-8"), add_bos=False,
                                             special=True))

    def fit(self, messages: list[Message], max_tokens: int) -> tuple[list[Message], dict | None]:
        """Apply the context rule; returns the messages to send and what was cut."""
        budget = self.n_ctx - max_tokens
        if budget <= 0:
            raise PromptError(f"max_tokens={max_tokens} leaves no room for a prompt in a "
                              f"context of {self.n_ctx} tokens", hint="raise --judge-ctx")
        prompt, _ = self.render(messages)
        if self.count(prompt) <= budget:
            return messages, None
        users = [i for i, m in enumerate(messages) if m["role"] == "user"]
        if not users:
            raise PromptError(f"prompt does not fit the context of {self.n_ctx} tokens")
        idx = max(users, key=lambda i: len(messages[i]["content"]))
        original = messages[idx]["content"]
        paragraphs = original.split("\n\n")

        def with_content(text: str) -> list[Message]:
            return [dict(m, content=text) if i == idx else m for i, m in enumerate(messages)]

        def fits(text: str) -> bool:
            return self.count(self.render(with_content(text))[0]) <= budget

        dropped = 0
        while len(paragraphs) > 1 and not fits("\n\n".join(paragraphs)):
            paragraphs.pop()
            dropped += 1
        text = "\n\n".join(paragraphs)
        if not fits(text):
            lo, hi = 0, len(text)
            while lo < hi:  # longest prefix that fits, cut back to a word boundary
                mid = (lo + hi + 1) // 2
                if fits(text[:mid].rsplit(" ", 1)[0] + CUT_MARK):
                    lo = mid
                else:
                    hi = mid - 1
            text = text[:lo].rsplit(" ", 1)[0] + CUT_MARK
            if lo == 0 or not fits(text):
                raise PromptError(f"prompt does not fit the context of {self.n_ctx} tokens "
                                  "even with the evidence cut", hint="raise --judge-ctx")
        trunc = {"message": idx, "dropped_paragraphs": dropped,
                 "kept_chars": len(text), "cut_chars": len(original) - len(text),
                 "rule": "drop-trailing-paragraphs-v1"}
        return with_content(text), trunc

    def complete(self, messages: list[Message], schema: dict[str, Any] | None,
                 max_tokens: int, seed: int, sampling: dict[str, Any] | None = None,
                 fit: str = "cut") -> Completion:
        spec = decision_spec(schema) if schema is not None else None
        if spec is not None:
            with self._lock:
                return self._label_logprobs(messages, *spec)
        with self._lock:  # one llama context is not thread-safe
            grammar = self.grammar(schema) if schema is not None else None
            if fit == "refuse":
                sent, trunc = messages, None
                prompt, stops = self.render(sent)
                used = self.count(prompt)
                if used >= self.n_ctx:
                    raise PromptTooLong(used, self.n_ctx)
                max_tokens = min(max_tokens, self.n_ctx - used)
            else:
                sent, trunc = self.fit(messages, max_tokens)
                prompt, stops = self.render(sent)
            chosen = {"temperature": 0.0, "top_k": 1, "top_p": 1.0, "seed": seed}
            if sampling:  # the client's own sampling, passed through on purpose
                chosen.update(top_k=0 if float(sampling.get("temperature", 0)) > 0 else 1)
                chosen.update({k: sampling[k] for k in ("temperature", "top_p", "top_k",
                                                       "seed") if k in sampling})
            llm = self.llm()
            cached = reused(llm, llm.tokenize(prompt.encode("utf-8"), special=True))
            out = llm.create_completion(
                prompt, max_tokens=max_tokens, min_p=0.0, repeat_penalty=1.0,
                grammar=grammar, stop=stops, **chosen)
        usage = out["usage"]
        return Completion(out["choices"][0]["text"],
                          {"prompt_tokens": usage["prompt_tokens"],
                           "completion_tokens": usage["completion_tokens"],
                           "cached_tokens": cached}, trunc,
                          out["choices"][0].get("finish_reason"))

    # -- deciding by log-probabilities (models/decision.py) ------------------------------
    def _eval_from(self, tokens: list[int]) -> tuple[Any, int]:
        """Evaluate ``tokens``, reusing the longest prefix already in the KV cache (as
        llama-cpp-python's own ``generate`` does) -> (the next-token log-probs, the
        tokens reused)."""
        import numpy as np

        llm = self.llm()
        common = reused(llm, tokens)
        llm.n_tokens = common
        llm.eval(tokens[common:])
        llm._requires_eval = True  # generate() must not sample from these logits
        logits = np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1), shape=(llm.n_vocab(),))
        logits = logits.astype(np.float64)
        top = logits.max()
        return logits - top - np.log(np.exp(logits - top).sum()), common

    def _label_logprobs(self, messages: list[Message], field: str, labels: list[str],
                        literal: bool = False) -> Completion:
        """The log-probability of each label as the value of ``field``: the prompt, then
        ``{"field": "``, then the label's tokens (summed over a multi-token label). A JSON
        literal (true/false) is scored as `` true`` after ``{"field":`` (BPE vocabularies fold
        the space into the word)."""
        sent, trunc = self.fit(messages, 16)
        prompt, _ = self.render(sent)
        head = prompt + '{"' + field + ('":' if literal else '": "')
        lead = " " if literal else ""
        llm = self.llm()
        base = llm.tokenize(head.encode("utf-8"), special=True)
        scores: dict[str, float] = {}
        first, cached = self._eval_from(base)
        for label in labels:
            full = llm.tokenize((head + lead + label).encode("utf-8"), special=True)
            if full[: len(base)] != base or len(full) == len(base):
                raise PromptError(f"label {label!r} does not tokenize after the prompt "
                                  "on its own; it cannot be scored by log-probability")
            rest = full[len(base):]
            total, logp = float(first[rest[0]]), first
            for i in range(1, len(rest)):
                logp, _ = self._eval_from(base + rest[:i])
                total += float(logp[rest[i]])
            scores[label] = round(total, 6)
        best = min(labels, key=lambda lab: (-scores[lab], lab))
        value: Any = json.loads(best) if literal else best
        raw = json.dumps({field: value, "logprobs": scores}, sort_keys=True)
        return Completion(raw, {"prompt_tokens": len(base), "completion_tokens": 0,
                                "cached_tokens": cached}, trunc, "logprobs")


def shared_start(before: Sequence[Any], tokens: Sequence[Any]) -> int:
    """How many tokens of ``tokens`` a prefix cache holding ``before`` does not read again:
    their longest common prefix, at most all but one (the last is read for fresh logits,
    as llama-cpp-python's ``generate`` does). Any sequences: token ids, or characters."""
    common = 0
    for a, b in zip(before, tokens, strict=False):
        if a != b:
            break
        common += 1
    return max(0, min(common, len(tokens) - 1))


def reused(llm: Any, tokens: list[int]) -> int:
    """:func:`shared_start` against what ``llm``'s KV cache holds now."""
    return shared_start(llm.input_ids[: llm.n_tokens].tolist(), list(tokens))
