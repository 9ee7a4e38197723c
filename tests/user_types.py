"""What mypy tells a user about a script (checked by ``make lint``, not by pytest: it is mypy's run).

Each ``type: ignore[...]`` below is an error mypy must report: the project's mypy settings warn about an
ignore that silences nothing, so an option that stopped being checked fails the lint. ``assert_type``
fails it when a result's type changes, a lazily loaded name (``al.Lab``) included. Never executed.
"""

from typing import assert_type

import agentlab as al
from agentlab.lab import Lab
from agentlab.results import Done, Stopped

result = al.run("hi", model="offline", max_steps=3, trace=False)
assert_type(result, Done | Stopped)
assert_type(al.Lab, type[Lab])
al.run("hi", model="offline", max_stepz=3)  # type: ignore[call-arg]
al.run("hi", model="offline", max_cost="cheap")  # type: ignore[arg-type]
al.Lab("hi", model="offline").run(max_cost=1.0, max_stepz=3)  # type: ignore[call-arg]
