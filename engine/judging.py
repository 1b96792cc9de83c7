"""Judge pieces shared by the protocols: checklists, count->score tables, pairwise games,
rubric scores and item lists. Every call goes through the one Judge (and its ledger); each
result carries the ledger key that produced it.

Report first: every report-level call has the same system line and the report as the
first thing in the user message, the criterion's instructions and question after it
(layout ``report-first-v1``), so every criterion asked of one report shares the report as
a prompt prefix (llama.cpp reuses its KV cache; a server's prefix cache does the same).
Long reports are clipped to ``max_chars`` at a paragraph boundary; the clip is recorded
with the result.

Cost rule: the prompt is cheap (prefix reuse), generated tokens are not. Every schema
asks for the decision only, and every free-text field that remains is bounded; nothing
is generated that a score does not use (no free-text reasons: an item's reason is
written only when the judge's answer was unusable).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from ambereval.engine.tasks import ChecklistItem
from ambereval.errors import ModelError
from ambereval.models import Judge

T = TypeVar("T")
COUNT_TABLE = ((0, 0, 100), (1, 2, 90), (3, 4, 80), (5, 6, 70), (7, 8, 60), (9, 10, 50),
               (11, 12, 40), (13, 14, 30), (15, 17, 20))
DEFAULT_MAX_CHARS = 12_000
LIST_ITEM_CHARS = 60


def count_to_score(count: int) -> int:
    """LiveResearchBench's mapping of a problem count to a 0-100 score."""
    if count < 0:
        raise ValueError("count must be >= 0")
    for low, high, score in COUNT_TABLE:
        if low <= count <= high:
            return score
    return 10


@dataclass(frozen=True)
class Clipped:
    text: str
    cut_chars: int


def clip(text: str, max_chars: int = DEFAULT_MAX_CHARS) -> Clipped:
    """The first ``max_chars`` characters, cut back to the last paragraph break."""
    if len(text) <= max_chars:
        return Clipped(text, 0)
    head = text[:max_chars]
    cut = head.rfind("\n\n")
    head = head[:cut] if cut > max_chars // 2 else head
    return Clipped(head + "\n\n[...]", len(text) - len(head))


#: the one system line of every report-level call: with it, the report is the first
#: thing that differs between two reports' prompts and the last thing two criteria share
REPORT_SYSTEM = (
    "You assess a research report. The report comes first; after it come the criterion to "
    "apply and what to answer. Follow the criterion exactly."
)


def _messages(system: str, report: Clipped, ask: str, label: str = "Report") -> list[dict]:
    """Report first, then the criterion's instructions (``system``) and the question, so
    every criterion asked of one report shares the report as a prompt prefix."""
    return [{"role": "system", "content": REPORT_SYSTEM},
            {"role": "user", "content": f"{label}:\n{report.text}\n\n{system}\n\n{ask}"}]


def _call(judge: Judge, messages: list[dict], schema: dict[str, Any],
          max_tokens: int) -> tuple[dict[str, Any] | None, str, str | None]:
    """(answer, ledger key, error). A judge that cannot produce schema-valid JSON for one
    item does not sink the run: the item is recorded with the error."""
    try:
        answer = judge.ask(messages, schema, max_tokens=max_tokens)
    except ModelError as err:
        return None, judge.key(messages, schema, max_tokens), str(err)
    return answer.obj, answer.key, None


CHECK_SYSTEM = (
    "You grade a research report against one requirement at a time. Answer pass only if "
    "the report's body fully meets it: the requested data is actually given (placeholders, "
    "a method to find it, or 'data not available' do not count; section titles alone do "
    "not count). Otherwise answer fail."
)
CHECK_SCHEMA = {"type": "object", "properties": {"pass": {"type": "boolean"}},
                "required": ["pass"], "additionalProperties": False}
DECISION_TOKENS = 24  # {"pass": false} takes 8-10 tokens; the cap costs nothing unused


CHECKS_ASK = ("Judge each requirement on its own, and answer for every number: true for "
              "pass, false for fail.")


