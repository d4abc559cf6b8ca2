"""initial schema

Revision ID: 0001_initial
Revises:
Create Date: 2026-11-30 08:55:14.951280
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0001_initial"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "accounts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("lane", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("platform_user_id", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column("person_id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("display_name", sqlmodel.sql.sqltypes.AutoString(length=256), nullable=False),
        sa.Column("username", sqlmodel.sql.sqltypes.AutoString(length=256), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("lane", "platform_user_id"),
    )
    with op.batch_alter_table("accounts", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_accounts_person_id"), ["person_id"], unique=False)

    op.create_table(
        "attachments",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("message_id", sa.Integer(), nullable=False),
        sa.Column("session_id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("kind", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("filename", sqlmodel.sql.sqltypes.AutoString(length=512), nullable=False),
        sa.Column("mime_type", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("sha256", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("path", sqlmodel.sql.sqltypes.AutoString(length=512), nullable=False),
        sa.Column("text", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("attachments", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_attachments_message_id"), ["message_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_attachments_session_id"), ["session_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_attachments_sha256"), ["sha256"], unique=False)

    op.create_table(
        "group_routes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("lane", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("chat_id", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column("thread_id", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column("session_id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("lane", "chat_id", "thread_id"),
    )
    op.create_table(
        "link_codes",
        sa.Column("code", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("person_id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("code"),
    )
    with op.batch_alter_table("link_codes", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_link_codes_person_id"), ["person_id"], unique=False)

    op.create_table(
        "messages",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("session_id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("role", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("persona_id", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True),
        sa.Column("sender_id", sqlmodel.sql.sqltypes.AutoString(length=160), nullable=True),
        sa.Column("sender_name", sqlmodel.sql.sqltypes.AutoString(length=256), nullable=True),
        sa.Column("lane", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=True),
        sa.Column("platform_chat_id", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=True),
        sa.Column("platform_message_id", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=True),
        sa.Column("ingest_key", sqlmodel.sql.sqltypes.AutoString(length=300), nullable=True),
        sa.Column("reply_to_id", sa.Integer(), nullable=True),
        sa.Column("token_count", sa.Integer(), nullable=False),
        sa.Column("attachment_count", sa.Integer(), nullable=False),
        sa.Column("status", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("ingest_key"),
        sa.UniqueConstraint("session_id", "seq"),
    )
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_messages_reply_to_id"), ["reply_to_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_messages_session_id"), ["session_id"], unique=False)

    op.create_table(
        "persons",
        sa.Column("id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("active_session_id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "sessions",
        sa.Column("id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("kind", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("owner_kind", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("owner_id", sqlmodel.sql.sqltypes.AutoString(length=256), nullable=False),
        sa.Column("persona_id", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True),
        sa.Column("title", sqlmodel.sql.sqltypes.AutoString(length=256), nullable=False),
        sa.Column("last_seq", sa.Integer(), nullable=False),
        sa.Column("document_count", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_sessions_owner_id"), ["owner_id"], unique=False)

    op.create_table(
        "visitor_tokens",
        sa.Column("token_hash", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("visitor_id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("token_hash"),
    )
    with op.batch_alter_table("visitor_tokens", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_visitor_tokens_visitor_id"), ["visitor_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("visitor_tokens", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_visitor_tokens_visitor_id"))

    op.drop_table("visitor_tokens")
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_sessions_owner_id"))

    op.drop_table("sessions")
    op.drop_table("persons")
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_messages_session_id"))
        batch_op.drop_index(batch_op.f("ix_messages_reply_to_id"))

    op.drop_table("messages")
    with op.batch_alter_table("link_codes", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_link_codes_person_id"))

    op.drop_table("link_codes")
    op.drop_table("group_routes")
    with op.batch_alter_table("attachments", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_attachments_sha256"))
        batch_op.drop_index(batch_op.f("ix_attachments_session_id"))
        batch_op.drop_index(batch_op.f("ix_attachments_message_id"))

    op.drop_table("attachments")
    with op.batch_alter_table("accounts", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_accounts_person_id"))

    op.drop_table("accounts")
