"""The remedy kinds: one module per cluster-changing `Action`, each declaring in one place how the
remedy is planned against the live object, the permissions and approvals it needs, whether it needs
fresh complete evidence, and how its effect is verified. `registry.py` finds a kind by its Action.
"""
