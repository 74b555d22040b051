"""The only door to Kubernetes: the only package that imports `kubernetes`.

It knows the registered clusters, collects snapshots, applies remedies with preconditions, and
translates `ApiException` into our own errors at the boundary. Callers never see a client object.
"""

from bot.kube import _lazy

_lazy.install()  # before any module of this package imports `kubernetes` (see _lazy)
