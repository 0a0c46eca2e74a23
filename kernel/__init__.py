"""SpecHub's kernel: the Django-free code both the registry and the workers use.

formats/ (config parsing and the gate's rules, no I/O), hub (the only Hub client),
repos (repo readers), errors (codes and whose fault), spec (the run spec),
director (runs stages into a result document), result (the typed, versioned result
document and the one place it is read) and builds (which engine build is installed).
Dependencies point one way: registry -> kernel <- workers.
"""
