"""The only door to Kubernetes: the only package that imports `kubernetes`.

It knows the registered clusters, collects snapshots, applies remedies with preconditions, and
translates `ApiException` into our own errors at the boundary. Callers never see a client object.
"""

import os

from bot.kube import _lazy

if _lazy.enabled(os.environ):  # NSSTUCK_LAZY_KUBERNETES=0: imported whole, as a plain import does
    _lazy.install()  # before any module of this package imports `kubernetes` (see _lazy)
