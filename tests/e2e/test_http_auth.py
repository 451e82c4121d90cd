"""The server binary configured by environment variables instead of flags. Bearer
authentication on /mcp and /api, the DNS-rebinding guard and the audit log's filters,
order and redaction are tested in Rust: `crates/kenny-server/tests/kit/http_auth.rs`."""

from __future__ import annotations

import httpx


def test_server_configured_by_env(kenny):
    """KENNY_LISTEN / KENNY_DATA_DIR work in place of --listen / --data-dir."""
    kenny.stop_server()
    kenny.start_server(via_env=True)  # same data dir: the admin PAT still works
    with httpx.Client(timeout=10) as http:
        assert http.get(f"{kenny.base_url}/healthz").status_code == 200
        r = http.get(f"{kenny.base_url}/api/audit", headers={"Authorization": f"Bearer {kenny.admin_pat}"})
        assert r.status_code == 200, r.text
