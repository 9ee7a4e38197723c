"""A Messages API server in its own process, for the streaming benchmark.

In the benchmark's process the server thread would compete with the client
for the GIL (a thread switch waits up to 5 ms), which is not what a client of
the real API sees. This process serves ``count`` requests alternately streamed
and whole, one reply (text of ``chars`` characters in fragments of ``chunk``),
prints its URL, then one line per finished stream: the ``time.perf_counter()``
at which its first fragment was written (CLOCK_MONOTONIC, comparable across
processes on Linux).

With ``pause`` > 0 the stream's events are ``pause`` seconds apart, as the API
spaces them while it generates, and the whole reply that follows each stream
is held back for as long as that stream took to send: both replies then take
the same generation time, and what is left between them is the client's cost.
"""

from __future__ import annotations

import sys
import time


def main(chars: int, chunk: int, count: int, pause: float = 0.0) -> None:
    from agentlab.testing import MessagesServer, reply, slow, streamed

    text = ("the parcel left the depot and reached the sorting centre before noon " * (chars // 60 + 1))[:chars]
    item = {**reply(text), "usage": {"input_tokens": 20, "output_tokens": chars // 3}}
    with MessagesServer([streamed(item, chunk=chunk, pause=pause)], cache=False) as server:
        print(server.url, flush=True)
        shown, served = 0, 1
        while True:  # until the benchmark ends this process
            while shown < len(server.streams_sent):
                began, ended = server.streams_sent[shown]
                if served < count:  # the whole reply after it, then the next stream
                    server.add(slow(item, ended - began) if pause else item)
                    served += 1
                if served < count:
                    server.add(streamed(item, chunk=chunk, pause=pause))
                    served += 1
                print(repr(server.first_delta_sent[shown]), flush=True)
                shown += 1
            time.sleep(0.001)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]) if len(sys.argv) > 4 else 0.0)
