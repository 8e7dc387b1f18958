"""A guesser cannot lock an admin out (issue 23, item 3): logins are throttled by client address
and email together, never by email alone. Wrong guesses from address A for the admin's email end in
429 at A, while the admin logging in from address B gets in."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from assay.web.admin import LoginThrottle

from .conftest import make_app
from .panel.conftest import ADMIN_EMAIL, ADMIN_PASSWORD


def test_wrong_guesses_from_one_address_do_not_lock_the_admin_out_elsewhere(web_store: Any) -> None:
    from assay.service import admins
    from assay.service.actors import OPERATOR

    admins.create(web_store, ADMIN_EMAIL, ADMIN_PASSWORD, actor=OPERATOR)
    app = make_app(web_store, rate_limit=0)
    throttle = app.state.login_throttle = LoginThrottle(burst=3)  # few Argon2 checks: a small burst
    throttle.buckets.clock = throttle.addresses.clock = lambda: 1000.0  # no refill mid-test
    guesser = TestClient(app, base_url="https://testserver", client=("203.0.113.7", 40000))
    owner = TestClient(app, base_url="https://testserver", client=("198.51.100.2", 40000))
    wrong = {"email": ADMIN_EMAIL.upper(), "password": "wrong password, long enough"}
    statuses = [guesser.post("/admin/login", json=wrong).status_code for _ in range(6)]
    assert statuses[:3] == [401] * 3 and set(statuses[3:]) == {429}
    stopped = guesser.post("/admin/login", json=wrong)
    assert stopped.json() == {"detail": stopped.json()["detail"], "field": None}  # the API's one refusal shape
    form = guesser.post("/admin/login", data=wrong, headers={"Accept": "text/html"})  # a browser: the 429 page
    assert form.status_code == 429 and form.headers["content-type"].startswith("text/html")
    assert form.headers["Retry-After"] and "Too many requests" in form.text
    # the guesser is stopped even with the right password, from its address
    assert guesser.post("/admin/login", json={"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD}).status_code == 429
    answer = owner.post("/admin/login", json={"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD})
    assert answer.status_code == 200 and answer.json()["email"] == ADMIN_EMAIL
    assert owner.get("/api/panel/applications").status_code == 200  # logged in
