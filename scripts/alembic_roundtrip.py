"""Alembic round trip against one MySQL-protocol server (scripts/sqlalchemy.sh
runs it for Ladle and MariaDB): on a fresh database, autogenerate a first
revision from a small model, upgrade, check that autogenerate then finds no
difference; change the model (a column, an index, a table), autogenerate and
upgrade again, check again; downgrade to base and check that only
alembic_version is left.

    python alembic_roundtrip.py mysql+pymysql://root@127.0.0.1:PORT

Prints one line per step ("ok" or what went wrong) and exits 1 when a step
fails. Needs alembic and SQLAlchemy importable. Types are compared, server
defaults not (compare_server_default reports `true()` against the reflected
`1` as a change on MariaDB too).
"""

import shutil
import sys
import tempfile
import traceback
from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext

DB = "alembic_roundtrip"

ENV_PY = '''
from alembic import context
import sqlalchemy as sa

config = context.config
engine = sa.create_engine(config.get_main_option("sqlalchemy.url"))
with engine.connect() as connection:
    context.configure(
        connection=connection,
        target_metadata=config.attributes["target_metadata"],
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()
engine.dispose()
'''

SCRIPT_MAKO = '''"""${message}

Revision ID: ${up_revision}
Revises: ${down_revision | comma,n}
"""
from alembic import op
import sqlalchemy as sa
${imports if imports else ""}

revision = ${repr(up_revision)}
down_revision = ${repr(down_revision)}
branch_labels = None
depends_on = None


def upgrade():
    ${upgrades if upgrades else "pass"}


def downgrade():
    ${downgrades if downgrades else "pass"}
'''


def model(second: bool) -> sa.MetaData:
    """The application's tables; `second` is the model after a change."""
    md = sa.MetaData()
    sa.Table(
        "users",
        md,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(50), nullable=False, unique=True),
        sa.Column("email", sa.String(100), index=True),
        sa.Column("active", sa.Boolean, nullable=False, server_default=sa.true()),
        sa.Column("score", sa.Numeric(10, 2)),
        sa.Column("kind", sa.Enum("admin", "member", name="kind")),
        sa.Column("created", sa.DateTime, server_default=sa.func.now()),
        sa.Column("bio", sa.Text),
        *([sa.Column("nickname", sa.String(30))] if second else []),
    )
    sa.Table(
        "posts",
        md,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("user_id", sa.Integer, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("title", sa.String(200), nullable=False),
        sa.Column("body", sa.Text),
        sa.Column("meta", sa.JSON),
        sa.UniqueConstraint("user_id", "title", name="uq_posts_user_title"),
        *([sa.Index("ix_posts_title", "title")] if second else []),
    )
    if second:
        sa.Table(
            "tags",
            md,
            sa.Column("id", sa.Integer, primary_key=True),
            sa.Column("post_id", sa.Integer, sa.ForeignKey("posts.id")),
            sa.Column("label", sa.String(30), nullable=False),
        )
    return md


def diffs(url: str, md: sa.MetaData) -> list:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"compare_type": True})
            return compare_metadata(ctx, md)
    finally:
        engine.dispose()


def tables(url: str) -> list:
    engine = sa.create_engine(url)
    try:
        return sorted(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()


def main() -> int:
    server = sys.argv[1].rstrip("/")
    admin = sa.create_engine(server + "/")
    with admin.begin() as conn:
        conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {DB}")
        conn.exec_driver_sql(f"CREATE DATABASE {DB}")
    admin.dispose()
    url = f"{server}/{DB}?charset=utf8mb4"
    work = Path(tempfile.mkdtemp(prefix="alembic-roundtrip-"))
    (work / "versions").mkdir()
    (work / "env.py").write_text(ENV_PY)
    (work / "script.py.mako").write_text(SCRIPT_MAKO)
    cfg = Config()
    cfg.set_main_option("script_location", str(work))
    cfg.set_main_option("sqlalchemy.url", url)

    failed = False

    def step(name, fn):
        nonlocal failed
        if failed:
            print(f"{name}: not run")
            return None
        try:
            out = fn()
        except Exception as e:  # report and stop: later steps build on it
            failed = True
            last = traceback.format_exception_only(type(e), e)[-1].strip()
            print(f"{name}: FAILED {last[:400]}")
            return None
        print(f"{name}: ok" + (f" ({out})" if out else ""))
        return out

    def autogenerate(md, message):
        cfg.attributes["target_metadata"] = md
        script = command.revision(cfg, message=message, autogenerate=True)
        ops = Path(script.path).read_text().count("op.")
        if ops == 0:
            raise RuntimeError("autogenerate found nothing to do")
        return f"{ops} operations"

    def no_diff(md):
        found = diffs(url, md)
        if found:
            raise RuntimeError(f"{len(found)} differences after upgrade: {found[:4]}")

    def downgraded():
        left = tables(url)
        if left != ["alembic_version"]:
            raise RuntimeError(f"tables left: {left}")

    first, second = model(False), model(True)
    step("autogenerate first revision", lambda: autogenerate(first, "first"))
    step("upgrade to first", lambda: command.upgrade(cfg, "head"))
    step("no difference after first", lambda: no_diff(first))
    step("autogenerate second revision", lambda: autogenerate(second, "second"))
    step("upgrade to second", lambda: command.upgrade(cfg, "head"))
    step("no difference after second", lambda: no_diff(second))
    step("downgrade to first", lambda: command.downgrade(cfg, "-1"))
    step("no difference after downgrade", lambda: no_diff(first))
    step("downgrade to base", lambda: command.downgrade(cfg, "base"))
    step("only alembic_version left", downgraded)
    shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
