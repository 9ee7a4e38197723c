"""The documented path of the shop study; it lives beside the other lessons in
:mod:`agentlab.scenarios.shop_study`."""

from ..scenarios.shop_study import CONFIGS, shop_experiment

__all__ = ["CONFIGS", "shop_experiment"]
