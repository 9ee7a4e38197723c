"""The notebook panel's parts: a pure view model (``state``), HTML text (``html``),
the live chart (``chart``) and the widgets (``panel``). ``agentlab.Lab`` wires them
to a run. Nothing here is imported by ``import agentlab``."""
