"""Constraints as ORMs reflect them, compared with MariaDB: SHOW CREATE
TABLE lines for FOREIGN KEY and CHECK constraints, and SQLAlchemy's
inspector (which parses SHOW CREATE TABLE) finding the foreign keys."""

from sqlalchemy import create_engine, inspect


def test_show_create_table_constraints(target):
    conn = target.connect_pymysql(autocommit=True)
    with conn.cursor() as c:
        c.execute("CREATE TABLE p (id INT PRIMARY KEY)")
        c.execute("CREATE TABLE ch (id INT PRIMARY KEY, pid INT, n INT, "
                  "CONSTRAINT ch_p FOREIGN KEY (pid) REFERENCES p (id) ON DELETE CASCADE, "
                  "CONSTRAINT positive CHECK (n > 0))")
        c.execute("SHOW CREATE TABLE ch")
        text = c.fetchone()[1]
    lines = [l.strip().rstrip(",") for l in text.splitlines()]
    assert "CONSTRAINT `ch_p` FOREIGN KEY (`pid`) REFERENCES `p` (`id`) ON DELETE CASCADE" in lines
    assert any(l.startswith("CONSTRAINT `positive` CHECK (") for l in lines)
    assert "KEY `ch_p` (`pid`)" in lines

    url = f"mysql+pymysql://{target.user}:{target.password}@{target.host}:{target.port}/{target.db}"
    engine = create_engine(url)
    try:
        fks = inspect(engine).get_foreign_keys("ch")
    finally:
        engine.dispose()
    assert [(f["name"], f["constrained_columns"], f["referred_table"], f["referred_columns"],
             f["options"].get("ondelete")) for f in fks] == [("ch_p", ["pid"], "p", ["id"], "CASCADE")]
