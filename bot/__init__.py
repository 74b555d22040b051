"""nsstuck: finds out why a Kubernetes namespace is stuck in Terminating, and fixes it safely.

Layers (higher may import lower, never the reverse; checked by import-linter in CI):

    cli                          the console script, composition root (serve starts the doors)
    slack | scheduler            the doors
    services                     use cases both doors share
    remediation
    diagnosis                    pure rules over a snapshot (imports only domain)
    kube | store                 the outside world, behind our own types
    domain | settings | errors
"""

__version__ = "0.1.0"
