"""Credits in Postgres: one statement decides and consumes, so parallel consumptions never
overdraw; a key answers once; a reservation gives back what the work did not take; the balance
counts only live grants; the overage of an account billed on a meter is recorded for the meter."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from adapters.db.pool import Database
from credits import store as credits
from credits.rules import Check, Taken
from teams import store as teams
from tests.adapters.db.test_schema import as_role
from tests.helpers import create_user


@pytest.fixture
def wide(database_url: str, db: Database) -> Iterator[Database]:
    """A pool wide enough for consumptions to race (the emptied test database)."""
    database = Database(lambda: database_url, max_size=16)
    yield database
    database.close()


def account(db: Database, user_id: str) -> str:
    [row] = db.fetch_all(
        "select id from public.accounts where owner_id = %s and kind = 'personal'", (user_id,)
    )
    return str(row["id"])


def grant(
    db: Database,
    account_id: str,
    amount: int,
    *,
    source: str,
    kind: str = "period",
    expires_at: datetime | None = None,
    ended: bool = False,
) -> None:
    """A grant as the access cycle writes one."""
    with db.transaction() as conn:
        conn.execute(
            "insert into public.credit_grants (account_id, feature, source, kind, amount,"
            " starts_at, expires_at, ended_at) values (%s, 'generations', %s, %s, %s, now(),"
            " %s, case when %s then now() end)",
            (account_id, source, kind, amount, expires_at, ended),
        )


def test_parallel_consumptions_never_overdraw_and_each_key_answers_once(
    db: Database, wide: Database
) -> None:
    acct = account(db, create_user(db, "ada@example.com"))
    grant(db, acct, 100, source="sub_1@1")

    def one(n: int) -> str:
        return credits.take(wide, acct, "generations", 1, f"key-{n}").state

    with ThreadPoolExecutor(16) as pool:
        states = Counter(pool.map(one, range(150)))
    assert states == {"consumed": 100, "refused": 50}
    assert credits.balance(db, acct, "generations").balance == 0
    with ThreadPoolExecutor(16) as pool:  # every key again: the first answers, nothing taken
        again = Counter(pool.map(one, range(150)))
    assert again == states
    grant(db, acct, 10, source="cs_pack", kind="once")
    assert credits.take(db, acct, "generations", 1, "key-149").state == "refused"  # as first
    assert credits.balance(db, acct, "generations").balance == 10
    [used] = db.fetch_all("select sum(used) as used from public.credit_grants")
    assert used["used"] == 100


def test_a_key_used_for_another_consumption_is_a_conflict(db: Database) -> None:
    acct = account(db, create_user(db, "ada@example.com"))
    grant(db, acct, 5, source="sub_1@1")
    assert credits.take(db, acct, "generations", 2, "k").balance == 3
    assert credits.take(db, acct, "generations", 3, "k").state == "conflict"
    assert credits.balance(db, acct, "generations").balance == 3


def test_period_credits_go_first_and_only_live_grants_count(db: Database) -> None:
    acct = account(db, create_user(db, "ada@example.com"))
    grant(db, acct, 5, source="cs_pack", kind="once")
    grant(db, acct, 3, source="sub_1@1")
    grant(db, acct, 50, source="sub_1@0", ended=True)  # the period before: replaced
    grant(db, acct, 50, source="cs_old", kind="once", expires_at=datetime.now(UTC) - timedelta(1))
    assert credits.take(db, acct, "generations", 4, "k1").balance == 4
    rows = db.fetch_all("select source, used from public.credit_grants order by source")
    assert {r["source"]: r["used"] for r in rows} == {
        "cs_old": 0, "cs_pack": 1, "sub_1@0": 0, "sub_1@1": 3,
    }  # fmt: skip
    held = credits.balance(db, acct, "generations")
    assert (held.balance, held.granted, held.used) == (4, 8, 4)


def test_a_reservation_is_settled_at_what_the_work_took_or_released(db: Database) -> None:
    acct = account(db, create_user(db, "ada@example.com"))
    grant(db, acct, 10, source="sub_1@1")
    assert credits.take(db, acct, "generations", 6, "r1", reserve=True).state == "reserved"
    assert credits.balance(db, acct, "generations").balance == 4
    settled = credits.settle(db, "r1", 2)
    assert (settled.state, settled.balance) == ("consumed", 8)
    assert credits.settle(db, "r1", 1).balance == 8  # settled once
    credits.take(db, acct, "generations", 5, "r2", reserve=True)
    assert credits.settle(db, "r2", 0).state == "released"
    assert credits.balance(db, acct, "generations").balance == 8
    assert credits.settle(db, "r3", 0).state == "unknown"
    credits.take(db, acct, "generations", 1, "r4", reserve=True)
    assert credits.settle(db, "r4", 2).state == "conflict"  # more than was reserved


def test_beyond_the_credits_an_account_billed_on_a_meter_consumes_the_overage(
    db: Database,
) -> None:
    user = create_user(db, "ada@example.com")
    acct = account(db, user)
    with db.transaction() as conn:
        conn.execute(
            "insert into public.products (name, price, stripe_price_id, type, billing_type,"
            " billing_interval, credits, meter) values ('Pro', 9, 'price_pro', 'link',"
            " 'subscription', 'month', '{\"generations\": 2}', 'gen_over')"
        )
        conn.execute(
            "insert into public.entitlements (account_id, source_id, kind, price_id, status,"
            " active, customer_id) values (%s, 'sub_1', 'subscription', 'price_pro', 'active',"
            " true, 'cus_1')",
            (acct,),
        )
        conn.execute("update public.accounts set customer_id = 'cus_1' where id = %s", (acct,))
    grant(db, acct, 2, source="sub_1@1")
    taken = credits.take(db, acct, "generations", 5, "k1")
    assert (taken.state, taken.balance, taken.overage) == ("consumed", 0, 3)
    [use] = db.fetch_all("select covered, overage, meter, customer_id from public.credit_uses")
    assert use == {"covered": 2, "overage": 3, "meter": "gen_over", "customer_id": "cus_1"}


def test_credits_of_answers_the_signed_in_users_own_balance(db: Database) -> None:
    ada, bob = create_user(db, "ada@example.com"), create_user(db, "bob@example.com")
    grant(db, account(db, ada), 7, source="sub_1@1")
    for user, expected in ((ada, 7), (bob, 0)):
        with as_role(db, "authenticated", user) as conn:
            row = conn.execute("select public.credits_of('generations') as n").fetchone()
            assert row is not None
            assert row["n"] == expected
    with (
        as_role(db, "authenticated", ada) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        conn.execute("select public.consume_credits(gen_random_uuid(), 'generations', 1, 'k')")


def test_a_key_answers_the_same_when_the_pool_a_person_draws_from_changed(db: Database) -> None:
    owner = create_user(db, "owner@example.com")
    team = teams.create(db, owner_id=owner, name="Pool").id  # the owner holds a seat
    grant(db, team, 5, source="sub_team@1")
    first, drawn = credits.take_for(db, owner, "generations", 2, "k")
    assert (first.state, first.balance, drawn) == ("consumed", 3, team)
    grant(db, account_of_owner := account(db, owner), 50, source="cs_own", kind="once")
    again, where = credits.take_for(db, owner, "generations", 2, "k")  # now their own pool
    assert (again.state, again.balance, again.first, where) == ("consumed", 3, False, team)
    assert credits.take_for(db, owner, "generations", 2, "k2")[1] == account_of_owner
    stranger = "00000000-0000-4000-8000-000000000000"
    assert credits.take_for(db, stranger, "generations", 1, "k3") == (
        Taken(state="unknown", feature="generations"),
        None,
    )


def test_a_reports_claim_sent_again_is_its_own_and_no_one_elses(db: Database) -> None:
    """Found by the fault run: a claim committed on a connection killed before its answer came
    back was sent again, found the row claimed, and the overage was never reported."""
    user = create_user(db, "ada@example.com")
    with db.transaction() as conn:
        conn.execute(
            "insert into public.credit_uses (key, account_id, feature, amount, state, overage,"
            " balance, meter, customer_id) select 'k', a.id, 'generations', 1, 'consumed', 1,"
            " 0, 'm', 'cus_1' from public.accounts a where a.owner_id = %s",
            (user,),
        )
    mine, theirs = str(uuid.uuid4()), str(uuid.uuid4())
    assert [r["key"] for r in credits.claim_reports(db, ["k"], mine)] == ["k"]
    assert [r["key"] for r in credits.claim_reports(db, ["k"], mine)] == ["k"]  # sent again
    assert credits.claim_reports(db, ["k"], theirs) == []  # held by the first
    credits.reported(db, ["k"])
    assert credits.claim_reports(db, ["k"], mine) == []


def metered_plan(db: Database, acct: str, *, status: str = "active") -> None:
    """A plan of `generations` whose overage a meter bills, held by `acct` as cus_1 pays it."""
    with db.transaction() as conn:
        conn.execute(
            "insert into public.products (name, price, stripe_price_id, type, billing_type,"
            " billing_interval, credits, meter) values ('Pro', 9, 'price_pro', 'link',"
            " 'subscription', 'month', '{\"generations\": 4}', 'gen_over')"
            " on conflict do nothing"
        )
        conn.execute("update public.accounts set customer_id = 'cus_1' where id = %s", (acct,))
        conn.execute(
            "insert into public.entitlements (account_id, source_id, kind, price_id, status,"
            " active, customer_id) values (%s, 'sub_1', 'subscription', 'price_pro', %s, true,"
            " 'cus_1')",
            (acct, status),
        )


def test_settling_reservations_that_went_into_overage_keeps_what_they_used(
    db: Database,
) -> None:
    """Three reservations of up to 10 over a plan of 4 billed on a meter, each settled at 5:
    15 used, 4 of them credits, 11 billed; nothing given back that was used."""
    acct = account(db, create_user(db, "ada@example.com"))
    metered_plan(db, acct)
    grant(db, acct, 4, source="sub_1@1")
    with as_role(db, "service_role") as conn:
        for n in range(3):
            conn.execute(
                "select public.credit_take(%s, 'generations', 10, %s, 'reserved')",
                (acct, f"r{n}"),
            )
        for n in range(3):
            conn.execute("select public.credits_settle(%s, 5)", (f"r{n}",))
        row = conn.execute(
            "select (select sum(amount - used) from public.credit_grants) as balance,"
            " sum(covered) as covered, sum(overage) as overage, sum(amount) as used"
            " from public.credit_uses"
        ).fetchone()
    assert row == {"balance": 0, "covered": 4, "overage": 11, "used": 15}


def test_a_key_taken_by_one_person_is_a_conflict_for_another_drawing_on_the_same_pool(
    db: Database,
) -> None:
    """Two people (or the team itself) sending one key to one pool: the second is refused, never
    answered the first's consumption as its own (a consumption it would not pay for)."""
    owner, member = create_user(db, "owner@example.com"), create_user(db, "member@example.com")
    team = teams.create(db, owner_id=owner, name="Pool").id
    with db.transaction() as conn:
        conn.execute(
            "insert into public.team_members (team_id, user_id, role) values (%s, %s, 'member')",
            (team, member),
        )
    grant(db, team, 6, source="sub_team@1")
    first, drawn = credits.take_for(db, owner, "generations", 2, "shared")
    assert (first.state, first.balance, drawn) == ("consumed", 4, team)
    other, _ = credits.take_for(db, member, "generations", 2, "shared")
    assert other.state == "conflict"
    assert credits.take(db, team, "generations", 2, "by-team").first
    mine, _ = credits.take_for(db, member, "generations", 2, "by-team")
    assert mine.state == "conflict"
    assert credits.take_for(db, member, "generations", 2, "own")[0].first
    again, _ = credits.take_for(db, owner, "generations", 2, "shared")  # its own: the same
    assert (again.state, again.first) == ("consumed", False)
    [row] = db.fetch_all("select sum(amount - used) as left from public.credit_grants")
    assert row["left"] == 0


