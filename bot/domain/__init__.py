"""Pure data of the problem: object references, snapshots, findings, causes, remedies, diagnoses.

No I/O and no third-party clients here: everything in this package can be built from a dict,
compared, and serialised. Every other layer may import it.
"""
