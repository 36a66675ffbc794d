"""Leaving: a person's export of what is stored about them, and the deletion of their account,
recorded first and finished by any retry (the rules: accounts/leaving_rules.py)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from accounts import leaving_rules as rules
from accounts import leaving_store as store
from accounts.leaving_store import Deletion
from adapters.accounts import AccountError, Accounts
from adapters.bus import EventBus, PublishError, publish_or_unavailable
from adapters.db import profiles
from adapters.db.pool import Database
from adapters.github_api import GitHubGateway, GitHubNotConfigured, GitHubUnavailable
from adapters.stripe_api import PaymentsUnavailable, StripeCallFailed, StripeGateway
from adapters.tokens import User
from core.app_events import ACCOUNT_DELETED, ACCOUNT_DELETION_REQUESTED
from core.errors import Conflict, InvalidRequest, NotConfigured, NotFound, Unavailable
from core.events import Event, app_event
from teams import seats

log = logging.getLogger(__name__)

# A redaction job's statuses: Stripe still validating it, and those in which it went ahead.
_VALIDATING = frozenset({"created", "validating"})
_UNDER_WAY = frozenset({"redacting", "succeeded"})
_RUNNING_NOW = "Your account's deletion is running now; ask again in a minute"


@dataclass(frozen=True)
class Leaving:
    """What a deletion's steps call: the database and the services the person's data is in."""

    db: Database
    stripe: StripeGateway
    github: GitHubGateway
    accounts: Accounts
    bus: EventBus
    # The preview API version the Stripe account may use redaction jobs under; None: it may not.
    redaction_api_version: str | None


@dataclass(frozen=True)
class Deletions:
    """How the api takes a deletion. In one process its steps run in the request (`steps`).
    With the Pub/Sub design the api holds no secret key (deleting the Auth user takes
    Supabase's): it records the deletion and publishes `app.account.deletion_requested`, and
    the access target, which holds the keys, runs the steps (`steps` None)."""

    db: Database
    bus: EventBus
    steps: Leaving | None


@dataclass(frozen=True)
class Outcome:
    deletion_id: str
    remaining: list[str]  # steps still to run (Stripe still validating a redaction): none when done
    # The steps are the access target's to run (the Pub/Sub design).
    handed_over: bool = False

    @property
    def finished(self) -> bool:
        return not self.remaining and not self.handed_over


def export(user: User, *, db: Database) -> dict[str, Any]:
    """Everything stored about the signed-in person, theirs alone."""
    profile = profiles.by_id(db, user.id)
    email = (profile.email if profile else None) or user.email
    return {"exportedAt": datetime.now(UTC).isoformat(), **store.export_of(db, user.id, email)}


def delete_account(user: User, confirm: Any, *, deletions: Deletions) -> Outcome:
    """Delete the signed-in person's account: recorded first, then every step not done yet,
    here or handed to the access target. A deletion under way is resumed (the same call
    again)."""
    deletion = _recorded(user, confirm, deletions.db)
    if deletions.steps is not None:
        return resume(deletion, deps=deletions.steps)
    return _hand_over(deletion, deletions)


def _recorded(user: User, confirm: Any, db: Database) -> Deletion:
    """The person's deletion, confirmed: the one under way, or recorded now with its plan."""
    under_way = store.open_deletion(db, user.id)
    if under_way is not None:
        _refuse_unconfirmed(confirm, under_way.email or user.email)
        return under_way
    profile = profiles.by_id(db, user.id)
    if profile is None:
        raise NotFound("There is no account to delete")
    email = profile.email or user.email
    _refuse_unconfirmed(confirm, email)
    teams = store.memberships(db, user.id)
    if (held := rules.last_owner_of(teams)) is not None:
        raise Conflict(rules.refusal_for(held))
    closed = rules.closed_teams(teams)
    subscriptions, repositories, customers = store.plan_facts(db, user.id, closed)
    plan = rules.DeletionPlan(
        email=email,
        name=profile.name,
        subscriptions=subscriptions,
        repositories=repositories,
        teams_left=[t.team_id for t in teams if t.team_id not in closed],
        teams_closed=closed,
        customers=customers,
    )
    try:
        return store.record(db, user_id=user.id, plan=plan, holds=rules.last_owner_of)
    except store.Held as late:  # another owner's deletion was recorded since the read above
        raise Conflict(rules.refusal_for(late.team)) from None


def _hand_over(deletion: Deletion, deletions: Deletions) -> Outcome:
    """Ask the access target to run the steps. Its id is the deletion's: asking again (the
    same call, after an outage of the bus) asks for the same, and the record says what is
    done."""
    if store.running(deletions.db, deletion.id):
        raise Conflict(_RUNNING_NOW)
    event, data = app_event(
        ACCOUNT_DELETION_REQUESTED,
        event_id=f"account_deletion_{deletion.id}",
        obj={"deletion_id": deletion.id},
        created=datetime.now(UTC),
    )
    publish_or_unavailable(
        deletions.bus, event, data, told=_later("The deletion could not be handed on")
    )
    return Outcome(deletion.id, rules.remaining(deletion.steps_done), handed_over=True)


def resume_requested(deletion_id: str, *, deps: Leaving) -> str:
    """The access target's handling of `app.account.deletion_requested`: the steps not done
    yet. A step that fails raises, and so does finding the deletion held by another call
    (running now): the delivery comes back later, and the steps recorded are not done again.
    What it returns acknowledges the delivery: `deleted`, `waiting` (Stripe still validates a
    redaction: a later call or `account-deletions resume` finishes it), or `duplicate`."""
    deletion = store.by_id(deps.db, deletion_id)
    if deletion is None:
        raise NotFound(f"No account deletion {deletion_id}")
    if deletion.finished:
        return "duplicate"
    return "waiting" if resume(deletion, deps=deps).remaining else "deleted"


def resume_requested_many(events: Sequence[Event], *, deps: Leaving) -> list[str | Exception]:
    """Each `app.account.deletion_requested`'s steps, on their own: no transaction is open
    across them, and each step is recorded as it succeeds (its calls to Stripe, GitHub and
    Supabase Auth come first). A deletion that fails is retried by the bus; the others stand."""
    results: list[str | Exception] = []
    for event in events:
        try:
            results.append(resume_requested(str(event.object["deletion_id"]), deps=deps))
        except Exception as exc:  # retried by the bus; the steps done stay done
            results.append(exc)
    return results


def resume(deletion: Deletion, *, deps: Leaving) -> Outcome:
    """Run the steps not recorded as done, in order, each recorded once it succeeded; a step
    that fails leaves the rest for the next call (its error recorded for the founder)."""
    steps: dict[str, Callable[[Deletion, Leaving], bool]] = {
        "cancel_subscriptions": _cancel_subscriptions,
        "remove_repositories": _remove_repositories,
        "leave_teams": _leave_teams,
        "erase_personal_data": _erase_personal_data,
        "send_goodbye": _send_goodbye,
        "delete_auth_user": _delete_auth_user,
        "redact_customers": _redact_customers,
    }
    held = store.take(deps.db, deletion.id)
    if held is None:
        raise Conflict(_RUNNING_NOW)
    try:
        return _run(held, steps, deps)
    finally:
        with contextlib.suppress(Exception):  # else the lease runs out
            store.release(deps.db, deletion.id)


def _run(
    deletion: Deletion, steps: dict[str, Callable[[Deletion, Leaving], bool]], deps: Leaving
) -> Outcome:
    todo = rules.remaining(deletion.steps_done)
    for n, step in enumerate(todo):
        try:
            if not steps[step](deletion, deps):
                return Outcome(deletion.id, todo[n:])
            store.mark_done(deps.db, deletion.id, step)
        except Exception as exc:
            with contextlib.suppress(Exception):
                store.mark_failed(deps.db, deletion.id, f"{step}: {exc}")
            log.warning("account deletion %s stopped at %s: %s", deletion.id, step, exc)
            raise
    store.finish(deps.db, deletion.id)
    log.info("account deletion %s finished", deletion.id)
    return Outcome(deletion.id, [])


def resume_all(*, deps: Leaving) -> list[Outcome | Exception]:
    """Every deletion not finished (for the founder's command, or a scheduled job)."""
    outcomes: list[Outcome | Exception] = []
    for deletion in store.unfinished(deps.db):
        try:
            outcomes.append(resume(deletion, deps=deps))
        except Exception as exc:
            outcomes.append(exc)
    return outcomes


def _refuse_unconfirmed(confirm: Any, email: str | None) -> None:
    if (problem := rules.confirmation_problem(confirm, email)) is not None:
        raise InvalidRequest(problem)


def _cancel_subscriptions(deletion: Deletion, deps: Leaving) -> bool:
    for subscription in deletion.plan.subscriptions:
        try:
            deps.stripe.cancel_subscription_now(subscription)
        except PaymentsUnavailable as exc:
            raise Unavailable(_later("Stripe is unavailable")) from exc
        except StripeCallFailed as exc:
            raise Unavailable(_later("Stripe refused to cancel a subscription")) from exc
    return True


def _remove_repositories(deletion: Deletion, deps: Leaving) -> bool:
    for repository, login in deletion.plan.repositories:
        try:
            deps.github.remove(repository=repository, username=login)
        except GitHubNotConfigured as exc:
            raise NotConfigured(str(exc)) from exc
        except GitHubUnavailable as exc:
            raise Unavailable(_later("GitHub is unavailable")) from exc
    return True


def _leave_teams(deletion: Deletion, deps: Leaving) -> bool:
    for team_id in deletion.plan.teams_left:
        if store.leave_team(deps.db, team_id, deletion.user_id):
            # Whoever gets the seat given back is told; what fails stays recorded for the
            # team's next change to tell.
            try:
                seats.publish_changes(
                    team_id, db=deps.db, publish=deps.bus.publish, github=deps.github
                )
            except Exception as exc:
                log.warning("team %s: seats not told after a member left: %s", team_id, exc)
    for team_id in deletion.plan.teams_closed:
        store.close_team(deps.db, team_id)
    return True


def _erase_personal_data(deletion: Deletion, deps: Leaving) -> bool:
    plan = deletion.plan
    store.erase_personal_data(deps.db, deletion.user_id, plan.email, plan.teams_closed)
    return True


def _send_goodbye(deletion: Deletion, deps: Leaving) -> bool:
    """The account-deleted mail, to the address the plan kept: its id is the deletion's, so a
    retry publishes the same event and the mail goes once."""
    plan = deletion.plan
    if not plan.email:
        return True
    event, data = app_event(
        ACCOUNT_DELETED,
        event_id=f"account_deleted_{deletion.id}",
        obj={"email": plan.email, "name": plan.name},
        created=datetime.now(UTC),
    )
    try:
        deps.bus.publish(event, data)
    except PublishError as exc:
        raise Unavailable(_later("The confirmation e-mail could not be queued")) from exc
    return True


def _delete_auth_user(deletion: Deletion, deps: Leaving) -> bool:
    try:
        deps.accounts.delete(user_id=deletion.user_id)
    except AccountError as exc:
        raise Unavailable(_later("Sign-in (Supabase Auth) is unavailable")) from exc
    return True


def _redact_customers(deletion: Deletion, deps: Leaving) -> bool:
    """Ask Stripe to redact each customer where the account may (a redaction job, run once
    Stripe validated it); else leave the founder a task. False while Stripe still validates."""
    version = deps.redaction_api_version
    waiting = False
    for customer in deletion.plan.customers:
        if version is None:
            _task(deps, deletion, customer, "this Stripe account does not use redaction jobs")
            continue
        try:
            status = _redaction(deletion, customer, version, deps)
        except PaymentsUnavailable as exc:
            raise Unavailable(_later("Stripe is unavailable")) from exc
        except StripeCallFailed as exc:
            _task(deps, deletion, customer, f"Stripe refused a redaction job ({exc})")
            continue
        if status in _VALIDATING:
            waiting = True
        elif status not in _UNDER_WAY:
            job = deletion.redaction_jobs.get(customer)
            _task(deps, deletion, customer, f"Stripe's redaction job {job} is {status}")
    return not waiting


def _redaction(deletion: Deletion, customer: str, version: str, deps: Leaving) -> str:
    """The customer's redaction job's status, the job made (once) and run once it is ready."""
    job_id = deletion.redaction_jobs.get(customer)
    if job_id is None:
        job = deps.stripe.create_redaction_job(
            customer, api_version=version, idempotency_key=f"redact_{deletion.id}_{customer}"
        )
        job_id = str(job["id"])
        store.record_redaction_job(deps.db, deletion.id, customer, job_id)
        deletion.redaction_jobs[customer] = job_id
    status = str(deps.stripe.redaction_job(job_id, api_version=version)["status"])
    if status == "ready":
        status = str(deps.stripe.run_redaction_job(job_id, api_version=version)["status"])
    return status


def _task(deps: Leaving, deletion: Deletion, customer: str, reason: str) -> None:
    store.add_founder_task(
        deps.db,
        kind=rules.REDACT_IN_DASHBOARD,
        subject=customer,
        detail=rules.redaction_task_detail(customer, reason),
        deletion_id=deletion.id,
    )


def _later(what: str) -> str:
    return f"{what}: your account deletion is recorded and finishes when you ask again"
