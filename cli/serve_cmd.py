"""``amber serve``: the frozen evidence as a drop-in web (Serper, Jina Reader, pages)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from ambereval.cli.judge_options import (
    JudgeConcurrency,
    JudgeCtx,
    JudgeModel,
    JudgeName,
    JudgeRef,
    JudgeUrl,
    LedgerMode,
    LedgerPath,
    Seed,
    Threads,
    check_ledger_mode,
)
from ambereval.cli.output import fail, handled
from ambereval.cli.serve_lines import emit as _emit
from ambereval.cli.serve_lines import note as _note


def _default_ca_dir() -> Path:
    from ambereval.models.registry import amber_home

    return amber_home() / "ca"



def serve_cmd(
    bundles: Annotated[list[Path] | None, typer.Argument(
        help="Bundle directories to serve (one index over all).")] = None,
    port: Annotated[int, typer.Option("--port", "-p", min=0, max=65535,
                                      help="Port to listen on (0: any free port).")] = 8080,
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    proxy: Annotated[bool, typer.Option(
        "--proxy", help="HTTP/HTTPS intercepting proxy (needs amber-eval\\[serve]): clients "
        "with hard-coded https://google.serper.dev and https://r.jina.ai run unchanged.")]
    = False,
    ca_dir: Annotated[Path | None, typer.Option(
        "--ca-dir", help="The proxy's CA, created once (default $AMBER_HOME/ca).")] = None,
    misses: Annotated[Path | None, typer.Option(
        "--misses", help="Append every request the bundles cannot answer here (JSONL).")]
    = None,
    strict: Annotated[bool, typer.Option(
        "--strict", help="Answer a reader request only from a capture with the same output "
        "options (else the nearest capture answers, marked X-Amber-Match: nearest).")]
    = False,
    print_env: Annotated[bool, typer.Option(
        "--print-env", help="Create the CA if needed, print the proxy's export lines, exit.")]
    = False,
    judge_ref: JudgeRef = None,
    judge_model: JudgeModel = None,
    judge_url: JudgeUrl = None,
    judge_name: JudgeName = None,
    judge_ctx: JudgeCtx = 4096,
    judge_concurrency: JudgeConcurrency = None,
    threads: Threads = None,
    seed: Seed = 0,
    ledger: LedgerPath = None,
    ledger_mode: LedgerMode = "reuse",
    pass_sampling: Annotated[bool, typer.Option(
        "--pass-sampling", help="Pass a client's temperature, top_p, top_k and seed to the "
        "judge (default: temperature 0 and --seed, the client's kept in the ledger).")]
    = False,
    max_tokens: Annotated[int, typer.Option(
        "--max-tokens", min=1, help="Answer length when a judge request sets none.")]
    = 1024,
    as_json: Annotated[bool, typer.Option(
        "--json", help="Start and stop reports as JSON lines instead of text.")] = False,
    record: Annotated[Path | None, typer.Option(
        "--record", help="Record instead of replaying: forward every request upstream "
        "(SERPER_BASE_URL, JINA_BASE_URL, OPENAI_BASE_URL, GEMINI_BASE_URL; default the "
        "real hosts) and write each exchange into this bundle.")] = None,
    allow_private_addresses: Annotated[bool, typer.Option(
        "--allow-private-addresses", help="With --record --proxy: let pages on loopback, "
        "private and link-local addresses be fetched (a local test site).")] = False,
) -> None:
    """Serve Serper searches, Jina Reader reads and captured pages from bundles.

    Nothing is ever fetched from outside: what a bundle did not capture is a miss.
    With a judge (--judge, --judge-model, --judge-url, or --ledger with --ledger-mode
    replay), the OpenAI Chat Completions and Gemini APIs are answered by it too, through
    its ledger, whatever model the client names.

    Example (a benchmark's own code, offline): amber serve bundle/ --proxy --port 8080
    --judge qwen2.5-7b --ledger judge.sqlite

    Example (base URLs): amber serve bundle/ --port 8080

    Example (hard-coded hosts): amber serve bundle/ --proxy --port 8080 --misses m.jsonl

    Example (client side): eval "$(amber serve --print-env --port 8080)"

    Example (record a pipeline's traffic): amber serve --record run.bundle --port 8080
    """
    from ambereval.engine.serve.ca import (
        base_url_env,
        ensure_ca,
        export_lines,
        proxy_env,
    )

    ca = ca_dir or _default_ca_dir()
    with handled():
        if print_env:
            if not port:
                fail("--print-env needs the port the proxy will listen on",
                     hint="amber serve --print-env --port 8080", exit_code=2)
            cert = ensure_ca(ca)
            _emit(export_lines(proxy_env(host, port, cert), keys=True))
            return
        if record is not None:  # --record: one hook, the session lives in serve_record
            from ambereval.cli.serve_record import serve_record

            serve_record(record, bundles, host, port, proxy, ca, allow_private_addresses,
                         as_json)
            return
        check_ledger_mode(ledger_mode)
        wants_judge = bool(judge_ref or judge_model or judge_url or ledger)
        if not bundles and not wants_judge:
            fail("no bundle and no judge given",
                 hint="amber serve BUNDLE... --port 8080 (add --judge NAME for the judge APIs)",
                 exit_code=2)
        from ambereval.engine.serve.index import FrozenWeb
        from ambereval.engine.serve.log import ServeLog
        from ambereval.engine.serve.server import BaseUrlServer, check_port_free, wait_for_signal
        from ambereval.netguard import install_offline_guard

        if proxy:
            from ambereval.engine.serve.proxy import require_mitmproxy

            require_mitmproxy()
        if port:
            check_port_free(host, port)
        web = FrozenWeb(bundles or [], strict=strict)
        judges = None
        if wants_judge:
            from ambereval.engine.serve.judges import open_service

            judges = open_service(judge_ref, judge_model, judge_url, judge_name, judge_ctx,
                                  judge_concurrency, threads, seed, ledger, ledger_mode,
                                  pass_sampling, max_tokens, _note)
        allowed = [host]
        if judge_url:  # a served judge on this machine or the local network
            from urllib.parse import urlsplit

            allowed.append(urlsplit(judge_url).hostname or host)
        install_offline_guard(allow=tuple(allowed))  # no other connection leaves
        log = ServeLog(misses)
        info: dict[str, Any] = {"event": "start", "mode": "proxy" if proxy else "base-url",
                                **web.summary(), "judge": judges.name if judges else None}

        def announce(env: list[tuple[str, str]], url: str) -> None:
            info.update(url=url, env=dict(env))
            if as_json:
                _emit(json.dumps(info, sort_keys=True) + "\n")
                return
            _emit(export_lines(env, keys=proxy))
            judged = f"; judge APIs answered by {judges.name}" if judges else ""
            _note(f"{len(web.bundles)} bundle(s): {info['searches']} searches, "
                  f"{info['reader_pages']} reader pages, {info['direct_responses']} direct "
                  f"responses{judged}; listening on {url} (Ctrl-C to stop)")
            for conflict in web.conflicts:
                _note(f"conflict: {conflict.line()}")

        stop: dict[str, Any] = {"event": "stop"}
        if proxy:
            from ambereval.engine.serve.proxy import run_proxy

            cert = ensure_ca(ca)
            refused = run_proxy(
                web, host, port, ca, log,
                lambda bound: announce(proxy_env(host, bound, cert), f"http://{host}:{bound}"),
                judges)
            stop["upstream_connections_refused"] = refused
        else:
            server = BaseUrlServer(web, host, port, log, judges=judges).start()
            announce(base_url_env(server.url, judges is not None or len(web.judges) > 0),
                     server.url)
            try:
                wait_for_signal()
            finally:
                server.stop()
        stop.update(log.summary())
        if judges is not None:
            stop["judge_api"] = judges.summary()
        if as_json:
            _emit(json.dumps(stop, sort_keys=True) + "\n")
            return
        line = f"stopped: {log.line()}"
        if judges is not None:
            j = stop["judge_api"]
            line += (f"; judge {j['judge']}: {j['answered']} answered ({j['from_ledger']} from "
                     f"the ledger), {j['not_in_ledger']} not in the ledger, {j['too_long']} "
                     f"too long for the context")
        if proxy:
            line += f"; {stop['upstream_connections_refused']} upstream connection attempts"
        _note(line)
