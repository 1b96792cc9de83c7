"""Command examples in the documentation that are produced by running them.

A console block preceded by an ``example`` comment is an example::

    <!-- example tour -->
    ```console
    $ amber bundle verify bundle/
    ok: ...
    ```

Every ``$`` line is run with bash in the session's working directory and the lines after
it are replaced by what it printed (stdout and stderr, in the order written), normalised
(the working directory becomes ``.``). Where a rerun's output differs from the
documented one only in what changes between identical runs (times, random record ids,
durations, a compressed size by a few bytes: ``same_output``), the documented text is
kept, so the text shows one real run and regenerating changes nothing.

The comment may hold hidden set-up commands, run but not shown::

    <!-- example tour
    $ amber snapshot claims claims.jsonl --out bundle/
    -->

A *session* is every example of one name in one file, run in document order in a fresh
directory holding ``claims.jsonl``, ``report.md`` and ``tasks.json``, while loopback fakes
of Serper, Jina Reader and a small web site answer on fixed ports (so URLs, judge prompts
and ledger keys are the same on every run). ``slow`` on any comment of a session marks it
as one that loads the judge (``tests/test_docs.py`` runs it with the slow tests). A
command that exits non-zero fails the run unless the example shows it
(``... || echo "exit $?"``).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fakeweb import FakeWeb, _handler  # noqa: E402

# Fixed loopback ports for the fakes: a page's URL is part of the judge's prompt.
PORTS = {"origin": 47801, "serper": 47802, "jina": 47803}

EXAMPLE = re.compile(
    r"<!-- example (?P<session>[\w-]+)(?P<flags>[^\n]*?)(?:\n(?P<hidden>(?:\$ [^\n]*\n)*))?"
    r"-->\n(?:```console\n(?P<body>.*?)```\n)?", re.S)

# What changes from run to run although nothing Amber does changed: times, random record
# ids, digests of random bytes, durations, WARC offsets (concurrent captures finish in any
# order). An output that differs from the documented one only there, or in a large count
# within 1% (a WARC's gzip size moves by a few bytes with its random record ids), is the
# same output: the documented text, taken from a real run, is kept.
VOLATILE = re.compile(
    r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?"  # ISO timestamps
    r"|(?<=amber-)\d{14}(?=-)"  # WARC file names
    r"|(?<=urn:uuid:)[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    r"|(?<=sha256)[: ]?[0-9a-f]{64}"  # digests of random bytes (a new key, a new zip)
    r"|(?<=\.warc\.gz @ )\d+|(?m:(?<=^offset: )\d+)"  # WARC offsets
    r"|\b\d+(?:\.\d+)?(?= ?(?:s|ms)\b)"  # durations
    r"|\b\d+(?:\.\d+)?(?= ?(?:tok/s|calls/s|pages/s|MB/s|req/s)\b)")  # rates
NUMBER = re.compile(r"\d+(?:\.\d+)?")
TOLERANCE = 0.01


def _skeleton(line: str) -> tuple[str, list[str]]:
    line = VOLATILE.sub("~", line)
    return NUMBER.sub("#", line), NUMBER.findall(line)


def _close(a: str, b: str) -> bool:
    if a == b:
        return True
    if "." in a or "." in b or min(int(a), int(b)) < 1000:
        return False
    return abs(int(a) - int(b)) <= TOLERANCE * max(int(a), int(b))


def same_output(documented: str, produced: str) -> bool:
    """Whether ``produced`` is ``documented`` up to what varies between identical runs."""
    old, new = documented.splitlines(), produced.splitlines()
    if len(old) != len(new):
        return False
    for a, b in zip(old, new, strict=True):
        (skel_a, nums_a), (skel_b, nums_b) = _skeleton(a), _skeleton(b)
        if skel_a != skel_b or not all(map(_close, nums_a, nums_b)):
            return False
    return True


@dataclass
class Example:
    """One marked block: where it is, its hidden and shown commands."""

    start: int
    end: int
    session: str
    slow: bool
    hidden: list[str]
    shown: list[str] | None  # None: a comment without a block (set-up only)


@dataclass
class Session:
    path: Path
    name: str
    examples: list[Example] = field(default_factory=list)

    @property
    def slow(self) -> bool:
        return any(e.slow for e in self.examples)

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.name}"


def _commands(text: str) -> list[str]:
    return [line[2:] for line in text.splitlines() if line.startswith("$ ")]


def parse(path: Path) -> list[Session]:
    """The example sessions of one Markdown file, in document order."""
    sessions: dict[str, Session] = {}
    for match in EXAMPLE.finditer(path.read_text(encoding="utf-8")):
        body = match.group("body")
        example = Example(match.start(), match.end(), match.group("session"),
                          "slow" in match.group("flags").split(),
                          _commands(match.group("hidden") or ""),
                          None if body is None else _commands(body))
        sessions.setdefault(example.session, Session(path, example.session)).examples.append(
            example)
    return list(sessions.values())


def documents() -> list[Path]:
    """Every Markdown file whose examples are run: the README and the site's pages."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def all_sessions() -> list[Session]:
    return [s for path in documents() for s in parse(path)]


