"""The engine's internals, private to :mod:`agentlab.loop`: the run's frozen inputs (``config``), one tool call
(``calls``), the pre-call cost guard's input tracking (``input_tracker``), repeats and the nudge (``loopguard``)
and the read/write schedule (``scheduling``). Nothing here is public API."""
