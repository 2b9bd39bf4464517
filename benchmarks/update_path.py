"""How many lines a reader follows through one ESSPO update, counted the same way every time.

The path (:data:`PATH`) is what one update of :class:`adaptive_po.ESSPO` runs, for the common case
(an ``MlpPolicy``, Discrete actions, GAE, no lag, no replay): the class the user names, then from
``train``'s call of :func:`adaptive_po.update.run_update` through the data preparation (values
and GAE under the current critic), the epochs and minibatches, the minibatch loss, the ESS
objective and the distributions' log-prob, KL and entropy, to the optimizer step and the
statistics. Each entry is a whole definition (a function, a method, a class, or a module-level
name with the ``#:`` comment above it), docstring included, as a reader meets it; a function's
branches for other action kinds or objectives count, since the reader skips them in place. Not
counted: the network's forward pass (:func:`adaptive_po.policy.policy_heads`), SB3's and torch's
own code, and what runs only for other objectives (V-trace, the objective state of KL-PPO and
R2VPO). ``python benchmarks/update_path.py`` prints each range and the totals; ``--brief`` only
the totals; ``--check`` runs one real ESSPO update and names the code it ran in the counted files
that no entry covers (:func:`uncounted`: a renamed function cannot drop out of the count unseen).
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

#: (file, dotted name) of every definition one ESSPO update reads, in reading order; a name
#: missing from its file is skipped (the path of another version of the code)
PATH: tuple[tuple[str, str], ...] = (
    ("adaptive_po/algorithms.py", "ESSPO"),
    ("adaptive_po/algorithms.py", "_refuse_ppo_only_arguments"),
    ("adaptive_po/algorithms.py", "_PPO_ONLY_ARGUMENTS"),
    ("adaptive_po/algorithms.py", "BatchPolicyOptimization.train"),
    ("adaptive_po/update.py", "run_update"),
    ("adaptive_po/update.py", "UpdateFace"),
    ("adaptive_po/update.py", "EpochListener"),
    ("adaptive_po/algorithms.py", "_SB3Face"),
    ("adaptive_po/update.py", "training_data"),
    ("adaptive_po/update.py", "TRAINING_COLUMNS"),
    ("adaptive_po/buffers.py", "StoredRollout"),
    ("adaptive_po/buffers.py", "map_observations"),
    ("adaptive_po/update.py", "StoredRollout"),
    ("adaptive_po/update.py", "Observations"),
    ("adaptive_po/update.py", "map_observations"),
    ("adaptive_po/algorithms.py", "BatchPolicyOptimization._advantages"),
    ("adaptive_po/algorithms.py", "BatchPolicyOptimization._values"),
    ("adaptive_po/algorithms.py", "_rows"),
    ("adaptive_po/algorithms.py", "_n_rows"),
    ("adaptive_po/update.py", "advantages_and_returns"),
    ("adaptive_po/buffers.py", "compute_gae"),
    ("adaptive_po/update.py", "compute_gae"),
    ("adaptive_po/update.py", "ADVANTAGE_ESTIMATORS"),
    ("adaptive_po/algorithms.py", "BatchPolicyOptimization._flat_actions"),
    ("adaptive_po/algorithms.py", "BatchPolicyOptimization._dist_params"),
    ("adaptive_po/algorithms.py", "_chunked"),
    ("adaptive_po/update.py", "replay_information"),
    ("adaptive_po/update.py", "whole_batch_ess"),
    ("adaptive_po/update.py", "MINIBATCH_KEYS"),
    ("adaptive_po/update.py", "minibatch_columns"),
    ("adaptive_po/update.py", "selected_epoch"),
    ("adaptive_po/algorithms.py", "BatchPolicyOptimization._count_epoch"),
    ("adaptive_po/update.py", "minibatch_loss"),
    ("adaptive_po/update.py", "normalize_advantages"),
    ("adaptive_po/update.py", "advantage_scale"),
    ("adaptive_po/objectives.py", "PolicyBatch"),
    ("adaptive_po/objectives.py", "ObjectiveSpec"),
    ("adaptive_po/objectives.py", "ObjectiveOutput"),
    ("adaptive_po/objectives.py", "ess_policy_loss"),
    ("adaptive_po/objectives.py", "KL_FORMS"),
    ("adaptive_po/objectives.py", "ESS_SOURCES"),
    ("adaptive_po/objectives.py", "effective_sample_size_from_log_ratios"),
    ("adaptive_po/objectives.py", "_kl_values"),
    ("adaptive_po/objectives.py", "sampled_kl"),
    ("adaptive_po/objectives.py", "SAMPLED_KL_CLAMP"),
    ("adaptive_po/objectives.py", "batch_statistics"),
    ("adaptive_po/objectives.py", "ratio_statistics"),
    ("adaptive_po/objectives.py", "objective_statistics"),
    ("adaptive_po/objectives.py", "OBJECTIVE_STATISTICS"),
    ("adaptive_po/objectives.py", "_detached"),
    ("adaptive_po/distributions.py", "log_prob"),
    ("adaptive_po/distributions.py", "entropy"),
    ("adaptive_po/distributions.py", "kl"),
    ("adaptive_po/distributions.py", "categorical_kl"),
    ("adaptive_po/update.py", "MINIBATCH_STATISTICS"),
    ("adaptive_po/update.py", "approx_kl"),
    ("adaptive_po/update.py", "reduce_statistics"),
    ("adaptive_po/update.py", "_REDUCTIONS"),
    ("adaptive_po/update.py", "explained_variance"),
)


#: code one ESSPO update runs in the counted files that the path leaves out by its definition: the
#: objective's schedule values before :func:`adaptive_po.update.run_update` and the logging after it
OUTSIDE: frozenset[str] = frozenset({"BatchPolicyOptimization._objective_arguments", "BatchPolicyOptimization._record_update"})


def _definitions(tree: ast.Module) -> dict[str, tuple[int, int]]:
    """Dotted name -> (first line, last line) of every top-level definition and method; a
    module-level name's range starts at the ``#:`` comment lines right above it."""
    found: dict[str, tuple[int, int]] = {}

    def start(node: ast.AST) -> int:
        decorators = getattr(node, "decorator_list", [])
        return min([node.lineno, *(d.lineno for d in decorators)])

    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found[node.name] = (start(node), node.end_lineno)
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        found[f"{node.name}.{item.name}"] = (start(item), item.end_lineno)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    found[target.id] = (node.lineno, node.end_lineno)
    return found


