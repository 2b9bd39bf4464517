"""Every registry entry as an SB3 algorithm class, and their registration as RL Zoo algorithms.

The three entries with a class of their own keep it (``esspo``: :class:`~adaptive_po.ESSPO`,
``ppo``: :class:`~adaptive_po.PPO`, ``decoupled-ppo``: :class:`~adaptive_po.DecoupledPPO`); every
other entry gets a subclass of :class:`~adaptive_po.algorithms.BatchPolicyOptimization` that fixes
the objective and takes the objective's numeric knobs (``eps_high`` for ``cispo``, ``kl_target``
for ``kl-ppo``, ...) as constructor arguments, so a Zoo hyper-parameter file or ``-params`` sets
them like any other argument.
"""

from __future__ import annotations

from typing import Any

from adaptive_po.algorithms import PPO, BatchPolicyOptimization, DecoupledPPO, ESSPO
from adaptive_po.bench.variants import objective_knobs
from adaptive_po.objectives import OBJECTIVES

#: registry names the Zoo knows under another name: its own ``ppo`` stays SB3's PPO, so a Zoo
#: user compares against it; ours (PPO's clip against the behaviour policy, on our collector, so
#: the data dials apply) is ``apo-ppo``
ZOO_RENAMES: dict[str, str] = {"ppo": "apo-ppo"}

_OWN_CLASSES: dict[str, type[BatchPolicyOptimization]] = {"esspo": ESSPO, "ppo": PPO, "decoupled-ppo": DecoupledPPO}


class RegistryAlgorithm(BatchPolicyOptimization):
    """A registry entry as an SB3 class: :attr:`default_objective` fixed, its numeric knobs
    (:func:`adaptive_po.bench.variants.objective_knobs`) taken as keyword arguments, the rest
    as :class:`BatchPolicyOptimization`'s."""

    def __init__(self, policy: Any, env: Any, **kwargs: Any) -> None:
        knobs = {name: kwargs.pop(name) for name in objective_knobs(self.default_objective) if name in kwargs}
        super().__init__(policy, env, objective=self.default_objective, objective_kwargs=knobs, **kwargs)


def _class_name(objective: str) -> str:
    return "".join(part.capitalize() for part in objective.replace("_", "-").split("-"))


def _registry_class(objective: str) -> type[BatchPolicyOptimization]:
    if objective in _OWN_CLASSES:
        return _OWN_CLASSES[objective]
    name = _class_name(objective)
    cls = type(name, (RegistryAlgorithm,), {
        "default_objective": objective,
        "__module__": __name__,
        "__doc__": f"``{objective}``: {OBJECTIVES[objective].description}.",
    })
    globals()[name] = cls  # importable by name, as any class of a module
    return cls


def zoo_name(objective: str) -> str:
    """The Zoo algorithm name of a registry entry."""
    return ZOO_RENAMES.get(objective, objective)


#: Zoo algorithm name -> SB3 class, one per registry entry
ALGORITHMS: dict[str, type[BatchPolicyOptimization]] = {zoo_name(o): _registry_class(o) for o in OBJECTIVES}

#: Zoo algorithm name -> registry entry
OBJECTIVE_OF: dict[str, str] = {zoo_name(o): o for o in OBJECTIVES}


def register() -> dict[str, type[BatchPolicyOptimization]]:
    """Add :data:`ALGORITHMS` to the Zoo's algorithm table, with a tuning sampler and its
    converter each (the Zoo's own entries are left as they are). Idempotent."""
    try:
        import rl_zoo3.hyperparams_opt as zoo_opt
        import rl_zoo3.utils as zoo_utils
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            f"the RL Zoo is not installed ({err}); install the extra: pip install 'adaptive-po[zoo]'"
        ) from err
    from adaptive_po.zoo.search_space import convert_params, sampler_for

    for name, cls in ALGORITHMS.items():
        existing = zoo_utils.ALGOS.get(name)
        if existing is not None and existing is not cls:
            raise RuntimeError(f"the RL Zoo already has an algorithm {name!r} ({existing.__name__}); not replacing it")
        zoo_utils.ALGOS[name] = cls  # the Zoo's scripts read this dict when they build their parsers
        zoo_opt.HYPERPARAMS_SAMPLER[name] = sampler_for(OBJECTIVE_OF[name])
        zoo_opt.HYPERPARAMS_CONVERTER[name] = convert_params
    return ALGORITHMS
