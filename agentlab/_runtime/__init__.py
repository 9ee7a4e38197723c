"""The runtime that touches threads, signals and event-loop shutdown, private to the engine: driving a
coroutine to its end from sync code (``driver``), running other people's code so nothing escapes
(``isolate``, ``threads``) and explaining a blocked loop (``watchdog``). Nothing here is public API."""
