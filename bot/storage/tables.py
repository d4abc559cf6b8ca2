"""Imports every table module so `SQLModel.metadata` knows them all.

Alembic's environment and the test fixtures import this one module; a package
that adds tables (context records, memory) adds its module here.
"""

from bot.storage import (  # noqa: F401
    approval_models,
    context_models,
    delivery_models,
    job_models,
    memory_models,
    models,
    pairing_models,
    profile_models,
    reminder_models,
)
