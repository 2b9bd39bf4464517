"""The benchmark harness: environment configs, suites, the algorithm registry, the runner, the
sweep, the Ray executor and the command line; plus :mod:`adaptive_po.contract`, the
torch-free run-folder contract that analysis/ reads through.

Importing this package imports nothing else, so that ``adaptive_po.contract`` stays light.
"""