def answer_numbers(n: int) -> list[str]:
    """The numbers ``1``..``n`` of a prompt's items, as written in the prompt and as its
    answer's keys, zero-padded to one width (``01``..``12``). A request is canonical JSON,
    so a constrained judge writes the schema's keys sorted as strings: unpadded, a
    twelve-item answer would go 1, 10, 11, 12, 2, ... and a small judge answers by place."""
    width = len(str(n))
    return [str(i).zfill(width) for i in range(1, n + 1)]


def check_groups(items: list[T], per_prompt: int | None) -> list[list[T]]:
    """``items`` in order, cut into prompts of ``per_prompt`` (None: all in one), the last
    one shorter, as DR3-Eval's reference batches them: 6 by 5 -> 5, 1."""
    size = per_prompt or max(len(items), 1)
    return [items[at : at + size] for at in range(0, len(items), size)]


def judge_checklist(judge: Judge, report: Clipped, items: list[ChecklistItem],
                    system: str = CHECK_SYSTEM,
                    per_prompt: int | None = 1) -> list[dict[str, Any]]:
    """One binary verdict per item, with its ledger key (and the error, if any).
    ``per_prompt`` items are asked in one prompt (None: all of them): numbered, one
    answer per number; an item asked with others records where its answer is (``asked``:
    its number ``item`` of the prompt's ``of``). A prompt of one item is the one-item
    prompt, whatever ``per_prompt``."""
    out = []
    for group in check_groups(items, per_prompt):
        if len(group) == 1:
            messages = _messages(system, report, f"Requirement: {group[0].text}")
            obj, key, error = _call(judge, messages, CHECK_SCHEMA, DECISION_TOKENS)
            verdicts = [bool(obj and obj["pass"])]
        else:
            numbers = answer_numbers(len(group))
            listing = "\n".join(f"{n}. {item.text}"
                                 for n, item in zip(numbers, group, strict=True))
            schema = {"type": "object", "properties": {n: {"type": "boolean"} for n in numbers},
                      "required": numbers, "additionalProperties": False}
            messages = _messages(system, report, f"Requirements:\n{listing}\n\n{CHECKS_ASK}")
            obj, key, error = _call(judge, messages, schema, 8 + 8 * len(group))
            verdicts = [bool(obj and obj[n]) for n in numbers]
        for n, (item, verdict) in enumerate(zip(group, verdicts, strict=True), start=1):
            row: dict[str, Any] = {"id": item.id, "text": item.text, "pass": verdict,
                                   "ledger_key": key}
            if len(group) > 1:
                row["asked"] = {"item": n, "of": len(group)}
            if error:
                row["error"] = error
            out.append(row)
    return out


def judge_choice(judge: Judge, system: str, report: Clipped, ask: str, values: list[Any],
                 label: str = "Report") -> tuple[Any, str, str]:
    """A rubric score from a fixed set (e.g. 0/0.5/1 or 1..10); -> (value, reason, key).
    The judge gives the score only (reason ``""``); an unusable answer scores the lowest
    value, its reason saying why."""
    kind = "integer" if all(isinstance(v, int) for v in values) else "number"
    schema = {"type": "object", "properties": {"score": {"type": kind, "enum": values}},
              "required": ["score"], "additionalProperties": False}
    obj, key, error = _call(judge, _messages(system, report, ask, label), schema,
                            DECISION_TOKENS)
    if obj is None:
        return min(values), f"judge error: {error}", key
    return obj["score"], "", key


