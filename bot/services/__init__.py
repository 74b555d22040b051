"""Use cases shared by the doors (CLI, Slack, scheduler): collect, diagnose, record, render.

Orchestration only: the rules live in `diagnosis`, the I/O in `kube` and `store`.
"""
