"""after-turn jobs: the SQLite job table, and procrastinate's schema on PostgreSQL

Revision ID: 0007_jobs
Revises: 0006_repair_search_index
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0007_jobs"
down_revision = "0006_repair_search_index"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("session_id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("run_after", sa.DateTime(timezone=True), nullable=False),
        sa.Column("claimed_by", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_jobs_run_after"), ["run_after"], unique=False)
        batch_op.create_index(
            "ix_jobs_waiting",
            ["name", "session_id"],
            unique=True,
            sqlite_where=sa.text("claimed_by IS NULL"),
            postgresql_where=sa.text("claimed_by IS NULL"),
        )
    bind = op.get_bind()
    if bind.dialect.name == "postgresql" and not sa.inspect(bind).has_table("procrastinate_jobs"):
        # On PostgreSQL the jobs run on procrastinate: its tables, functions and
        # triggers, as the installed version ships them, join this database.
        from procrastinate.schema import SchemaManager

        driver = bind.connection.driver_connection
        assert driver is not None
        driver.execute(SchemaManager.get_schema())


def downgrade() -> None:
    # procrastinate's own objects stay: they may hold jobs of other applications.
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index("ix_jobs_waiting")
        batch_op.drop_index(batch_op.f("ix_jobs_run_after"))
    op.drop_table("jobs")
