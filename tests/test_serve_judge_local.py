"""``amber serve`` answering the judge APIs with the real local judge (SmolLM2, llama.cpp):
a citation-checking pipeline that knows nothing of Amber (tests/citation_pipeline.py) runs
through the proxy at the hard-coded hosts, live with the default judge, then again
offline in a network namespace with only loopback and without the model file, from the
ledger: the same outputs. Also: many clients at once against the one in-process judge,
and a prompt past the context refused in each provider's shape."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from serve_helpers import free_port, netns_available, options

from ambereval.engine.serve.index import FrozenWeb
from ambereval.engine.serve.judges import open_service
from ambereval.engine.serve.log import ServeLog
from ambereval.engine.serve.proxy import find_mitmdump
from ambereval.engine.serve.server import BaseUrlServer
from ambereval.models.registry import default_judge_path
from ambereval.snapshots import capture_urls

from fakeweb import FakeWeb

openai = pytest.importorskip("openai")
genai = pytest.importorskip("google.genai")
PIPELINE = Path(__file__).with_name("citation_pipeline.py")

pytestmark = pytest.mark.slow




def client_env(exports: dict[str, str]) -> dict[str, str]:
    """Only what a user would have: PATH, the printed variables, placeholder keys."""
    return {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"),
            **exports, "OPENAI_API_KEY": "sk-offline", "GEMINI_API_KEY": "offline"}


def start_proxy(args: list[str], port: int) -> tuple[subprocess.Popen[str], dict[str, str]]:
    proc = subprocess.Popen([sys.executable, "-m", "ambereval.cli", "serve", *args, "--proxy",
                             "--port", str(port)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    lines = [proc.stdout.readline() for _ in range(12)]
    if not all(line.startswith("export ") for line in lines):
        proc.kill()
        raise AssertionError(f"no export lines: {lines} {proc.communicate()[1]}")
    return proc, dict(line[len("export "):].strip().split("=", 1) for line in lines)


def stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return err


def test_a_pipeline_runs_live_then_replays_offline_without_the_model(tmp_path: Path) -> None:
    if find_mitmdump() is None:
        pytest.skip("mitmproxy (.venv-serve/) not installed")
    if not netns_available():
        pytest.skip("unshare -n is not permitted here")
    with FakeWeb() as web:
        urls = [web.url("/pages/eiffel.html"), web.url("/pages/louvre.html")]
        capture_urls(tmp_path / "bundle", urls, options(web.env(), reader="jina"))
    pairs = tmp_path / "pairs.json"
    pairs.write_text(json.dumps([["The Eiffel Tower was completed in 1889.", urls[0]],
                                 ["The Louvre opened as a museum in 1793.", urls[1]],
                                 ["The Louvre is in Berlin.", urls[1]]]))
    model = tmp_path / "judge.gguf"
    shutil.copyfile(default_judge_path(), model)
    ledger = tmp_path / "judge.sqlite"
    common = [str(tmp_path / "bundle"), "--ca-dir", str(tmp_path / "ca"), "--ledger",
              str(ledger)]
    proc, exports = start_proxy([*common, "--judge-model", str(model), "--ledger-mode",
                                 "record", "--judge-ctx", "2048"], free_port())
    try:
        live = [subprocess.run([sys.executable, str(PIPELINE), str(pairs), *flag],
                               capture_output=True, text=True, env=client_env(exports),
                               timeout=900) for flag in ([], ["--gemini"])]
    finally:
        err = stop(proc)
    for done in live:
        assert done.returncode == 0, done.stderr
    assert "6 by the judge" in err and "0 upstream connection attempts" in err
    assert "judge judge: 6 answered (0 from the ledger)" in err
    model.unlink()  # the replay needs no model

    script = textwrap.dedent(f"""
        ip link set lo up
        {sys.executable} -m ambereval.cli serve {' '.join(common)} --ledger-mode replay \
            --proxy --port {free_port()} > {tmp_path}/ns.out 2> {tmp_path}/ns.err &
        server=$!
        for i in $(seq 120); do grep -q NODE_EXTRA {tmp_path}/ns.out && break; sleep 1; done
        eval "$(cat {tmp_path}/ns.out)"
        export OPENAI_API_KEY=other-key GEMINI_API_KEY=other-key
        {sys.executable} {PIPELINE} {pairs} > {tmp_path}/openai.json
        {sys.executable} {PIPELINE} {pairs} --gemini > {tmp_path}/gemini.json
        kill -TERM $server; wait $server
        echo "exit=$?"
    """)
    done = subprocess.run(["unshare", "-n", "bash", "-c", script], capture_output=True,
                          text=True, timeout=900)
    assert done.stdout.strip() == "exit=0", done.stdout + done.stderr
    assert (tmp_path / "openai.json").read_text() == live[0].stdout
    assert (tmp_path / "gemini.json").read_text() == live[1].stdout
    verdicts = json.loads(live[0].stdout)["verdicts"]
    assert len({v["page_sha256"] for v in verdicts}) == 2
    err = (tmp_path / "ns.err").read_text()
    assert "6 answered (6 from the ledger), 0 not in the ledger" in err
    assert "0 upstream connection attempts" in err


def test_many_clients_share_the_in_process_judge_and_long_prompts_are_refused(
        tmp_path: Path) -> None:
    service = open_service(None, None, None, None, 1024, None, None, 0,
                           tmp_path / "ledger.sqlite", "reuse", False, 16, lambda line: None)
    with BaseUrlServer(FrozenWeb([]), log=ServeLog(notify=lambda line: None),
                       judges=service) as server:
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="k")  # default timeouts
        answers: dict[int, str] = {}

        def ask(i: int) -> None:
            done = client.chat.completions.create(
                model="gpt-5", max_tokens=8,
                messages=[{"role": "user", "content": f"Name the number {i}."}])
            answers[i] = done.choices[0].message.content or ""

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=600)
        assert sorted(answers) == list(range(12))
        assert service.judge.stats()["peak_in_flight"] == 1  # queued, one at a time
        with pytest.raises(openai.BadRequestError) as too_long:
            client.chat.completions.create(
                model="gpt-5", messages=[{"role": "user", "content": "word " * 3000}])
        assert too_long.value.code == "context_length_exceeded"
        gclient = genai.Client(api_key="k", http_options={"base_url": server.url})
        with pytest.raises(genai.errors.ClientError) as gtoo_long:
            gclient.models.generate_content(model="gemini-2.5-pro", contents="word " * 3000)
        assert gtoo_long.value.code == 400 and "input too long" in str(gtoo_long.value)
    assert service.counts["too_long"] == 2
