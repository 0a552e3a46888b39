"""The embedded default: what lets the platform run and be tested with no real users or models.

Everything here talks to the platform only through its public contract (manage.py commands
and the HTTP API), like a customer's software would.
"""
