"""What a rerun does with the runs already there: the resume plan.

A complete, intact run with the requested configuration is skipped; a damaged one is redone with
its reason printed; one made with another configuration (another budget, an edited YAML file) is
redone only on request (:class:`ChangedRuns` otherwise), so a complete run is never removed
without a word.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from adaptive_po.bench.run_folder import RUN_CHANGED, RUN_DAMAGED, RUN_NEW, RunFolderState, RunSpec
from adaptive_po.bench.run_folder import run_folder_state


class ChangedRuns(ValueError):
    """Complete runs would be replaced by runs of another configuration, and that was not asked
    for (``--redo-changed``): refused before any compute (a ``ValueError``: exit code 2)."""


#: how many runs a refusal or a dry run names one by one
NAMED_RUNS = 5


@dataclass
class ResumePlan:
    """Each spec with what its run folder holds (:func:`~adaptive_po.bench.run_folder.run_folder_state`)."""

    states: list[tuple[RunSpec, RunFolderState]]

    def of(self, kind: str) -> list[tuple[RunSpec, RunFolderState]]:
        return [(spec, state) for spec, state in self.states if state.kind == kind]

    def todo(self, redo_changed: bool = False) -> list[RunSpec]:
        """The specs to run, in order: new, damaged and (with ``redo_changed``) changed ones."""
        kinds = {RUN_NEW, RUN_DAMAGED} | ({RUN_CHANGED} if redo_changed else set())
        return [spec for spec, state in self.states if state.kind in kinds]

    def redo_lines(self, redo_changed: bool = False) -> list[str]:
        """``"<run>: <why>"`` for every complete run that is to be deleted and done again."""
        lines = [f"{spec.relative_dir}: {state.reasons[0]}" for spec, state in self.of(RUN_DAMAGED)]
        if redo_changed:
            lines += [f"{spec.relative_dir}: configuration changed: {describe_changes(state)}" for spec, state in self.of(RUN_CHANGED)]
        return lines

    def check_changed(self, redo_changed: bool, command: str = "bench") -> None:
        """:class:`ChangedRuns` naming the complete runs of another configuration, unless
        ``redo_changed``."""
        changed = self.of(RUN_CHANGED)
        if not changed or redo_changed:
            return
        folders = ", ".join(sorted({str(Path(spec.out) / spec.suite) for spec, _ in changed}))
        named = "; ".join(f"{spec.relative_dir} ({describe_changes(state)})" for spec, state in changed[:NAMED_RUNS])
        more = f"; and {len(changed) - NAMED_RUNS} more" if len(changed) > NAMED_RUNS else ""
        hint = " (`bench --dry-run` lists them all)" if command == "bench" else ""
        # name only flags the command accepts (`tune` has no --suite-name: its folders are fixed)
        elsewhere = "another --out or --suite-name" if command in ("bench", "train") else "another --out"
        raise ChangedRuns(
            f"{len(changed)} complete run(s) in {folders} were made with another configuration and would be "
            f"deleted and trained again: {named}{more}. Nothing was run. Add --redo-changed to replace them, "
            f"or give {elsewhere} to keep both{hint}"
        )


def describe_changes(state: RunFolderState, most: int = 3) -> str:
    shown = ", ".join(state.reasons[:most])
    return shown + (f", and {len(state.reasons) - most} more keys" if len(state.reasons) > most else "")


def plan_resume(specs: Sequence[RunSpec]) -> ResumePlan:
    """What each spec's run folder holds, compared with the spec (the configuration is resolved
    only for complete runs)."""
    return ResumePlan([(spec, run_folder_state(spec)) for spec in specs])
