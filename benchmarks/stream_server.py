"""A Messages API server in its own process, for the streaming benchmark.

In the benchmark's process the server thread would compete with the client
for the GIL (a thread switch waits up to 5 ms), which is not what a client of
the real API sees. This process serves ``count`` copies of one reply (text of
``chars`` characters in fragments of ``chunk``), prints its URL, then one line
per stream: the ``time.perf_counter()`` at which its first fragment was
written (CLOCK_MONOTONIC, comparable across processes on Linux).
"""

from __future__ import annotations

import sys
import time


def main(chars: int, chunk: int, count: int) -> None:
    from agentlab.testing import MessagesServer, reply, streamed

    text = ("the parcel left the depot and reached the sorting centre before noon " * (chars // 60 + 1))[:chars]
    item = streamed({**reply(text), "usage": {"input_tokens": 20, "output_tokens": chars // 3}}, chunk=chunk)
    with MessagesServer([item] * count, cache=False) as server:
        print(server.url, flush=True)
        shown = 0
        while server.pending or shown < len(server.first_delta_sent):
            while shown < len(server.first_delta_sent):
                print(repr(server.first_delta_sent[shown]), flush=True)
                shown += 1
            time.sleep(0.001)
            if sys.stdin.closed:
                break


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
