"""Remediation requests, the approval policy, and execution (backup, dry run, apply, verify).

Never acts on its own: every change it makes was requested, approved by someone other than the
requester, and re-checked against the live cluster first.
"""
