"""``python -m adaptive_po.zoo <command> [arguments]`` (also ``adaptive-po zoo ...``): register our
algorithms with the RL Zoo, then run the Zoo's own command with the remaining arguments."""

from __future__ import annotations

import argparse
import runpy
import sys
from pathlib import Path
from typing import Callable

#: the Zoo's commands: name -> the function or module (run as ``__main__``) that implements it
ZOO_COMMANDS: dict[str, str] = {
    "train": "rl_zoo3.train:train",
    "enjoy": "rl_zoo3.enjoy:enjoy",
    "record_video": "rl_zoo3.record_video",
    "record_training": "rl_zoo3.record_training",
    "plot_train": "rl_zoo3.plots.plot_train:plot_train",
    "plot_from_file": "rl_zoo3.plots.plot_from_file:plot_from_file",
    "all_plots": "rl_zoo3.plots.all_plots:all_plots",
}

USAGE = f"""usage: python -m adaptive_po.zoo COMMAND [ARGUMENTS]   (or: adaptive-po zoo COMMAND ...)

Registers adaptive_po's algorithms with the RL Baselines3 Zoo, then runs the Zoo's COMMAND.

Zoo commands (their own arguments; `COMMAND -h` lists them):
  {', '.join(ZOO_COMMANDS)}
  train with one of our algorithms and no -conf: the hyper-parameter file is generated from
  adaptive_po's environment files into <log folder>/adaptive-po-hyperparams/<algo>.yml
  (--envs-dir DIR: another folder of environment files)
Our commands:
  hyperparams --algo ALGO [-o FILE] [--envs-dir DIR]   write the generated hyper-parameter file
  list                                                 the registered algorithms and their tuned knobs

examples:
  python -m adaptive_po.zoo train --algo esspo --env CartPole-v1 -params policy_lag:16
  python -m adaptive_po.zoo train --algo esspo --env CartPole-v1 -optimize --n-trials 20 -n 50000
  python -m adaptive_po.zoo enjoy --algo esspo --env CartPole-v1 -f logs/ --no-render
  python -m adaptive_po.zoo plot_train --algo esspo --env CartPole-v1 -f logs/
"""


def _option(argv: list[str], *names: str, default: str | None = None) -> str | None:
    """The value of an ``--option VALUE`` / ``--option=VALUE`` in ``argv`` (the last one)."""
    value = default
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name and i + 1 < len(argv):
                value = argv[i + 1]
            elif arg.startswith(name + "="):
                value = arg.split("=", 1)[1]
    return value


def _pop_option(argv: list[str], name: str) -> tuple[list[str], str | None]:
    """``argv`` without ``name VALUE`` / ``name=VALUE``, and the value."""
    value = _option(argv, name)
    out, skip = [], False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
        elif arg == name:
            skip = True
        elif not arg.startswith(name + "="):
            out.append(arg)
    return out, value


def train_arguments(argv: list[str]) -> list[str]:
    """The Zoo trainer's arguments: for one of our algorithms without ``-conf``, a generated
    hyper-parameter file is written and passed (``--envs-dir`` is ours, taken out)."""
    from adaptive_po.zoo.hyperparams import write_hyperparams
    from adaptive_po.zoo.registry import OBJECTIVE_OF

    argv, envs_dir = _pop_option(argv, "--envs-dir")
    algo = _option(argv, "--algo", default="ppo")
    if algo not in OBJECTIVE_OF or _option(argv, "-conf", "--conf-file") is not None:
        return argv
    log_folder = _option(argv, "-f", "--log-folder", default="logs")
    path = write_hyperparams(OBJECTIVE_OF[algo], Path(log_folder) / "adaptive-po-hyperparams" / f"{algo}.yml", envs_dir)
    print(f"adaptive_po: hyper-parameters for {algo} generated from the environment files into {path}")
    return [*argv, "-conf", str(path)]


#: the Zoo trainer's option for hyper-parameters given on the command line (``-params key:value ...``)
PARAMS_OPTIONS: tuple[str, ...] = ("-params", "--hyperparams")


def params_values(argv: list[str]) -> list[str]:
    """The ``key:value`` words of every ``-params`` / ``--hyperparams`` in ``argv`` (the Zoo reads
    the words that follow the option up to the next option)."""
    words: list[str] = []
    taking = False
    for arg in argv:
        name, eq, value = arg.partition("=")
        if name in PARAMS_OPTIONS:
            taking = True
            if eq:
                words.append(value)
            continue
        if arg.startswith("-") and not arg[1:2].isdigit():
            taking = False
        elif taking:
            words.append(arg)
    return words


