"""Environments: envpool and gymnasium behind SB3's ``VecEnv``, with the same episode semantics."""

from adaptive_po.environments.core import *  # noqa: F401,F403
from adaptive_po.environments.core import __all__  # noqa: F401