def test_a_check_says_what_a_consumption_would_answer_and_takes_nothing(db: Database) -> None:
    """On a plan billed on a meter, beyond the credits a check allows with overage, as the
    consumption then does; past due, it refuses, as the consumption then does."""
    acct = account(db, create_user(db, "ada@example.com"))
    metered_plan(db, acct)
    grant(db, acct, 4, source="sub_1@1")
    assert credits.check(db, acct, "generations", 4) == Check("generations", True, 4, False)
    assert credits.check(db, acct, "generations", 5) == Check("generations", True, 4, True)
    assert db.fetch_all("select * from public.credit_uses") == []
    taken = credits.take(db, acct, "generations", 5, "k1")
    assert (taken.state, taken.overage) == ("consumed", 1)
    with db.transaction() as conn:
        conn.execute("update public.entitlements set status = 'past_due' where source_id = 'sub_1'")
    assert credits.check(db, acct, "generations", 1) == Check("generations", False, 0, False)
    assert credits.take(db, acct, "generations", 1, "k2").state == "refused"
    stranger = "00000000-0000-4000-8000-000000000000"
    assert credits.check_for(db, stranger, "generations", 1) is None


def test_parallel_overage_never_passes_its_cap_and_a_check_says_so(
    db: Database, wide: Database
) -> None:
    """Pay as you go (no credits held) on a plan whose overage is capped at 7 units a period:
    of 40 parallel consumptions of 1, exactly 7 are taken; the rest are refused as capped,
    each key answering the same again, and a check then says no."""
    acct = account(db, create_user(db, "ada@example.com"))
    metered_plan(db, acct)
    with db.transaction() as conn:
        conn.execute(
            "update public.products set overage_cap = 7 where stripe_price_id = 'price_pro'"
        )
    assert credits.check(db, acct, "generations", 7) == Check("generations", True, 0, True)
    assert credits.check(db, acct, "generations", 8) == Check("generations", False, 0, False)

    def one(n: int) -> tuple[str, bool]:
        taken = credits.take(wide, acct, "generations", 1, f"key-{n}")
        return taken.state, taken.capped

    with ThreadPoolExecutor(16) as pool:
        states = Counter(pool.map(one, range(40)))
    assert states == {("consumed", False): 7, ("refused", True): 33}
    with ThreadPoolExecutor(16) as pool:
        assert Counter(pool.map(one, range(40))) == states
    [row] = db.fetch_all("select sum(overage) as units from public.credit_uses")
    assert row["units"] == 7
    assert credits.check(db, acct, "generations", 1).allowed is False
    grant(db, acct, 2, source="cs_pack", kind="once")  # credits still go, the cap aside
    assert credits.check(db, acct, "generations", 2) == Check("generations", True, 2, False)
    assert credits.take(db, acct, "generations", 3, "beyond").capped
    assert credits.take(db, acct, "generations", 2, "within").state == "consumed"


