"""kernel-suite: the harness. It knows nothing about any one workload."""
__version__ = "0.1.0"
