"""Digests: scanning many clusters, composing, scheduling and posting digests."""
