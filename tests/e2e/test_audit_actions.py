"""Every state-changing API request is in the audit log: who, which credential, from
where, which action on which path, and how it ended; failures included."""

from __future__ import annotations

import httpx


def test_api_actions_are_audited_with_who_and_from_where(kenny):
    with httpx.Client(base_url=kenny.base_url, headers={"Authorization": f"Bearer {kenny.admin_pat}"}, timeout=15) as http:
        r = http.post("/api/users", json={"username": "carol", "role": "operator", "password": "a long password 123"})
        assert r.status_code in (200, 201), r.text
        r = http.put("/api/policy", json={"rules": [{"id": "x", "applies_to": "nope", "pattern": "a", "reason": "r"}]})
        assert r.status_code == 400
    rows = kenny.audit(limit=50)
    created = [e for e in rows if e["tool"] == "POST /api/users"]
    assert len(created) == 1, rows
    row = created[0]
    assert (row["user"], row["credential_kind"], row["client_addr"], row["target"], row["outcome"]) == (
        "admin", "pat", "127.0.0.1", "/api/users", "ok"), row
    refused = [e for e in rows if e["tool"] == "PUT /api/policy"]
    assert len(refused) == 1 and refused[0]["outcome"] == "refused" and refused[0]["error_code"] == "400", refused
    # Reads are not actions.
    assert not any(e["tool"].startswith("GET ") for e in rows), rows
    # And no secret ever lands in the trail (the new user's password went in a body).
    assert not any("a long password" in str(e) for e in rows)
