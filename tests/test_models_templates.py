"""Chat templates of the catalog's judges: Gemma-2's refuses a system turn, so the
in-process backend folds the instructions into the first user turn."""

from __future__ import annotations

import pytest

from ambereval.errors import PromptError
from ambereval.models import default_judge_path
from ambereval.models.llamacpp_backend import LlamaCppBackend

# The chat template shipped in Gemma-2 instruct GGUFs (tokenizer.chat_template).
GEMMA2 = (
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role "
    "not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == "
    "'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must "
    "alternate user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == "
    "'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}"
    "{% endif %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + "
    "'<end_of_turn>\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}"
    "{% endif %}")


@pytest.fixture(scope="module")
def backend() -> LlamaCppBackend:
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    real = LlamaCppBackend(default_judge_path(), n_ctx=512)
    real.llm()  # loads the model and its own formatter
    real._formatter = Jinja2ChatFormatter(GEMMA2, eos_token="<eos>", bos_token="<bos>")
    return real


@pytest.mark.slow
def test_system_turn_is_folded_into_the_first_user_turn(backend: LlamaCppBackend) -> None:
    prompt, _ = backend.render([{"role": "system", "content": "Answer in JSON."},
                                {"role": "user", "content": "Is the sky blue?"}])
    assert prompt == ("<bos><start_of_turn>user\nAnswer in JSON.\n\nIs the sky blue?"
                      "<end_of_turn>\n<start_of_turn>model\n")


@pytest.mark.slow
def test_other_template_refusals_are_prompt_errors(backend: LlamaCppBackend) -> None:
    with pytest.raises(PromptError, match="chat template refused .* roles must alternate"):
        backend.render([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
