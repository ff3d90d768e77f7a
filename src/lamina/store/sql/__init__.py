"""What the SQLite and PostgreSQL backends share: the SQL of every domain, written once.

``program.py`` runs that SQL on either backend (a program yields statements, the backend's
driver executes them: SQLite in its worker thread, PostgreSQL awaiting each); ``dialect.py``
names what differs between the two (placeholders, JSON, timestamps, row locks, …). The
domain modules hold the logic: the memory repositories, one per memory port, built from
the parts of ``memory_parts.py``; ``context_items.py``, ``sessions.py``, ``threads.py``.
Search, which really differs, stays in the backends (a small subclass each).
"""
