"""The admission door: the namespace-delete webhook served over TLS (`bot.admission.server`)."""
