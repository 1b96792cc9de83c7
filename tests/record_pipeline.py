"""A stand-in for a benchmark's own evaluation pipeline, run as its own process by the
``amber serve --record`` tests: it searches (Serper), reads a page (Jina Reader), asks
two API judges through their official SDKs (openai, google-genai) and by hand (httpx,
a Gemini ``?key=``), streamed and not, asking some requests twice, and in proxy mode
fetches a page directly. It prints what it received as JSON.

``python record_pipeline.py base|proxy``; keys from ``SERPER_API_KEY``,
``JINA_API_KEY``, ``OPENAI_API_KEY``, ``GEMINI_API_KEY``; the page from ``PAGE_URL``.
Base mode reads the base URLs from ``SERPER_BASE_URL``, ``JINA_BASE_URL``,
``OPENAI_BASE_URL`` and ``GOOGLE_GEMINI_BASE_URL`` (as the SDKs do); proxy mode uses
the real hosts, through ``HTTPS_PROXY``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sys
from typing import Any

import httpx
import openai
import requests
from google import genai

QUERY = "Eiffel Tower completed 1889"
JUDGE_PROMPT = [{"role": "system", "content": "You grade claims. Answer in JSON."},
                {"role": "user", "content": "Claim: the tower was completed in 1889."}]


def main(mode: str) -> list[dict[str, Any]]:
    env = os.environ
    if mode == "base":
        serper, jina = env["SERPER_BASE_URL"], env["JINA_BASE_URL"]
        openai_base, gemini_base = env["OPENAI_BASE_URL"], env["GOOGLE_GEMINI_BASE_URL"]
    else:
        serper, jina = "https://google.serper.dev", "https://r.jina.ai"
        openai_base = "https://api.openai.com/v1"
        gemini_base = "https://generativelanguage.googleapis.com"
    page = env["PAGE_URL"]
    out: list[dict[str, Any]] = []

    def note(name: str, status: int, body: bytes, **extra: Any) -> None:
        out.append({"name": name, "status": status,
                    "sha256": hashlib.sha256(body).hexdigest(),
                    "body": base64.b64encode(body).decode(), **extra})

    for n in (1, 2):
        r = requests.post(f"{serper}/search", json={"q": QUERY, "num": 5},
                          headers={"X-API-KEY": env["SERPER_API_KEY"]}, timeout=60)
        note(f"serper#{n}", r.status_code, r.content)
    r = requests.get(f"{jina}/{page}", timeout=60, headers={
        "Accept": "application/json", "Authorization": f"Bearer {env['JINA_API_KEY']}"})
    note("jina", r.status_code, r.content)
    client = openai.OpenAI(max_retries=0, **({"base_url": openai_base} if mode == "proxy"
                                               else {}))
    for n in (1, 2):
        done = client.chat.completions.create(model="gpt-fake", messages=JUDGE_PROMPT,
                                              temperature=0)
        note(f"openai#{n}", 200, done.model_dump_json().encode(),
             text=done.choices[0].message.content)
    deltas = [c.choices[0].delta.content if c.choices else f"usage {c.usage.total_tokens}"
              for c in client.chat.completions.create(
                  model="gpt-fake", messages=JUDGE_PROMPT, stream=True,
                  stream_options={"include_usage": True})]
    note("openai-stream", 200, json.dumps(deltas).encode(), deltas=deltas)
    note("openai-models", 200, json.dumps([m.id for m in client.models.list()]).encode())
    with httpx.Client(timeout=60) as raw, raw.stream(
            "POST", f"{openai_base}/chat/completions",
            headers={"Authorization": f"Bearer {env['OPENAI_API_KEY']}"},
            json={"model": "gpt-fake", "messages": JUDGE_PROMPT[1:], "stream": True}) as resp:
        pieces = list(resp.iter_raw())
        note("openai-raw-stream", resp.status_code, b"".join(pieces),
             chunks=[len(p) for p in pieces])
    gem = genai.Client(**({"http_options": {"base_url": gemini_base}} if mode == "proxy"
                          else {}))
    for n in (1, 2):
        text = gem.models.generate_content(model="gemini-fake", contents="Grade: 1889?").text
        note(f"gemini#{n}", 200, (text or "").encode(), text=text)
    parts = [c.text for c in gem.models.generate_content_stream(
        model="gemini-fake", contents="Stream a grade")]
    note("gemini-stream", 200, json.dumps(parts).encode(), parts=parts)
    tokens = gem.models.count_tokens(model="gemini-fake", contents="count me").total_tokens
    note("gemini-count", 200, str(tokens).encode())
    r = requests.post(f"{gemini_base}/v1beta/models/gemini-fake:generateContent",
                      params={"key": env["GEMINI_API_KEY"]}, timeout=60,
                      json={"contents": [{"parts": [{"text": "raw REST"}]}]})
    note("gemini-rest", r.status_code, r.content)
    if mode == "proxy":
        r = requests.get(page, timeout=60)
        note("page", r.status_code, r.content)
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
