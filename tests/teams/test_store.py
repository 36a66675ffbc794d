"""The database gives a team's seats in the order teams/rules.py states, and mirrors access."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from adapters.db.pool import Database
from teams import store as teams
from teams.rules import Member, seat_holders
from tests.helpers import create_user


def test_the_database_seats_members_as_the_rule_says(db: Database) -> None:
    rng = random.Random(34)
    owner = create_user(db, "owner@example.com")
    team = teams.create(db, owner_id=owner, name="Seats").id
    start = datetime(2026, 1, 1, tzinfo=UTC)
    members = [Member(owner, "owner", start)]
    with db.transaction() as conn:
        conn.execute("update public.team_members set joined_at = %s", (start,))
        for n in range(8):
            user = create_user(db, f"m{n}@example.com")
            role = rng.choice(["admin", "member", "member"])
            joined = start + timedelta(hours=rng.randint(1, 100))
            conn.execute(
                "insert into public.team_members (team_id, user_id, role, joined_at)"
                " values (%s, %s, %s, %s)",
                (team, user, role, joined),
            )
            members.append(Member(user, role, joined))
        conn.execute(
            "insert into public.products (name, price, stripe_price_id, type, billing_type,"
            " billing_interval, per_seat) values ('Seats', 5, 'price_seats', 'link',"
            " 'subscription', 'month', true)"
        )
        conn.execute(
            "insert into public.entitlements (account_id, source_id, kind, price_id, status,"
            " active) values (%s, 'sub_seats', 'subscription', 'price_seats', 'active', true)",
            (team,),
        )
        conn.execute("update public.accounts set has_access = true where id = %s", (team,))
    for total in (9, 4, 1, 6):
        teams.set_quantity(db, team, total)
        seated = {m.user_id for m in teams.members(db, team) if m.has_seat}
        assert seated == seat_holders(members, total)
        with_access = db.fetch_all("select id::text as id from public.profiles where has_access")
        assert {row["id"] for row in with_access} == seated
