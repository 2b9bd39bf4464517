"""The Atari v5 settings both backends implement (see :mod:`adaptive_po.environments`).

The backends read these at build time as ``atari.NAME`` (not ``from ... import NAME``),
so a patched value here applies to both.
"""

from __future__ import annotations

#: Sticky-action probability used for Atari on *both* backends: the ALE v5 default
#: (Machado et al., 2018).  envpool's own default is 0.0; we override it so that
#: ``Pong-v5`` means the same thing on envpool and on gymnasium's ``ALE/Pong-v5``.
ATARI_REPEAT_ACTION_PROBABILITY: float = 0.25
ATARI_FRAME_SKIP: int = 4
ATARI_FRAME_STACK: int = 4
ATARI_NOOP_MAX: int = 30
ATARI_SCREEN_SIZE: int = 84
#: Agent steps per game before truncation (= 108,000 frames, ALE's v5 default).
ATARI_MAX_EPISODE_STEPS: int = 27_000