class DocsWeb(FakeWeb):
    """The fake web of the tests, on fixed ports."""

    def start(self) -> None:
        for service in ("origin", "serper", "jina"):
            server = _bind(service, self)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            self._servers[service] = server


def _bind(service: str, web: FakeWeb) -> ThreadingHTTPServer:
    deadline = time.monotonic() + 30  # another docs run may be finishing with the port
    while True:
        try:
            server = ThreadingHTTPServer(("127.0.0.1", PORTS[service]), _handler(web, service))
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit(f"gen_docs: port {PORTS[service]} on 127.0.0.1 is busy "
                                 f"(the docs' fake {service} needs it)") from None
            time.sleep(0.5)
            continue
        server.daemon_threads = True
        return server


def _fixture(work: Path, web: FakeWeb) -> None:
    claims = [
        {"id": "c1", "text": "The Eiffel Tower was completed in 1889.",
         "urls": [web.url("/pages/eiffel.html")],
         "queries": ["When was the Eiffel Tower completed?"]},
        {"id": "c2", "text": "China is the largest producer of tea.",
         "queries": ["largest tea producer"]},
    ]
    (work / "claims.jsonl").write_text("".join(json.dumps(c) + "\n" for c in claims),
                                       encoding="utf-8")
    report = (ROOT / "tests" / "fixtures" / "report.md").read_text(encoding="utf-8")
    (work / "report.md").write_text(report.replace("{ORIGIN}", web.origin_url),
                                    encoding="utf-8")
    task = {"id": "landmarks", "report": "report.md",
            "query": "Which landmarks of Western Europe matter, and what are their key facts?",
            "checklist": [
                {"id": "k1", "text": "Does the report say when the Eiffel Tower was completed?",
                 "category": "topic"},
                {"id": "k2", "text": "Does the report give the length of the Rhine?",
                 "category": "topic"}]}
    (work / "tasks.json").write_text(
        json.dumps({"format": "amber-task/1", "tasks": [task]}, indent=2) + "\n",
        encoding="utf-8")


def _env(work: Path, web: FakeWeb) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SERPER_", "JINA_", "AMBER_", "HF_", "COLUMNS", "LINES"))}
    env.update(web.env())
    env.update({
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        "AMBER_HOME": str(work / ".amber-home"),
        "AMBER_ALLOW_PRIVATE_ADDRESSES": "1",  # the fake site lives on 127.0.0.1
        "HF_HUB_OFFLINE": "1", "COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb",
        "TZ": "UTC", "LC_ALL": "C.UTF-8", "PYTHONHASHSEED": "0",
    })
    return env


def normalise(text: str, work: Path) -> str:
    text = text.replace(str(work / ".amber-home"), "~/.local/share/amber")
    text = text.replace(str(work) + "/", "").replace(str(work), ".")
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) + ("\n" if lines else "")


class ExampleFailed(Exception):
    """A documented command exited non-zero without the example showing it."""


def _run(command: str, work: Path, env: dict[str, str]) -> str:
    done = subprocess.run(["bash", "-c", command], cwd=work, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=1800)
    if done.returncode != 0:
        raise ExampleFailed(f"`{command}` exited {done.returncode}:\n{done.stdout}")
    return normalise(done.stdout, work)


