"""The only door to Kubernetes: the only package that imports `kubernetes`.

It knows the registered clusters, collects snapshots, applies remedies with preconditions, and
translates `ApiException` into our own errors at the boundary. Callers never see a client object.
"""