def test_consumptions_in_flight_together_are_taken_in_one_statement_each_as_alone(
    database_url: str, db: Database
) -> None:
    """60 parallel consumptions on a pool of 2 connections, over 40 credits of two accounts
    and a person's pool: they go in batches (fewer transactions than consumptions), each
    answered as it would be alone (40 taken, never below zero, each key once); one whose
    statement fails (a key too long for its column) fails alone, its batch's others taken."""
    narrow = Database(lambda: database_url, max_size=2)
    first, second = (account(db, create_user(db, f"{n}@example.com")) for n in ("a", "b"))
    person = create_user(db, "c@example.com")
    grant(db, first, 20, source="sub_1@1")
    grant(db, second, 10, source="sub_2@1")
    grant(db, account(db, person), 10, source="sub_3@1")

    def one(n: int) -> str:
        if n % 3 == 2:
            return credits.take_for(narrow, person, "generations", 1, f"key-{n}")[0].state
        acct = first if n % 3 == 0 else second
        return credits.take(narrow, acct, "generations", 1, f"key-{n}").state

    try:
        with ThreadPoolExecutor(30) as pool:
            states = Counter(pool.map(one, range(60)))
        assert states == {"consumed": 40, "refused": 20}
        [row] = db.fetch_all(
            "select count(*) as uses, count(distinct xmin::text) as transactions,"
            " (select min(amount - used) from public.credit_grants) as least"
            " from public.credit_uses"
        )
        assert row["uses"] == 60
        assert row["transactions"] < 60  # taken together
        assert row["least"] == 0
        with ThreadPoolExecutor(30) as pool:
            assert Counter(pool.map(one, range(60))) == states  # each key answers the same

        def odd(n: int) -> str:
            key = "x" * 101 if n == 0 else f"odd-{n}"
            return credits.take(narrow, first, "generations", 1, key).state

        with ThreadPoolExecutor(10) as pool:
            futures = [pool.submit(odd, n) for n in range(10)]
        with pytest.raises(Exception, match="credit_uses_key_check"):
            futures[0].result()
        assert {f.result() for f in futures[1:]} == {"refused"}  # the credits are used up
    finally:
        narrow.close()
