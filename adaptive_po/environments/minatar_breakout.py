"""MinAtar's Breakout for many games at once, in numpy: the ``minatar`` package's game, step for
step, with each game's own random stream.

:class:`~adaptive_po.environments.minatar.MinAtarVecEnv` steps its games one by one in a Python
loop (``minatar.Environment.act``, about 4 us a game); for Breakout it steps them all at once
with :class:`BreakoutGames` instead, whose arrays are every game's state. The rules are MinAtar's
(Young & Tian 2019; the ``minatar`` package's ``environments/breakout.py``): a 10 x 10 grid, three
rows of bricks, a ball moving diagonally that bounces off the walls, the bricks (one point each,
at most one brick a step) and the paddle on the bottom row, the episode lost when the paddle
misses it; the bricks come back when the ball reaches the bottom row with none left.

Randomness is each game's ``numpy.random.RandomState(seed)``, consumed in the package's order:
one ``rand()`` a step (the sticky-action draw, made whatever the probability: two 32-bit words)
and one ``randint(2)`` a reset (the ball's start, one word). The words are drawn ahead in blocks
per game, which leaves the stream as it is. ``tests/test_minatar.py`` plays the package's games
beside these on the same actions, with sticky actions and without, and compares every array.
"""

from __future__ import annotations

import numpy as np

#: the moves of the ball's four directions (x, y): up-left, up-right, down-right, down-left
DX = np.array([-1, 1, 1, -1])
DY = np.array([-1, -1, 1, 1])
#: the new direction after a bounce off a side wall, off the top or a brick (or straight back off
#: the paddle), off the paddle's corner
SIDE_BOUNCE = np.array([1, 0, 3, 2])
TOP_BOUNCE = np.array([3, 2, 1, 0])
CORNER_BOUNCE = np.array([2, 3, 0, 1])
#: MinAtar's raw actions that move the paddle
LEFT, RIGHT = 1, 3
#: the random words drawn ahead per game at a time
WORDS = 1024


class BreakoutGames:
    """``n`` Breakout games: ``seed`` their streams, ``reset``/``act`` some of them (by index),
    ``observe`` them as ``(channels, 10, 10)`` uint8 planes (paddle, ball, trail, bricks)."""

    channels = 4

    def __init__(self, n: int, sticky_action_prob: float) -> None:
        self.n, self.sticky = int(n), float(sticky_action_prob)
        self.ball_x = np.zeros(self.n, np.int64)
        self.ball_y = np.zeros(self.n, np.int64)
        self.ball_dir = np.zeros(self.n, np.int64)
        self.last_x = np.zeros(self.n, np.int64)
        self.last_y = np.zeros(self.n, np.int64)
        self.pos = np.zeros(self.n, np.int64)
        self.strike = np.zeros(self.n, bool)
        self.bricks = np.zeros((self.n, 10, 10), np.uint8)
        self.last_action = np.zeros(self.n, np.int64)
        self.seed(range(self.n))

    def seed(self, seeds) -> None:  # type: ignore[no-untyped-def]
        self._rngs = [np.random.RandomState(int(s)) for s in seeds]
        self._words = np.zeros((self.n, WORDS), np.uint32)
        self._used = np.full(self.n, WORDS, np.int64)

    def _take(self, ids: np.ndarray, count: int) -> np.ndarray:
        """``(len(ids), count)``: each game's next ``count`` random words."""
        for i in ids[self._used[ids] + count > WORDS].tolist():
            left = self._words[i, self._used[i] :].copy()
            self._words[i, : len(left)] = left
            self._words[i, len(left) :] = self._rngs[i].randint(0, 2**32, size=WORDS - len(left), dtype=np.uint32)
            self._used[i] = 0
        words = self._words[ids[:, None], self._used[ids][:, None] + np.arange(count)]
        self._used[ids] += count
        return words

    def reset(self, ids: np.ndarray) -> None:
        right = (self._take(ids, 1)[:, 0] & 1).astype(bool)  # randint(2): one word, its lowest bit
        self.ball_y[ids] = 3
        self.ball_x[ids] = np.where(right, 9, 0)
        self.ball_dir[ids] = np.where(right, 3, 2)
        self.last_x[ids], self.last_y[ids] = self.ball_x[ids], 3
        self.pos[ids] = 4
        self.strike[ids] = False
        self.bricks[ids] = 0
        self.bricks[ids, 1:4, :] = 1
        self.last_action[ids] = 0

    def act(self, ids: np.ndarray, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One step of the games ``ids`` under MinAtar's raw ``actions``: their rewards and
        whether each episode ended."""
        words = self._take(ids, 2)  # rand(): a double from (a >> 5, b >> 6), as numpy forms it
        u = ((words[:, 0] >> 5).astype(np.float64) * 67108864.0 + (words[:, 1] >> 6)) / 9007199254740992.0
        action = np.where(u < self.sticky, self.last_action[ids], actions)
        self.last_action[ids] = action
        pos = self.pos[ids]
        pos = np.where(action == LEFT, np.maximum(pos - 1, 0), np.where(action == RIGHT, np.minimum(pos + 1, 9), pos))
        x, y, d = self.ball_x[ids], self.ball_y[ids], self.ball_dir[ids]
        new_x, new_y = x + DX[d], y + DY[d]
        side = (new_x < 0) | (new_x > 9)
        new_x = np.clip(new_x, 0, 9)
        d = np.where(side, SIDE_BOUNCE[d], d)
        top = new_y < 0
        new_y = np.where(top, 0, new_y)
        d = np.where(top, TOP_BOUNCE[d], d)
        hit = ~top & (self.bricks[ids, np.minimum(new_y, 9), new_x] == 1)
        scored = hit & ~self.strike[ids]
        self.bricks[ids[scored], new_y[scored], new_x[scored]] = 0
        new_y = np.where(scored, y, new_y)
        d = np.where(scored, TOP_BOUNCE[d], d)
        bottom = ~top & ~hit & (new_y == 9)
        cleared = bottom & (self.bricks[ids].reshape(len(ids), -1).max(1) == 0)
        self.bricks[ids[cleared], 1:4, :] = 1
        back = bottom & (x == pos)
        corner = bottom & ~back & (new_x == pos)
        d = np.where(back, TOP_BOUNCE[d], np.where(corner, CORNER_BOUNCE[d], d))
        new_y = np.where(back | corner, y, new_y)
        self.last_x[ids], self.last_y[ids] = x, y
        self.ball_x[ids], self.ball_y[ids], self.ball_dir[ids] = new_x, new_y, d
        self.pos[ids] = pos
        self.strike[ids] = hit
        return scored.astype(np.float32), bottom & ~back & ~corner

    def observe(self, ids: np.ndarray, out: np.ndarray) -> None:
        """The games ``ids``' planes into ``out`` (``(len(ids), 4, 10, 10)`` uint8)."""
        rows = np.arange(len(ids))
        out[:] = 0
        out[rows, 0, 9, self.pos[ids]] = 1
        out[rows, 1, self.ball_y[ids], self.ball_x[ids]] = 1
        out[rows, 2, self.last_y[ids], self.last_x[ids]] = 1
        out[:, 3] = self.bricks[ids]
