"""The access cycle's rules on plain data: the dispatch table and `decide` over a read state."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from access.changes import TABLE, TrialEnding, to_changes
from access.checkouts import AccessChange, Checkout
from access.decide import Answers, Asks, Pending, ProfileNotLinked, PurchaseNotRecorded, decide
from access.entitlements import Entitlement
from access.model import Account, Purchase, State
from access.refunds import Dispute, Refund
from core.events import Event, parse_event
from tests.helpers import stripe_event

T0 = 1_700_000_000
ADA = Account(
    id="acc_ada", kind="personal", owner_id="usr_ada", email="ada@example.com", name="Ada",
    customer_id="cus_ada", price_id=None, has_access=False, access_changed_at=None,
    price_changed_at=None, customers=("cus_ada",),
)  # fmt: skip


def event(event_type: str, obj: dict[str, Any], *, created: int = T0, event_id: str) -> Event:
    return parse_event(
        json.loads(stripe_event(event_type, obj, created=created, event_id=event_id))
    )


def sub(status: str, **more: Any) -> dict[str, Any]:
    return {"id": "sub_1", "customer": "cus_ada", "status": status, **more}


def renewal(event_id: str, *, created: int = T0) -> Event:
    invoice = {"id": "in_1", "customer": "cus_ada", "subscription": "sub_1"}
    return event("invoice.paid", invoice, created=created, event_id=event_id)


def pending(*events: Event) -> list[Pending]:
    return [Pending(e, to_changes(e)) for e in events]


def state(*claimed: str, held: list[Entitlement] | None = None, **more: Any) -> State:
    fields: dict[str, Any] = {
        "claimed": set(claimed),
        "accounts": [ADA],
        "held": {ADA.id: held or []},
        "purchases": {},
        "recorded": {},
    }
    return State(**{**fields, **more})


@pytest.mark.parametrize(
    ("event_type", "obj", "kind"),
    [
        ("checkout.session.completed", {"id": "cs_1", "payment_status": "paid"}, Checkout),
        ("checkout.session.async_payment_succeeded", {"id": "cs_1"}, Checkout),
        ("customer.subscription.created", sub("active"), AccessChange),
        ("customer.subscription.updated", sub("past_due"), AccessChange),
        ("customer.subscription.deleted", sub("canceled"), AccessChange),
        ("invoice.paid", {"customer": "cus_ada", "subscription": "sub_1"}, AccessChange),
        ("customer.subscription.trial_will_end", sub("trialing"), TrialEnding),
        ("charge.refunded", {"id": "ch_1", "refunded": True}, Refund),
        ("charge.dispute.created", {"id": "dp_1", "charge": "ch_1"}, Dispute),
    ],
)
def test_each_event_that_changes_access_is_a_row_of_the_table(
    event_type: str, obj: dict[str, Any], kind: type
) -> None:
    assert event_type in TABLE
    [change] = to_changes(event(event_type, obj, event_id="evt_1"))
    assert isinstance(change, kind)


def test_an_event_outside_the_table_or_without_a_change_has_none() -> None:
    assert to_changes(event("customer.created", {"id": "cus_ada"}, event_id="evt_1")) == []
    incomplete = event("customer.subscription.updated", sub("incomplete"), event_id="evt_2")
    assert to_changes(incomplete) == []


def test_a_grant_is_written_with_the_account_and_the_ledger() -> None:
    batch = pending(renewal("evt_1"))
    plan = decide(batch, state("evt_1"), Answers())
    assert plan.results == ["granted"]
    assert plan.settled == {"evt_1": "granted"}
    [grant] = plan.grants.values()
    assert (grant.account_id, grant.source_id, grant.active) == (ADA.id, "sub_1", True)
    after, set_by = plan.accounts[ADA.id]
    assert (after.has_access, set_by) == (True, "evt_1")
    assert after.access_changed_at == datetime.fromtimestamp(T0, tz=UTC)


def test_changes_are_folded_oldest_first_and_an_older_one_is_stale() -> None:
    ended = event("customer.subscription.deleted", sub("canceled"), created=T0 + 5,
                  event_id="evt_end")  # fmt: skip
    batch = pending(ended, renewal("evt_old", created=T0))
    plan = decide(batch, state("evt_end", "evt_old"), Answers())
    assert plan.results == ["revoked", "granted"]  # the renewal came first, the end after
    assert plan.accounts[ADA.id][0].has_access is False
    [(n, (announced, _))] = plan.announcements
    assert (n, announced.type) == (0, "app.access.revoked")


def test_a_stale_change_writes_no_grant() -> None:
    applied = Entitlement(account_id=ADA.id, source_id="sub_1", kind="subscription",
                          price_id=None, status="canceled", active=False,
                          changed_at=datetime.fromtimestamp(T0 + 9, tz=UTC))  # fmt: skip
    plan = decide(pending(renewal("evt_1")), state("evt_1", held=[applied]), Answers())
    assert plan.results == ["stale"]
    assert plan.grants == {}


def test_a_stale_change_tells_the_price_a_grant_made_without_one_lacks() -> None:
    renewed = Entitlement(account_id=ADA.id, source_id="sub_1", kind="subscription",
                          price_id=None, status="active", active=True,
                          changed_at=datetime.fromtimestamp(T0 + 9, tz=UTC))  # fmt: skip
    items = {"data": [{"price": {"id": "price_seat"}}]}
    created = event("customer.subscription.created", sub("active", items=items),
                    event_id="evt_0")  # fmt: skip
    plan = decide(pending(created), state("evt_0", held=[renewed]), Answers())
    assert plan.results == ["stale"]
    assert plan.grants == {"sub_1": replace(renewed, price_id="price_seat")}
    assert ADA.id in plan.accounts  # written again: a team's seats are given out again
    known = replace(renewed, price_id="price_other")
    plan = decide(pending(created), state("evt_0", held=[known]), Answers())
    assert (plan.results, plan.grants) == (["stale"], {})  # a known price stays


def test_a_customer_without_an_account_has_its_claim_undone() -> None:
    plan = decide(pending(renewal("evt_1")), state("evt_1", accounts=[]), Answers())
    [result] = plan.results
    assert isinstance(result, ProfileNotLinked)
    assert (plan.released, plan.settled) == (["evt_1"], {})


@pytest.mark.parametrize("accounts", [[ADA], []])
def test_a_full_refund_ends_its_purchase_only_over_the_account_it_locked(
    accounts: list[Account],
) -> None:
    """A purchase read without its account (its checkout committed while the claim ran): the
    refund is retried, never recorded with the access it ends left on."""
    granted = Entitlement(account_id=ADA.id, source_id="cs_1", kind="purchase",
                          price_id="price_1", status="paid", active=True,
                          changed_at=datetime.fromtimestamp(T0, tz=UTC))  # fmt: skip
    bought = Purchase(id="pu_1", session_id="cs_1", account_id=ADA.id, one_time=True,
                      repository=None, github_username=None)  # fmt: skip
    charge = {"id": "ch_1", "payment_intent": "pi_1", "refunded": True, "amount_refunded": 4900}
    refund = event("charge.refunded", charge, created=T0 + 60, event_id="evt_refund")
    read = state("evt_refund", held=[granted], accounts=accounts, purchases={"pi_1": bought})
    plan = decide(pending(refund), read, Answers())
    if accounts:
        assert plan.results == ["refunded, access revoked"]
        assert plan.accounts[ADA.id][0].has_access is False
        return
    [result] = plan.results
    assert isinstance(result, PurchaseNotRecorded)
    assert (plan.released, plan.settled, plan.refunds, plan.asks) == (
        ["evt_refund"],
        {},
        [],
        Asks(),
    )


def test_a_tie_asks_stripe_and_its_answer_decides() -> None:
    applied = Entitlement(account_id=ADA.id, source_id="sub_1", kind="subscription",
                          price_id=None, status="active", active=True,
                          changed_at=datetime.fromtimestamp(T0, tz=UTC))  # fmt: skip
    tie = pending(event("customer.subscription.updated", sub("canceled"), event_id="evt_tie"))
    read = state("evt_tie", held=[applied])
    assert decide(tie, read, Answers()).asks.statuses == {"sub_1"}
    answered = decide(tie, read, Answers(statuses={"sub_1": "canceled"}))
    assert (answered.asks.statuses, answered.results) == (frozenset(), ["revoked"])


def test_a_redelivery_changes_nothing_and_announces_again() -> None:
    ended = event("customer.subscription.deleted", sub("canceled"), event_id="evt_end")
    read = state(accounts=[], known=[ADA], recorded={"evt_end": "revoked"})
    plan = decide(pending(ended, ended), read, Answers())
    assert plan.results == ["duplicate", "duplicate"]
    assert (plan.grants, plan.accounts, plan.settled) == ({}, {}, {})
    assert [announced.id for _, (announced, _) in plan.announcements] == ["revoked_evt_end"]


def test_a_paid_checkout_links_its_buyer_records_the_purchase_and_grants() -> None:
    session = {"id": "cs_1", "client_reference_id": "00000000-0000-4000-8000-000000000001",
               "customer": "cus_new", "payment_status": "paid", "mode": "payment",
               "customer_details": {"email": "ada@example.com"}}  # fmt: skip
    buyer = replace(ADA, owner_id="00000000-0000-4000-8000-000000000001", customer_id=None)
    checkout = event("checkout.session.completed", session, event_id="evt_co")
    [change] = to_changes(checkout)
    assert isinstance(change, Checkout)
    batch = [Pending(checkout, [replace(change, price_id="price_kit")])]
    plan = decide(batch, state("evt_co", accounts=[buyer]), Answers())
    assert plan.results == ["granted"]
    after, _ = plan.accounts[buyer.id]
    assert (after.customer_id, after.price_id, after.has_access) == ("cus_new", "price_kit", True)
    [record] = plan.purchases
    assert (record.account_id, record.user_id) == (buyer.id, buyer.owner_id)
    assert [a.type for _, (a, _) in plan.announcements] == ["app.access.granted"]


TEAM = replace(ADA, id="acc_team", kind="team", customer_id=None)


def test_a_checkout_for_a_team_links_and_grants_the_teams_account_not_the_buyers() -> None:
    session = {
        "id": "cs_team", "customer": "cus_team", "client_reference_id": None,
        "payment_status": "paid", "subscription": "sub_team", "mode": "subscription",
        "metadata": {"price_id": "price_seat", "team_id": "6f1c1f8e-0000-4000-8000-000000000001"},
    }  # fmt: skip
    checkout = event("checkout.session.completed", session, event_id="evt_c")
    [change] = to_changes(checkout)
    assert isinstance(change, Checkout)
    team = replace(TEAM, id=change.account_id or "")
    found = state("evt_c", accounts=[ADA, team])
    plan = decide(pending(checkout), found, Answers())
    assert set(plan.accounts) == {team.id}
    after, _ = plan.accounts[team.id]
    assert (after.customer_id, after.has_access) == ("cus_team", True)
    assert plan.purchases[0].account_id == team.id
    alone = decide(pending(checkout), state("evt_c"), Answers())  # the team is not read yet
    assert isinstance(alone.results[0], ProfileNotLinked)


def test_a_teams_checkout_gives_its_seats_at_once_and_a_newer_quantity_wins() -> None:
    """The success page applies the checkout before Stripe's subscription events arrive: the
    seats bought (its line item's quantity) hold at once; a later quantity still wins."""
    team_id = "6f1c1f8e-0000-4000-8000-000000000001"
    session = {
        "id": "cs_team", "customer": "cus_team", "client_reference_id": None,
        "payment_status": "paid", "subscription": "sub_team", "mode": "subscription",
        "metadata": {"price_id": "price_seat", "team_id": team_id},
        "line_items": {"data": [{"price": {"id": "price_seat"}, "quantity": 3}]},
    }  # fmt: skip
    checkout = event("checkout.session.completed", session, event_id="evt_c")
    team = replace(TEAM, id=team_id)
    plan = decide(pending(checkout), state("evt_c", accounts=[team]), Answers())
    assert plan.quantities == {team_id: 3}
    items = {"data": [{"price": {"id": "price_seat"}, "quantity": 2}]}
    fewer = event("customer.subscription.updated",
                  {**sub("active", items=items), "customer": "cus_team"}, created=T0 + 9,
                  event_id="evt_fewer")  # fmt: skip
    linked = replace(team, customers=("cus_team",))
    both = decide(pending(fewer, checkout), state("evt_c", "evt_fewer", accounts=[linked]),
                  Answers())  # fmt: skip
    assert both.quantities == {team_id: 2}
    # Stripe's checkout event, delivered after a seat change made in the same second as it was
    # sent, is dated by its session's opening: it does not give the seat back.
    late = event("checkout.session.completed", {**session, "created": T0 - 30},
                 created=T0 + 9, event_id="evt_c2")  # fmt: skip
    after = decide(pending(fewer, late), state("evt_c2", "evt_fewer", accounts=[linked]),
                   Answers())  # fmt: skip
    assert after.quantities == {team_id: 2}


def test_a_teams_subscription_quantity_is_its_seats_ordered_on_its_own() -> None:
    team = replace(TEAM, customer_id="cus_ada")
    items = {"data": [{"price": {"id": "price_seat"}, "quantity": 5}]}
    newer = event("customer.subscription.updated", sub("active", items=items), created=T0 + 9,
                  event_id="evt_new")  # fmt: skip
    older_items = {"data": [{"price": {"id": "price_seat"}, "quantity": 2}]}
    older = event("customer.subscription.updated", sub("active", items=older_items),
                  created=T0, event_id="evt_old")  # fmt: skip
    found = state("evt_new", "evt_old", accounts=[team])
    plan = decide(pending(older, newer), found, Answers())
    assert plan.quantities == {team.id: 5}
    assert plan.quantity_at == {team.id: newer.created}  # the write keeps the newest
    personal = decide(pending(newer), state("evt_new"), Answers())
    assert personal.quantities == {}  # a person's own subscription has no seats
    # A renewal applied first (newer, naming no quantity) leaves the grant's change stale, not
    # the quantity the older event says.
    renewed = Entitlement(account_id=team.id, source_id="sub_1", kind="subscription",
                          price_id="price_seat", status="active", active=True,
                          changed_at=datetime.fromtimestamp(T0 + 20, tz=UTC))  # fmt: skip
    read = replace(state("evt_old", accounts=[team]), held={team.id: [renewed]})
    late = decide(pending(older), read, Answers())
    assert late.results == ["stale"]
    assert late.quantities == {team.id: 2}