def judge_list(judge: Judge, system: str, report: Clipped, ask: str,
               max_items: int = 20) -> tuple[list[str] | None, str]:
    """A list of short findings (contradictions, uncited claims); -> (items, key).
    ``None`` when the judge could not answer (the dimension is then null, not 100).
    ``max_items`` stays above 18 so every row of the count table can be reached. The score
    is the count; each finding is bounded to ``LIST_ITEM_CHARS`` (enough to name it)."""
    schema = {"type": "object", "properties": {
        "items": {"type": "array", "maxItems": max_items,
                  "items": {"type": "string", "maxLength": LIST_ITEM_CHARS}}},
        "required": ["items"], "additionalProperties": False}
    obj, key, _ = _call(judge, _messages(system, report, ask), schema,
                        LIST_ITEM_CHARS * max_items // 2 + 32)
    if obj is None:
        return None, key
    items = [i.strip() for i in obj["items"] if i.strip()]
    return list(dict.fromkeys(items)), key


DEPTH_SYSTEM = (
    "You compare two research reports written for the same request, judging analysis depth "
    "only (not length or style). Score each report 0-5 on five criteria: granularity of "
    "reasoning, multi-layered insight, critical evaluation of sources and claims, "
    "analytical use of evidence, and density of insight."
)
DEPTH_CRITERIA = ("granularity", "layers", "critical", "evidence", "density")


def pairwise_depth(judge: Judge, query: str, target: str, baseline: str,
                   max_chars: int = 6000, tie_margin: int = 1) -> dict[str, Any]:
    """Two games (target first, then baseline first); a game is a tie when the totals
    differ by at most ``tie_margin``. Win rate excludes ties (null with no decisive game);
    a game whose call failed is left out [our rule ``depth_game_error=drop-game``]."""
    scores = {"type": "object", "properties": {
        c: {"type": "integer", "enum": [0, 1, 2, 3, 4, 5]} for c in DEPTH_CRITERIA},
        "required": list(DEPTH_CRITERIA), "additionalProperties": False}
    schema = {"type": "object", "properties": {"report_1": scores, "report_2": scores},
              "required": ["report_1", "report_2"], "additionalProperties": False}
    a, b = clip(target, max_chars), clip(baseline, max_chars)
    games = []
    for order, first, second in (("target_first", a, b), ("baseline_first", b, a)):
        # the first report leads, as in every report-level prompt (prefix reuse)
        messages = [{"role": "system", "content": REPORT_SYSTEM},
                    {"role": "user", "content": f"Report:\n{first.text}\n\nSecond report:\n"
                                                f"{second.text}\n\n{DEPTH_SYSTEM}\n\n"
                                                f"Request: {query}\nScore the first report as "
                                                "report_1 and the second as report_2."}]
        obj, key, error = _call(judge, messages, schema, 200)
        if obj is None:
            games.append({"order": order, "outcome": "error", "error": error,
                          "ledger_key": key})
            continue
        t_scores, b_scores = ((obj["report_1"], obj["report_2"]) if order == "target_first"
                              else (obj["report_2"], obj["report_1"]))
        t_total, b_total = sum(t_scores.values()), sum(b_scores.values())
        outcome = ("tie" if abs(t_total - b_total) <= tie_margin
                   else "win" if t_total > b_total else "loss")
        games.append({"order": order, "target": t_total, "baseline": b_total,
                      "outcome": outcome, "ledger_key": key})
    wins = sum(1 for g in games if g["outcome"] == "win")
    losses = sum(1 for g in games if g["outcome"] == "loss")
    return {"games": games, "wins": wins, "losses": losses,
            "ties": sum(1 for g in games if g["outcome"] == "tie"),
            "win_rate": win_rate(wins, losses),
            "clipped_chars": a.cut_chars + b.cut_chars}


def win_rate(wins: int, losses: int) -> float | None:
    """wins / (wins + losses) × 100; null (never 0) without a decisive game."""
    return 100.0 * wins / (wins + losses) if wins + losses else None


def checklist_score(rows: list[dict[str, Any]], on_error: str = "exclude",
                    total: int | None = None) -> float | None:
    """100 × passes / items of judged checklist ``rows`` (``pass``, and ``error`` when the
    call failed); ``total``: the denominator when it is fixed (presentation's 10 items,
    some of which the parser decided). Errored items, by ``on_error``: ``exclude`` them
    from the denominator (DR3-Eval's reference), ``null-dimension`` (any error makes the
    score null: the reference drops the report from the criterion) or ``fail``. With
    every item errored the score is null whatever the rule."""
    errors = sum(1 for r in rows if r.get("error"))
    denominator = len(rows) if total is None else total
    if not rows or errors == len(rows) or (errors and on_error == "null-dimension"):
        return None
    if on_error == "exclude":
        denominator -= errors
    passes = sum(1 for r in rows if r.get("pass") and not r.get("error"))
    return round(100.0 * passes / denominator, 4) if denominator else None
