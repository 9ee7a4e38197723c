"""Cache busts, priced: what the prompt cache should have held at each call, against what it read.

The cache a call can read is the prefix earlier calls wrote or read: its
length, its model, when it was last used and its time to live (five minutes,
or an hour when it was written with one-hour breakpoints; a read refreshes
it). A call that reads markedly less than that prefix (:data:`TOLERANCE`) is a
**bust**, and its cause is named, first that fits:

1. the API's own ``cache_miss_reason`` (cache diagnostics), where the trace or
   the caller has it (the attribution below is still made, and checked against it);
2. ``model changed``: another model served the call;
3. ``TTL ran out``: longer than the TTL since the prefix was last used (timestamps);
4. ``compaction``: the previous reply compacted the history (a compaction block, or context edits the API applied);
5. ``system prompt changed`` / ``tools changed`` / ``message N changed``: a diff of the two requests (when they are
   given) or of the items the trace rebuilt, naming the first that differs;
6. ``unknown``: the prefix matched and was fresh, yet not read (the API may evict early).

Its price: the missed tokens were billed as cache writes or uncached input
where a hit would have read them; ``rebilled`` is what they cost, ``waste``
what they cost beyond the read they should have been.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..pricing import Prices, served_prices
from ._calls import Call, RunCalls, count, prices_of, run_calls, runs_of, usage_of

if TYPE_CHECKING:
    import pandas as pd

TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
TOLERANCE = 0.05
"""A read short of the expected prefix by more than this share of it (and by a token or more) is a bust."""

CAUSES = (
    "model changed",
    "TTL ran out",
    "compaction",
    "system prompt changed",
    "tools changed",
    "messages changed",
    "unknown",
)
API_REASONS = {
    "model_changed": "model changed",
    "system_changed": "system prompt changed",
    "tools_changed": "tools changed",
    "messages_changed": "messages changed",
}
"""The API's ``cache_miss_reason.type`` values and the cause each names here (``previous_message_not_found`` and
``unavailable`` name none: the attribution stands alone)."""

UNKNOWN = "the requests' shared prefix is unchanged and was fresh, yet not read (the API may evict early)"
UNSEEN = (
    "the prefix the trace rebuilt is unchanged and was fresh: an edit made by the model adapter or the agent shows "
    "only in the requests (pass requests= to name it)"
)

COLUMNS = (
    "run_id",
    "step",
    "t",
    "model",
    "expected_read",
    "read",
    "missed",
    "ttl",
    "since",
    "bust",
    "cause",
    "detail",
    "api_reason",
    "agrees",
    "rebilled",
    "waste",
)


@dataclass
class _Held:
    """The prefix the cache holds after a call: its length, model, last use, TTL, items covered, the call."""

    tokens: int
    model: str
    t: float
    ttl: str
    n_items: int
    call: int


def _request_diff(a: dict[str, Any] | None, b: dict[str, Any] | None) -> tuple[str, str] | None:
    """(cause, detail) of the first difference between two request bodies, in the cache's order (model, tools,
    system, messages); ``None`` when their shared prefix is the same."""
    if a is None or b is None:
        return None
    if a.get("model") != b.get("model"):
        return "model changed", f"{a.get('model')} -> {b.get('model')}"
    ta, tb = [_strip(t) for t in a.get("tools") or []], [_strip(t) for t in b.get("tools") or []]
    if ta != tb:
        na, nb = [t.get("name") for t in ta], [t.get("name") for t in tb]
        added, removed = [n for n in nb if n not in na], [n for n in na if n not in nb]
        changed = [n for n, x in zip(na, ta, strict=False) if n in nb and x != tb[nb.index(n)]]
        parts = [
            f"added {', '.join(map(str, added))}" if added else "",
            f"removed {', '.join(map(str, removed))}" if removed else "",
            f"changed {', '.join(map(str, changed))}" if changed else "",
            "reordered" if not (added or removed or changed) else "",
        ]
        return "tools changed", "; ".join(p for p in parts if p)
    if _strip(a.get("system")) != _strip(b.get("system")):
        return "system prompt changed", "the system prompt differs from the earlier request's"
    ma, mb = a.get("messages") or [], b.get("messages") or []
    for i, (x, y) in enumerate(zip(ma, mb, strict=False)):
        if _strip(x) != _strip(y):
            return "messages changed", f"message {i + 1} ({x.get('role') if isinstance(x, dict) else '?'}) changed"
    return None


def _strip(obj: Any) -> Any:
    """``obj`` without its ``cache_control`` marks (they do not change what is cached), a text sent as a plain
    string as the text block the API makes of it."""
    if isinstance(obj, str):
        return [{"type": "text", "text": obj}]
    if isinstance(obj, dict):
        out = {
            k: _strip(v) if k in ("content", "system") else _plain(v) for k, v in obj.items() if k != "cache_control"
        }
        return out
    if isinstance(obj, list):
        return [_strip(v) if isinstance(v, (dict, list)) else v for v in obj]
    return obj


def _plain(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items() if k != "cache_control"}
    if isinstance(obj, list):
        return [_plain(v) for v in obj]
    return obj


def _items_diff(run: RunCalls, held: _Held, call: Call) -> tuple[str, str] | None:
    """The first item of the held prefix that the call did not send as it was (the trace's own rebuilt history)."""
    now = run.items[: call.n_items]
    for it in run.items[: held.n_items]:
        if it.index >= len(now) or now[it.index].key != it.key:
            cause = {"system prompt": "system prompt changed", "tool definition": "tools changed"}.get(
                it.kind, "messages changed"
            )
            return cause, f"{it.label} (item {it.index}) changed"
    return None


def _thinking_dropped(run: RunCalls, held: _Held, call: Call) -> str | None:
    """At a new user turn (text, not tool results) the API leaves earlier turns' thinking blocks out of the
    prompt, so the cached prefix holds only up to the first reply with thinking."""
    new = run.items[held.n_items : call.n_items]
    if not any(it.kind == "user turn" for it in new):
        return None
    first = next((it for it in run.items[: held.n_items] if it.thinking), None)
    if first is None:
        return None
    return (
        f"a new user turn: the API drops earlier turns' thinking blocks, from {first.label!r} (item {first.index}) on"
    )


def _rebilled(call: Call, missed: float) -> tuple[float, float]:
    """(USD the missed tokens cost as billed, USD beyond reading them): they sit just after what was read."""
    rates = call.state_rates()
    if call.context <= 0:
        return 0.0, 0.0
    if rates is None or missed <= 0:
        return (0.0, 0.0) if rates is not None else (float("nan"), float("nan"))
    u = call.usage
    one_hour = min(u.cache_creation_1h_input_tokens, u.cache_creation_input_tokens)
    left = missed
    cost = 0.0
    for n, rate in (
        (one_hour, rates[3]),
        (u.cache_creation_input_tokens - one_hour, rates[2]),
        (u.input_tokens, rates[0]),
    ):
        take = min(left, n)
        cost += take * rate
        left -= take
    return cost, cost - (missed - left) * rates[1]


def busts_of(
    run: RunCalls,
    requests: Sequence[dict[str, Any] | None] | None = None,
    diagnostics: Sequence[dict[str, Any] | None] | None = None,
) -> list[dict[str, Any]]:
    """One row per call of ``run`` (see :func:`cache_busts`)."""
    rows: list[dict[str, Any]] = []
    held: _Held | None = None
    for j, call in enumerate(run.calls):
        u = call.usage
        read = u.cache_read_input_tokens
        expected = held.tokens if held else 0
        since = call.t_request - held.t if held else float("nan")
        missed = _missed(expected, read)
        bust = held is not None and missed > 0
        diag = diagnostics[j] if diagnostics is not None and j < len(diagnostics) else call.diagnostics
        reason = (diag or {}).get("cache_miss_reason") if isinstance(diag, dict) else None
        api_reason = reason.get("type") if isinstance(reason, dict) else None
        cause = detail = ""
        if bust and held is not None:
            req = requests[j] if requests is not None and j < len(requests) else None
            before = requests[held.call] if requests is not None and held.call < len(requests) else None
            previous = run.calls[j - 1] if j else None
            if call.model != held.model:
                cause, detail = "model changed", f"{held.model} -> {call.model}"
            elif since > TTL_SECONDS[held.ttl]:
                cause, detail = "TTL ran out", f"{since:,.0f} s since the prefix was last used (TTL {held.ttl})"
            elif previous is not None and previous.compaction:
                cause, detail = "compaction", f"step {previous.step}'s reply compacted the history"
            elif (dropped := _thinking_dropped(run, held, call)) is not None:
                cause, detail = "messages changed", dropped
            else:
                found = _request_diff(before, req) if req is not None else _items_diff(run, held, call)
                cause, detail = found or ("unknown", UNKNOWN if req is not None else UNSEEN)
        rebilled, waste = _rebilled(call, missed) if bust else (0.0, 0.0)
        mapped = API_REASONS.get(api_reason or "")
        rows.append(
            {
                "run_id": run.run_id,
                "step": call.step,
                "t": call.t_request,
                "model": call.model,
                "expected_read": expected,
                "read": read,
                "missed": missed,
                "ttl": held.ttl if held else None,
                "since": since,
                "bust": bust,
                "cause": cause or None,
                "detail": detail or None,
                "api_reason": api_reason,
                "agrees": None if mapped is None or not bust else mapped == cause,
                "rebilled": rebilled,
                "waste": waste,
            }
        )
        cached = _cached(u.cache_read_input_tokens, u.cache_creation_input_tokens)
        if cached > 0:
            ttl = "1h" if u.cache_creation_1h_input_tokens or (held and read and held.ttl == "1h") else "5m"
            held = _Held(cached, call.model, call.t, ttl, _covered(run, call, cached), j)
    return rows


def _missed(expected: int, read: int) -> int:
    """The tokens a call failed to read of the ``expected`` prefix, when that makes it a bust (else 0): short by a
    token or more, and by more than :data:`TOLERANCE` of the prefix."""
    missed = max(expected - read, 0)
    return missed if missed >= 1 and missed > TOLERANCE * expected else 0


def _cached(read: int, written: int) -> int:
    """The prefix the cache holds after a call that read and wrote these many tokens (0: it holds what it held
    before)."""
    return read + written


class WasteMeter:
    """A run's cache waste so far, from its events as they arrive: the rule :func:`cache_busts` applies to a
    finished trace, one call at a time, so a live view (the notebook panel) can show the total beside the cost.

    Feed it the ``run_started`` event's data (:meth:`started`: the run's model and prices), then each
    ``model_called``'s (:meth:`called`). ``total`` is the USD paid beyond what the cache should have read: the sum
    of :func:`cache_busts`' ``waste`` for the same events (NaN once a bust's model has no known price).
    """

    __slots__ = ("_base", "_held", "_model", "_prices", "busts", "total")

    def __init__(self) -> None:
        self.total = 0.0
        self.busts = 0
        self._held = 0
        self._model = ""
        self._base: Prices | None = None
        self._prices: dict[str, Prices | None] = {}

    def started(self, data: dict[str, Any]) -> None:
        """A run begins: its model and prices, nothing wasted yet and nothing cached to expect (a resumed run
        sends no ``run_started``: its cache and total carry on, as in its trace)."""
        self.total, self.busts, self._held = 0.0, 0, 0
        self._model = str(data.get("model") or "")
        self._base = prices_of(data)
        self._prices.clear()

    def called(self, data: dict[str, Any], step: int = 0, t: float = 0.0) -> float:
        """One reply's ``model_called`` data: the USD it wasted (0.0 when it read what the cache held)."""
        raw = data.get("usage")
        if not isinstance(raw, dict):
            return 0.0  # a lost or malformed reply: no usage, no call in cache_busts either
        read, written = count(raw, "cache_read_input_tokens"), count(raw, "cache_creation_input_tokens")
        missed = _missed(self._held, read)
        waste = 0.0
        if missed:  # the usage is read whole only for a bust: most calls need the two counts alone
            u = usage_of(raw, data.get("cache_write_by_ttl"))
            served = str(data.get("model") or self._model)
            if served not in self._prices:
                self._prices[served] = served_prices(self._base, self._model, served)
            call = Call(step, t, t, served, u, 0, self._prices[served], False, None)
            waste = _rebilled(call, missed)[1]
            self.total += waste
            self.busts += 1
        cached = _cached(read, written)
        if cached > 0:
            self._held = cached
        return waste

    @property
    def cache_used(self) -> bool:
        """Whether a call has read or written the prompt cache yet (before that, no call can have wasted it)."""
        return self._held > 0 or self.busts > 0


def _covered(run: RunCalls, call: Call, tokens: int) -> int:
    """How many of the call's items the cached prefix of ``tokens`` covers (by their sizes, scaled to the call)."""
    sizes = [it.tokens for it in run.items[: call.n_items]]
    total = sum(sizes) or 1
    scale = call.context / total
    at = 0.0
    for n, s in enumerate(sizes):
        at += s * scale
        if at > tokens + 0.5:
            return n
    return len(sizes)


def cache_busts(
    runs: Any,
    *,
    requests: Sequence[dict[str, Any] | None] | None = None,
    diagnostics: Sequence[dict[str, Any] | None] | None = None,
) -> pd.DataFrame:
    """One row per model call: what the prompt cache should have held, what the call read, and for a bust
    (``bust`` True) its ``cause``, ``detail`` and price (``rebilled``, ``waste`` in USD).

    ``runs`` is a Trace, Traces, a trace file or a list of them. For one run, ``requests`` (the request body of
    each call, in order: a proxy's log, ``MessagesServer.requests``) lets a changed system prompt, tool or early
    message be named by a diff of the requests; without them the trace's rebuilt history is diffed instead (it
    holds what the run added, so an edit made inside the model adapter cannot be seen there). ``diagnostics``
    (each reply's ``diagnostics`` object) or a ``diagnostics`` field the trace recorded gives the API's
    ``cache_miss_reason``: ``api_reason`` shows it and ``agrees`` whether the attribution names the same cause.
    The run's total is ``df.waste.sum()`` (:func:`cache_waste`).
    """
    import pandas as pd

    traces = runs_of(runs)
    if (requests is not None or diagnostics is not None) and len(traces) != 1:
        raise ValueError(f"requests/diagnostics describe one run's calls; got {len(traces)} runs")
    rows = [r for t in traces for r in busts_of(run_calls(t), requests, diagnostics)]
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    return df.astype({"bust": bool, "expected_read": "int64", "read": "int64", "missed": "int64"})


def cache_waste(runs: Any) -> pd.Series:
    """USD each run paid beyond what its cache should have read (the sum of its busts' ``waste``), by run id: NaN,
    not $0, for a run with a bust whose model has no known price."""
    df = cache_busts(runs)
    by_run = df.groupby("run_id", sort=False)["waste"]
    return by_run.sum().mask(by_run.apply(lambda w: bool(w.isna().any())))


def with_cache_waste(runs: Any) -> pd.DataFrame:
    """The runs frame of ``runs`` (a Traces, Trace, trace file or folder) with a ``cache_waste`` column beside
    ``cost``: USD each run paid beyond what its cache should have read (:func:`cache_waste`; 0.0 for a run with
    no model call, NaN where a bust's model has no known price).

    A derived column, not one of the trace's: the trace layer (and so the store) does not price, so it is added
    here, from the same events, by the one rule :func:`cache_busts` applies."""
    traces = runs_of(runs)
    frame = _runs_frame(runs, traces)
    waste = cache_waste(traces) if traces else None
    values = [0.0 if waste is None else float(waste.get(r, 0.0)) for r in frame["run_id"]]
    out = frame.copy()
    out.insert(list(out.columns).index("cost") + 1, "cache_waste", values)
    return out


def _runs_frame(runs: Any, traces: list[Any]) -> pd.DataFrame:
    """The runs frame as loaded (a Traces' own, store-read or not), else built from the traces."""
    frame = getattr(runs, "runs", None)
    if frame is not None and hasattr(frame, "columns"):
        return frame
    from ..trace.runs import Traces

    return Traces(traces).runs
