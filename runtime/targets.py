"""Subscribers: one verified event in, one effect out; idempotent and order-safe.

`TARGETS` is the one list of subscriber targets: the Cloud Run services, the push
subscriptions, the in-process bus and `bin/serve` all take their names from it (it is defined
in config/serving.py, the bottom layer, which checks FUNCTION_TARGET against it).
"""

from config import TARGETS

__all__ = ["TARGETS"]
