"""The Slack door: the only package that imports slack_bolt and slack_sdk.

A thin app factory, listeners registered per type, and pure Block Kit builders.
"""
