"""A citation-checking pipeline in the shape of the benchmarks' own code, for the tests of
``amber serve``: it knows nothing of Amber. Statements and the URLs they cite come in;
each page is read through Jina Reader (https://r.jina.ai, as DeepResearch Bench's scraper
reads it), each (statement, page) is put to a judge through an SDK (OpenAI's, or
google-genai's with ``--gemini``) at its hard-coded host, and the share of supported
statements comes out. Run with nothing but the environment ``amber serve --print-env``
prints: ``python citation_pipeline.py pairs.json``."""

from __future__ import annotations

import hashlib
import json
import sys

import requests


def read(url: str) -> str:
    resp = requests.get(f"https://r.jina.ai/{url}", timeout=120, headers={
        "Accept": "application/json", "Authorization": "jina-key", "X-Timeout": "60000",
        "X-With-Generated-Alt": "true"})
    resp.raise_for_status()
    data = resp.json()["data"]
    return f"{data['title']}\n\n{data['description']}\n\n{data['content']}"


def ask_openai(statement: str, page: str) -> bool:
    import openai

    client = openai.OpenAI()
    done = client.chat.completions.create(
        model="gpt-4o-mini", temperature=0.3, max_tokens=24,
        messages=[{"role": "system", "content": "Does the page support the statement?"},
                  {"role": "user", "content": f"Page:\n{page[:1500]}\n\n"
                                              f"Statement: {statement}"}],
        response_format={"type": "json_schema", "json_schema": {"name": "verdict", "schema": {
            "type": "object", "properties": {"supported": {"type": "boolean"}},
            "required": ["supported"]}}})
    return bool(json.loads(done.choices[0].message.content)["supported"])


def ask_gemini(statement: str, page: str) -> bool:
    from google import genai
    from google.genai import types

    client = genai.Client(http_options={"timeout": 600000})
    done = client.models.generate_content(
        model="gemini-2.5-flash", contents=f"Page:\n{page[:1500]}\n\nStatement: {statement}",
        config=types.GenerateContentConfig(
            response_mime_type="application/json", max_output_tokens=24,
            response_schema={"type": "OBJECT", "properties": {
                "supported": {"type": "BOOLEAN"}}, "required": ["supported"]},
            thinking_config=types.ThinkingConfig(thinking_budget=1024)))
    return bool(json.loads(done.text)["supported"])


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as fh:
        pairs = json.load(fh)
    ask = ask_gemini if "--gemini" in sys.argv else ask_openai
    verdicts = []
    for statement, url in pairs:
        page = read(url)
        verdicts.append({"statement": statement, "url": url,
                         "page_sha256": hashlib.sha256(page.encode()).hexdigest(),
                         "supported": ask(statement, page)})
    score = sum(v["supported"] for v in verdicts) / len(verdicts)
    print(json.dumps({"verdicts": verdicts, "score": score}, sort_keys=True))


if __name__ == "__main__":
    main()
