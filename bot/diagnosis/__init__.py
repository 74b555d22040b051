"""Pure rules: a NamespaceSnapshot in, a Diagnosis out.

Imports nothing but `bot.domain`. A rule that needs more data asks for it to be added to the
snapshot, so that every rule is testable from a dict and a stored snapshot can be diagnosed again.
One module per cause family; `engine.diagnose` runs them all and orders what they find.
"""
