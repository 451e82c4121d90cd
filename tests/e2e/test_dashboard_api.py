"""The dashboard's screenshot action on a real agent capturing a real X display (Xvfb):
what the agent took is accepted, kept and served back as the PNG it is. The rest of the
dashboard's host actions, agent enrollment and pages (scope, audit rows, statuses, the
capture's metadata and headers) is tested in Rust, in
`crates/kenny-server/tests/kit/dashboard_api.rs`."""

from __future__ import annotations

import httpx

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


async def test_a_capture_is_kept_and_served_as_png(kenny, xvfb):
    kenny.start_agent("pc-a", env={"DISPLAY": xvfb})
    await kenny.wait_agents(["pc-a"])
    headers = {"Authorization": f"Bearer {kenny.admin_pat}"}
    with httpx.Client(base_url=kenny.base_url, headers=headers, timeout=90) as api:
        r = api.post("/api/agent/pc-a/screenshot")
        assert r.status_code == 201, r.text
        shot = r.json()["screenshot"]
        assert shot["width"] == 1280 and shot["height"] == 720, shot

        img = api.get("/api/agent/pc-a/screenshot")
        assert img.status_code == 200 and img.headers["content-type"] == "image/png"
        assert img.content.startswith(PNG_SIGNATURE) and len(img.content) == shot["bytes"]