def check_dial_params(argv: list[str]) -> None:
    """``ValueError`` naming the first bad data dial given with ``-params`` (``policy_lag:-1``,
    ``sampler_precision:fp7``), before the Zoo builds anything (no log folder, no traceback)."""
    import ast

    from adaptive_po.dials import DIAL_NAMES, DataDials

    dials = {}
    for word in params_values(argv):
        key, _, text = word.partition(":")
        if key not in DIAL_NAMES:
            continue
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            value = text  # a bare word (the Zoo would fail to evaluate it): named as given below
        if isinstance(value, str) and key not in ("behaviour_log_prob", "sampler_precision"):
            raise ValueError(f"-params {word}: {key} must be a number, got {text!r}")
        dials[key] = value
    try:
        DataDials(**dials)
    except (ValueError, TypeError) as err:
        given = " ".join(f"{k}:{v!r}" for k, v in dials.items())
        raise ValueError(f"-params {given}: {err}") from None


def _new_run_folders(log_folder: Path, algo: str, before: set[Path]) -> list[Path]:
    """The Zoo run folders (``<log folder>/<algo>/<env>_<n>``) that are not in ``before``."""
    root = log_folder / algo
    if not root.is_dir():
        return []
    found = []
    for path in root.iterdir():
        tail = path.name.rpartition("_")[2]
        if path.is_dir() and not path.is_symlink() and tail.isdigit() and path not in before:
            found.append(path)
    return found


def _cmd_hyperparams(argv: list[str]) -> int:
    from adaptive_po.zoo.hyperparams import write_hyperparams, zoo_hyperparams
    from adaptive_po.zoo.registry import OBJECTIVE_OF

    parser = argparse.ArgumentParser(prog="python -m adaptive_po.zoo hyperparams")
    parser.add_argument("--algo", required=True, choices=sorted(OBJECTIVE_OF))
    parser.add_argument("-o", "--output", default=None, help="file to write (default: print)")
    parser.add_argument("--envs-dir", default=None, help="folder of environment YAML files (default: the package's)")
    args = parser.parse_args(argv)
    try:
        if args.output:
            print(write_hyperparams(OBJECTIVE_OF[args.algo], args.output, args.envs_dir))
        else:
            import yaml

            print(yaml.safe_dump(zoo_hyperparams(OBJECTIVE_OF[args.algo], args.envs_dir), sort_keys=False), end="")
    except ValueError as err:  # the environment files: one line
        print(f"adaptive_po.zoo hyperparams: error: {err}", file=sys.stderr)
        return 2
    return 0


def _cmd_list(argv: list[str]) -> int:
    from adaptive_po.objectives import OBJECTIVES
    from adaptive_po.zoo.registry import ALGORITHMS, OBJECTIVE_OF
    from adaptive_po.zoo.search_space import knob_space

    for name, cls in ALGORITHMS.items():
        objective = OBJECTIVE_OF[name]
        knobs = ", ".join(knob_space(objective)) or "none (shared knobs only)"
        print(f"{name:18s} {cls.__module__}.{cls.__name__}: {OBJECTIVES[objective].description}; own tuned knobs: {knobs}")
    return 0


def _zoo_command(target: str) -> Callable[[], object]:
    module, _, function = target.partition(":")
    if function:
        import importlib

        return getattr(importlib.import_module(module), function)
    return lambda: runpy.run_module(module, run_name="__main__", alter_sys=True)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, end="")
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "hyperparams":
        return _cmd_hyperparams(rest)
    if command == "list":
        return _cmd_list(rest)
    if command not in ZOO_COMMANDS:
        print(f"unknown command {command!r}\n\n{USAGE}", file=sys.stderr, end="")
        return 2
    from adaptive_po.zoo.registry import OBJECTIVE_OF, register

    before: set[Path] = set()
    log_folder = Path(_option(rest, "-f", "--log-folder", default="logs") or "logs")
    algo = _option(rest, "--algo", default="ppo") or "ppo"
    if command == "train":
        if algo in OBJECTIVE_OF:
            try:  # the data dials, before anything is built or written
                check_dial_params(rest)
            except ValueError as err:
                print(f"adaptive_po.zoo train: error: {err}", file=sys.stderr)
                return 2
        before = set(_new_run_folders(log_folder, algo, set()))
    register()
    if command == "train":
        try:  # the environment files (a missing --envs-dir, a bad file): one line, before the Zoo starts
            rest = train_arguments(rest)
        except ValueError as err:
            print(f"adaptive_po.zoo train: error: {err}", file=sys.stderr)
            return 2
    run = _zoo_command(ZOO_COMMANDS[command])
    saved = sys.argv
    sys.argv = [f"adaptive_po.zoo {command}", *rest]
    try:
        run()
    except BaseException as err:
        if command == "train" and not (isinstance(err, SystemExit) and err.code in (None, 0)):
            # a failed try leaves no run folder behind (the Zoo makes <log folder>/<algo>/<env>_<n> first)
            import shutil

            for folder in _new_run_folders(log_folder, algo, before):
                shutil.rmtree(folder, ignore_errors=True)
        raise
    finally:
        sys.argv = saved
    return 0