def _start(command: str, work: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], Path]:
    """Start ``command &`` in the background; return once it printed its first line."""
    log = work.parent / f"background-{time.monotonic_ns()}.log"
    with log.open("w") as sink:
        process = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=work, env=env,
                                   text=True, stdout=sink, stderr=subprocess.STDOUT)
    deadline, seen, quiet_since = time.monotonic() + 60, "", time.monotonic()
    while process.poll() is None:  # wait for its first lines, then half a second of quiet
        now, text = time.monotonic(), log.read_text()
        if text != seen:
            seen, quiet_since = text, now
        elif "\n" in text and now - quiet_since > 0.5:
            break
        if now > deadline:
            process.kill()
            raise ExampleFailed(f"`{command} &` printed nothing in 60 s")
        time.sleep(0.1)
    return process, log


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def run_session(session: Session) -> dict[int, list[tuple[str, str]]]:
    """Run a session: each example's (command, output) pairs, by the example's start.

    ``COMMAND &`` runs in the background (its output so far is shown under it) and
    ``kill -INT %1`` stops the latest one (its remaining output is shown under that)."""
    blocks: dict[int, list[tuple[str, str]]] = {}
    background: list[tuple[subprocess.Popen[str], Path, int]] = []
    with tempfile.TemporaryDirectory(prefix="amber-docs-") as tmp, DocsWeb() as web:
        work = Path(tmp) / "work"
        work.mkdir()
        _fixture(work, web)
        env = _env(work, web)
        try:
            for example in session.examples:
                pairs: list[tuple[str, str]] = []
                for command, shown_here in [*((c, False) for c in example.hidden),
                                            *((c, True) for c in example.shown or [])]:
                    if command.endswith(" &"):
                        process, log = _start(command[:-2], work, env)
                        shown = log.read_text()
                        background.append((process, log, len(shown)))
                        output = normalise(shown, work)
                    elif command == "kill -INT %1" and background:
                        process, log, seen = background.pop()
                        _stop(process)
                        output = normalise(log.read_text()[seen:], work)
                    else:
                        output = _run(command, work, env)
                    if shown_here:
                        pairs.append((command, output))
                if example.shown is not None:
                    blocks[example.start] = pairs
        finally:
            for process, _log, _seen in background:
                _stop(process)
    return blocks


def _documented(body: str) -> list[tuple[str, str]]:
    """A console block's (command, output) pairs."""
    pairs: list[tuple[str, str]] = []
    for line in body.splitlines(keepends=True):
        if line.startswith("$ "):
            pairs.append((line[2:].rstrip("\n"), ""))
        elif pairs:
            pairs[-1] = (pairs[-1][0], pairs[-1][1] + line)
    return pairs


def _block(documented: str, produced: list[tuple[str, str]]) -> str:
    """The block's new text: each command's documented output where the produced one is
    the same (see ``same_output``), else the produced one."""
    old = dict(_documented(documented))
    out = []
    for command, output in produced:
        if command in old and same_output(old[command], output):
            output = old[command]
        out.append(f"$ {command}\n{output}")
    return "".join(out)


def render(path: Path, blocks: dict[int, list[tuple[str, str]]]) -> str:
    """The file with every example block given in ``blocks`` rewritten."""
    text = path.read_text(encoding="utf-8")
    out, last = [], 0
    for match in EXAMPLE.finditer(text):
        if match.start() not in blocks:
            continue
        head = text[match.start():match.start("body")]
        out += [text[last:match.start()], head,
                _block(match.group("body"), blocks[match.start()]), "```\n"]
        last = match.end()
    out.append(text[last:])
    return "".join(out)


def regenerate(sessions: list[Session]) -> Iterator[tuple[Path, str, str]]:
    """(path, current text, regenerated text) per file with examples among ``sessions``."""
    by_path: dict[Path, dict[int, list[tuple[str, str]]]] = {}
    for session in sessions:
        by_path.setdefault(session.path, {}).update(run_session(session))
    for path, blocks in by_path.items():
        yield path, path.read_text(encoding="utf-8"), render(path, blocks)

