"""An image or PDF a tool returns is stored once per run beside the trace, by reference, and read back whole:
frames, messages_at, replay and fork see (and send back to the API) the real bytes.

Real ``anthropic`` SDK against the local Messages API server; the image block is the shape
``tool_result.content`` accepts (``ImageBlockParam`` with a ``Base64ImageSourceParam``, anthropic 2.16 types).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import random

import pytest

import agentlab as al
from agentlab.models.anthropic import AnthropicModel
from agentlab.testing import MessagesServer
from agentlab.trace._blobs import BLOB_MIN_CHARS, BlobStore, MissingBlobWarning

PNG = b"\x89PNG\r\n\x1a\n" + random.Random(25).randbytes(96 * 1024)  # a 96 KB "image"
"""Small enough that the test server's token estimate (it counts the base64 as text, where the API counts an
image's pixels) stays inside the context window the usage check holds a reply to."""
DATA = base64.b64encode(PNG).decode("ascii")
IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": DATA}}
KEY = "sk-ant-api03-Zq8vK2mP4xR7tY1uW3eN6bH9cJ0dL5fG8hA2sD4fG6hJ8kL0zX2cV4bN6mQ8wE0rT2y-AbCdEfAA"


@al.tool(mode="read")
def chart(page: int = 1) -> list:
    """Draw the chart of one page."""
    return [{"type": "text", "text": f"Page {page}:"}, IMAGE]


def images_in(messages):
    return [
        part["source"]
        for m in messages
        if isinstance(m.get("content"), list)
        for block in m["content"]
        if block.get("type") == "tool_result" and isinstance(block.get("content"), list)
        for part in block["content"]
        if part.get("type") == "image"
    ]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A run whose tool returns the same 96 KB image at steps 1 and 2, traced to a folder."""
    folder = tmp_path_factory.mktemp("runs")
    script = [al.reply(None, ("chart", {"page": 1})), al.reply(None, ("chart", {"page": 2})), al.reply("Two charts.")]
    with MessagesServer(script) as server:
        result = al.run(
            "Show me both pages",
            [chart],
            model=AnthropicModel(client=server.client()),
            trace=folder,
            max_cost=None,
            clock=al.FakeClock(),
        )
        sent = [r.body for r in server.requests if r.path == "/v1/messages"]
    assert isinstance(result, al.Done), result
    return folder, result, sent


def test_an_image_returned_twice_is_stored_once_beside_the_trace(recorded):
    folder, result, _ = recorded
    log = folder / f"{result.run_id}.jsonl"
    blobs = list((folder / f"{result.run_id}.blobs").iterdir())
    assert [b.name for b in blobs] == [hashlib.sha256(PNG).hexdigest()] and blobs[0].read_bytes() == PNG
    text = log.read_text()
    assert DATA[:64] not in text and log.stat().st_size < 20_000  # the log refers to it; 128 KB of base64 twice before
    results = [json.loads(line) for line in text.splitlines() if '"tool_results"' in line]
    sources = [r["content"][0]["content"][1]["source"] for r in results]
    assert (
        sources
        == [{"type": "base64", "media_type": "image/png", "$ref": f"sha256:{blobs[0].name}", "bytes": len(PNG)}] * 2
    )


def test_the_next_request_carries_the_image_itself(recorded):
    _, _, sent = recorded
    assert [s["data"] for s in images_in(sent[1]["messages"])] == [DATA]
    assert [s["data"] for s in images_in(sent[2]["messages"])] == [DATA, DATA]


def test_frames_and_messages_read_the_image_back_whole(recorded):
    folder, result, sent = recorded
    trace = al.load_run(result.run_id, folder)
    assert images_in(trace.messages_at(3)) == images_in(sent[2]["messages"]) == [IMAGE["source"]] * 2
    events = al.load_runs(folder).events
    data = events[events["kind"] == "tool_results"]["data"].tolist()
    assert [d["content"][0]["content"][1] for d in data] == [IMAGE, IMAGE]


def test_replay_and_fork_send_the_real_bytes(recorded):
    folder, result, _ = recorded
    trace = al.load_run(result.run_id, folder)
    replayed = asyncio.run(al.replay(trace).run())  # a Run writes no trace unless given a writer
    assert isinstance(replayed, al.Done) and [s["data"] for s in images_in(replayed.messages)] == [DATA, DATA]
    with MessagesServer([al.reply("Forked.")]) as server:
        forked = asyncio.run(al.fork(trace, 2, model=AnthropicModel(client=server.client()), max_cost=None).run())
        body = server.requests[-1].body
    assert isinstance(forked, al.Done) and [s["data"] for s in images_in(body["messages"])] == [DATA, DATA]


def test_text_beside_an_image_is_still_redacted(tmp_path):
    @al.tool(mode="read")
    def leaky() -> list:
        """Return a key beside an image."""
        return [{"type": "text", "text": f"key={KEY}"}, IMAGE]

    with MessagesServer([al.reply(None, ("leaky", {})), al.reply("Done.")]) as server:
        result = al.run("Go", [leaky], model=AnthropicModel(client=server.client()), trace=tmp_path, max_cost=None)
    log = (tmp_path / f"{result.run_id}.jsonl").read_bytes()
    assert KEY.encode() not in log and b'"$ref"' in log


def test_a_missing_payload_is_a_warning_and_the_reference_stays(recorded, tmp_path):
    folder, result, _ = recorded
    copy = tmp_path / f"{result.run_id}.jsonl"
    copy.write_bytes((folder / copy.name).read_bytes())  # the log without its .blobs folder
    with pytest.warns(MissingBlobWarning, match="stored payload"):
        trace = al.load_run(result.run_id, tmp_path)
    assert images_in(trace.messages)[0]["$ref"].startswith("sha256:")


def test_only_canonical_base64_is_stored_by_reference(tmp_path):
    store = BlobStore(tmp_path)
    small = {"type": "base64", "media_type": "image/png", "data": DATA[: BLOB_MIN_CHARS - 4]}
    wrapped = {"type": "base64", "media_type": "image/png", "data": DATA[:8000] + "\n" + DATA[8000:16000]}
    record = {"kind": "tool_results", "content": [{"source": small}, {"source": wrapped}]}
    assert store.externalize("r1", record) is record and not (tmp_path / "r1.blobs").exists()


def test_a_run_with_images_reads_back_the_same_from_the_store_and_its_log(tmp_path):
    """The store holds the image itself, as the log's reader gives it back (never the reference): the frames are
    the same either way, and SQL over the store reads the image's base64 in ``events.data``."""
    from agentlab.trace import compact

    from .trace_fixtures import assert_same_frames, from_logs

    folder = tmp_path / "runs"
    script = [al.reply(None, ("chart", {"page": 1})), al.reply(None, ("chart", {"page": 2})), al.reply("Two.")]
    al.run("Both pages", [chart], model=al.ScriptedModel(script), trace=folder, max_cost=None, clock=al.FakeClock())
    assert '"$ref"' in next(folder.glob("*.jsonl")).read_text()  # the log refers to the image
    compact(folder)
    stored = al.load_runs(folder)
    assert set(stored.sources.values()) == {"store"}
    assert_same_frames(from_logs(folder), stored)
    data = stored.events[stored.events["kind"] == "tool_results"]["data"].tolist()
    assert [d["content"][0]["content"][1] for d in data] == [IMAGE, IMAGE]
    texts = al.sql("select data from events where kind = 'tool_results'", folder, compact=False)["data"]
    assert len(texts) == 2 and all(DATA in t and '"$ref"' not in t for t in texts)
