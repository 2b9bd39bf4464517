"""``python -m MODULE ARGS...`` run in the test's own process, for tests whose subject is what a
command prints, returns and leaves on disk (refusals, dry runs, changed settings, damaged inputs):
each saves a Python start and the imports of torch and the environments (2-5 s a call on 2 cores).
Tests whose subject is the process itself (signals, killed workers, ``kill -9``, a wheel install)
keep their subprocesses.

:func:`cli_here` takes the command and the ``cwd`` and ``env`` that ``subprocess.run`` would, and
gives back its ``CompletedProcess``: the exit status (``SystemExit`` from argparse included; an
uncaught exception is its traceback on stderr and exit 1, as the interpreter does) and the captured
stdout and stderr, as text. The working directory, the environment, ``sys.argv``, the SIGINT and
SIGTERM handlers and torch's thread count are put back afterwards, and the sweep locks a bench
keeps until its process exits are released (:func:`adaptive_po.bench.locks.release_kept_locks`).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import os
import signal
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Callable


def _entry(module: str) -> tuple[Callable[[list[str]], int], str]:
    """``module``'s ``main`` (a package's is its ``__main__``'s) and what ``sys.argv[0]`` would be."""
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin, f"no module {module!r}"
    origin = Path(spec.origin)
    if origin.name == "__init__.py":  # a package run with -m runs its __main__ (main guarded by __name__)
        module, origin = f"{module}.__main__", origin.with_name("__main__.py")
    return importlib.import_module(module).main, str(origin)


def cli_here(command: list[str], *, cwd: str | os.PathLike | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run ``[sys.executable, "-m", MODULE, *args]`` here; see the module docstring."""
    import torch

    from adaptive_po.bench.locks import release_kept_locks

    assert command[:2] == [sys.executable, "-m"], f"not a `python -m` command: {command[:3]}"
    main, argv0 = _entry(command[2])
    args = [str(a) for a in command[3:]]
    saved_env, saved_argv, saved_cwd = dict(os.environ), list(sys.argv), os.getcwd()
    saved_signals = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    threads = torch.get_num_threads()
    out, err = io.StringIO(), io.StringIO()
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        if cwd is not None:
            os.chdir(cwd)
        sys.argv = [argv0, *args]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(args)
            except SystemExit as exit_:  # as the interpreter reads it: None is 0, a message is printed and 1
                code = exit_.code
                if code is not None and not isinstance(code, int):
                    print(code, file=sys.stderr)
                    code = 1
            except Exception:  # noqa: BLE001 - what the interpreter does with it: the traceback, exit 1
                traceback.print_exc()
                code = 1
    finally:
        release_kept_locks()
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        sys.argv = saved_argv
        for sig, handler in saved_signals.items():
            signal.signal(sig, handler)
        torch.set_num_threads(threads)
    return subprocess.CompletedProcess(command, int(code or 0), out.getvalue(), err.getvalue())
