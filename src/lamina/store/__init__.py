"""The only place that speaks SQL: the domains' ports (memory/ports.py, observational/ports.py,
threads/ports.py) implemented once per backend.

``sql/`` holds what both backends share (each domain's SQL, written once with a dialect);
``sqlite/`` and ``postgres/`` hold a store class each, one module per domain where the
backend has code of its own (search, sweeps), its plumbing (``db.py``) and its migrations.
runtime.py picks the backend; nothing else imports one.
"""
