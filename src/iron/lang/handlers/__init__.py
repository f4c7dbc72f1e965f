"""How each builtin lowers: one handler per builtin, registered by name in iron.lang.lower_call.HANDLERS.

Importing this package registers them all.
"""

from . import fragments, memory, numeric, roles, threads  # noqa: F401  (imported for their registrations)
