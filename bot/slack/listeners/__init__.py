"""Bolt listeners, one module per kind of request (commands, actions, events). Each acknowledges
first, hands the work to a use case, and answers the person who asked; none holds state of its own."""
