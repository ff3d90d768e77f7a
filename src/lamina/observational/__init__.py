"""Observational memory: session messages, the Observer and the Reflector."""
