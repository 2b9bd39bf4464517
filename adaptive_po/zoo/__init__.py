"""The RL Baselines3 Zoo runs our algorithms (``pip install 'adaptive-po[zoo]'``).

``python -m adaptive_po.zoo <command> ...`` (or ``adaptive-po zoo <command> ...``) registers every
entry of :data:`adaptive_po.objectives.OBJECTIVES` as a Zoo algorithm (``esspo``, ``decoupled-ppo``,
``tis-pg``, ...; the registry's ``ppo`` is ``apo-ppo`` there, the Zoo's own ``ppo`` stays SB3's),
then hands over to the Zoo's own command with the remaining arguments:

* ``train``: the Zoo's trainer; unless ``-conf`` is given, with a hyper-parameter file generated
  from our environment YAML files (:mod:`adaptive_po.zoo.hyperparams`), the data dials
  (``policy_lag``, ``action_noise``, ``replay``, ``behaviour_log_prob``, ``sampler_temperature``,
  ``sampler_precision``) among the algorithm arguments (``-params policy_lag:16``);
  ``-optimize`` tunes with a sampler per objective (:mod:`adaptive_po.zoo.search_space`);
* ``enjoy``, ``record_video``, ``record_training``: the Zoo's, on the runs ``train`` wrote;
* ``plot_train``, ``plot_from_file``, ``all_plots``: the Zoo's plotting scripts;
* ``hyperparams --algo esspo [-o FILE]``: write the generated hyper-parameter file;
* ``list``: the registered algorithms and the knobs their tuner searches.

Modules: :mod:`~adaptive_po.zoo.registry` (one SB3 class per registry entry, and the registration
into the Zoo's tables), :mod:`~adaptive_po.zoo.hyperparams`, :mod:`~adaptive_po.zoo.search_space`,
:mod:`~adaptive_po.zoo.cli`.
"""

from adaptive_po.zoo.cli import main
from adaptive_po.zoo.registry import ALGORITHMS, register

__all__ = ["ALGORITHMS", "main", "register"]
