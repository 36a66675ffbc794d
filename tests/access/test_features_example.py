"""docs/features.md's guarded route, built exactly as the page writes it: its blueprint module
(the route's OpenAPI operation declared on it) run from the page's code, registered on the real
app as its `runtime/api.py` step does, then called over HTTP by a guest, a user without the
feature and a user who bought it."""

from __future__ import annotations

import re
import sys
import textwrap
import types
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from adapters.db.pool import Database
from api.operations import operation_of
from config import Settings
from main import create_app
from runtime.container import Container
from tests.access.lifecycle_helpers import post_event, session, settle, subscription
from tests.access.test_subscriber_features import PRO_MONTHLY, T0, add_products, bearer
from tests.conftest import Api
from tests.fakes.http import serve
from tests.helpers import create_user, stripe_event

ROOT = Path(__file__).resolve().parents[2]


def example() -> list[str]:
    """The python blocks of the page's "In the API" section, unindented."""
    text = (ROOT / "docs" / "features.md").read_text()
    section = text.split("\n## In the API\n", 1)[1].split("\n## ", 1)[0]
    return [textwrap.dedent(b) for b in re.findall(r"```python\n(.*?)```", section, re.DOTALL)]


@pytest.fixture
def reports_module() -> Iterator[types.ModuleType]:
    """The page's reports/routes.py, as a module of its own."""
    module = types.ModuleType("reports.routes")
    sys.modules[module.__name__] = module
    try:
        exec(compile(example()[0], "docs/features.md", "exec"), module.__dict__)  # noqa: S102
        yield module
    finally:
        del sys.modules[module.__name__]


@pytest.fixture
def app(
    reports_module: types.ModuleType, settings_factory: Callable[..., Settings], db: Database
) -> Iterator[Api]:
    container = Container(settings_factory())
    flask_app = create_app(container=container)
    flask_app.register_blueprint(reports_module.bp)
    server = serve(flask_app)
    yield Api(url=next(server), container=container)
    container.close()
    server.close()


def test_the_registration_step_names_what_runtime_api_has() -> None:
    _, registration = example()
    source = (ROOT / "runtime" / "api.py").read_text()
    assert registration.startswith("from reports import routes as reports\n")
    assert "from teams import routes as teams\n" in source
    assert "    for blueprint in (\n" in registration
    assert "    for blueprint in (\n" in source
    assert "        app.register_blueprint(blueprint)\n" in source


def test_the_guarded_route_of_the_page_answers_as_the_page_says(
    app: Api, db: Database, reports_module: types.ModuleType
) -> None:
    add_products(db)  # a subscription granting `pro`
    ada = create_user(db, "ada@example.com")
    bob = create_user(db, "bob@example.com")
    # Ada checks out the `pro` subscription: the checkout links her as its customer.
    checkout = session(ada, price=PRO_MONTHLY, mode="subscription", subscription="sub_ada")
    post_event(app, stripe_event("checkout.session.completed", checkout, created=T0))
    pro = subscription(price=PRO_MONTHLY)
    post_event(app, stripe_event("customer.subscription.created", pro, created=T0 + 1))
    settle(app)

    operation = operation_of(reports_module.reports, "/api/reports")
    assert operation is not None, "the page's route declares its operation"
    assert operation.signed_in
    url = "/api/reports"
    # Declared on the route alone, it is in the served document: no central list was edited.
    served = app.get("/api/openapi.json").json()
    assert served["paths"][url]["get"]["summary"] == "The reports (the pro feature)"

    guest = app.get(url)
    assert (guest.status_code, guest.json()) == (401, {"error": "Sign in required"})
    denied = app.get(url, headers=bearer(app.token(sub=bob, email="bob@example.com")))
    assert (denied.status_code, denied.json()) == (403, {"error": "This needs the pro feature"})
    allowed = app.get(url, headers=bearer(app.token(sub=ada, email="ada@example.com")))
    assert allowed.status_code == 200, allowed.text
    for status, response in ((200, allowed), (401, guest), (403, denied)):
        model = operation.answers[status]
        assert model is not None
        model.model_validate(response.json())
