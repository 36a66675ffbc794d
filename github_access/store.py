"""GitHub grants in Postgres: the one GitHub account each repository purchase was delivered to."""

from __future__ import annotations

from adapters.db.pool import Database


def granted_to(db: Database, purchase_id: str) -> str | None:
    """The GitHub account a purchase went to, if any."""
    rows = db.fetch_all(
        "select github_username from public.github_grants where purchase_id = %s", (purchase_id,)
    )
    return str(rows[0]["github_username"]) if rows else None


def claim(db: Database, *, purchase_id: str, user_id: str, username: str) -> tuple[str, bool]:
    """Grant the purchase to `username` unless it went to someone already.

    Returns the account it is granted to and whether this call granted it; the unique
    purchase_id settles two racing requests for different accounts.
    """
    while True:  # a claim released between the insert and the read: claim again
        with db.transaction() as conn:
            row = conn.execute(
                "insert into public.github_grants (purchase_id, user_id, github_username)"
                " values (%s, %s, %s) on conflict (purchase_id) do nothing returning id",
                (purchase_id, user_id, username),
            ).fetchone()
        if row is not None:
            return username, True
        if (holder := granted_to(db, purchase_id)) is not None:
            return holder, False


def release(db: Database, purchase_id: str) -> None:
    """Undo a claim whose invitation failed, so the buyer can name another account."""
    with db.transaction() as conn:
        conn.execute("delete from public.github_grants where purchase_id = %s", (purchase_id,))