def ranges(root: Path = ROOT) -> list[tuple[str, str, int, int]]:
    """``(file, name, first, last)`` of each entry of :data:`PATH` found in the code under ``root``."""
    out = []
    cache: dict[str, tuple[list[str], dict[str, tuple[int, int]]]] = {}
    for file, name in PATH:
        if file not in cache:
            text = (root / file).read_text()
            cache[file] = (text.splitlines(), _definitions(ast.parse(text)))
        lines, defs = cache[file]
        if name not in defs:
            continue
        first, last = defs[name]
        while first > 1 and lines[first - 2].lstrip().startswith("#:"):
            first -= 1
        out.append((file, name, first, last))
    return out


def uncounted(root: Path = ROOT) -> list[str]:
    """``file:line qualified.name`` of each code object that one real ESSPO update runs (CartPole,
    ``MlpPolicy``, Discrete actions, GAE, no lag, no replay: the path's case) in a file of
    :data:`PATH` whose first line no range covers, besides :data:`OUTSIDE`; empty when PATH is whole."""
    from adaptive_po import ESSPO

    covered: dict[str, list[tuple[int, int]]] = {}
    for file, _, first, last in ranges(root):
        covered.setdefault(str((root / file).resolve()), []).append((first, last))
    model = ESSPO("MlpPolicy", "CartPole-v1", n_steps=32, batch_size=16, n_epochs=2, seed=0, device="cpu")
    model.learn(32)  # one rollout and one update: the buffer holds a full batch to train on again
    ran: set[tuple[str, int, str]] = set()

    def profile(frame: Any, event: str, arg: Any) -> None:
        code = frame.f_code
        if event == "call" and code.co_filename in covered:
            ran.add((code.co_filename, code.co_firstlineno, code.co_qualname))

    sys.setprofile(profile)
    try:
        model.train()
    finally:
        sys.setprofile(None)
    return sorted(
        f"{Path(file).relative_to(root.resolve())}:{line} {name}"
        for file, line, name in ran
        if name not in OUTSIDE and not any(first <= line <= last for first, last in covered[file])
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brief", action="store_true", help="print the totals only")
    parser.add_argument("--check", action="store_true", help="also run one ESSPO update and name the code it ran that no entry covers")
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository to measure (default: this one)")
    args = parser.parse_args(argv)
    if args.check and args.root.resolve() != ROOT:
        parser.error("--check traces the adaptive_po this interpreter imports: run it from the tree it measures")
    found = ranges(args.root)
    per_file: dict[str, int] = {}
    for file, name, first, last in found:
        per_file[file] = per_file.get(file, 0) + last - first + 1
        if not args.brief:
            print(f"{file}:{first}-{last}  {name}  ({last - first + 1})")
    for file, n in per_file.items():
        print(f"{file}: {n} lines")
    print(f"total: {sum(per_file.values())} lines in {len(found)} ranges over {len(per_file)} files")
    if args.check:
        missing = uncounted(args.root)
        print("uncounted code that the update ran: " + (", ".join(missing) if missing else "none"))
        return 1 if missing else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
