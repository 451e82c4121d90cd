//! What each server tool returns, as the `outputSchema` clients validate against.

use kenny_proto::outputs::{array, boolean, integer, nullable, number, object, string};
use serde_json::{Value, json};

fn health_state() -> Value {
    json!({"type": ["string", "null"], "enum": ["ok", "unknown", "warn", "crit", null],
           "description": "ok, unknown, warn or crit; null before the first snapshot."})
}

fn agent_row() -> Value {
    object(
        &[
            ("agent_id", string("The PC's id.")),
            ("online", boolean("Connected now.")),
        ],
        &[
            ("os", nullable(string("linux, windows or macos."))),
            ("hostname", nullable(string("Its host name."))),
            ("version", nullable(string("The agent's version."))),
            ("arch", nullable(string("CPU architecture."))),
            ("enrolled", boolean("Whether it holds a key registered here.")),
            (
                "public_key",
                nullable(string(
                    "Its enrolled Ed25519 public key (base64): verifies the proofs in its results' _meta.",
                )),
            ),
            (
                "signs_results",
                nullable(boolean(
                    "Whether its connection signs every result; null when offline or held by another replica.",
                )),
            ),
            (
                "last_seen",
                nullable(string("RFC 3339; for an online PC, its last frame.")),
            ),
            ("health", health_state()),
            (
                "health_reason",
                nullable(string("The worst reason, \"<section>: <reason>\".")),
            ),
            ("channel", string("Update channel: stable or beta.")),
        ],
    )
}

pub(super) fn list_agents() -> Value {
    object(
        &[
            ("agents", array(agent_row())),
            ("total", integer("PCs matching the filters, on every page.")),
            (
                "next_cursor",
                nullable(string("Pass as cursor for the next page; null on the last.")),
            ),
        ],
        &[],
    )
}

fn counts() -> Value {
    object(
        &[
            ("ok", integer("PCs ok.")),
            ("unknown", integer("PCs that could not be judged.")),
            ("warn", integer("PCs at warn.")),
            ("crit", integer("PCs at crit.")),
            ("no_data", integer("PCs with no snapshot yet.")),
        ],
        &[],
    )
}

pub(super) fn fleet_overview() -> Value {
    object(
        &[
            ("total", integer("PCs you can reach.")),
            ("online", integer("Connected now.")),
            ("offline", integer("Not connected.")),
            ("health", counts()),
            ("attention_total", integer("PCs at warn or crit.")),
            (
                "attention",
                array(object(
                    &[("agent_id", string("The PC.")), ("online", boolean("Connected now."))],
                    &[
                        ("hostname", nullable(string("Its host name."))),
                        ("health", health_state()),
                        ("reason", nullable(string("Its worst reason."))),
                    ],
                )),
            ),
            (
                "offline_longest",
                array(object(
                    &[("agent_id", string("The PC."))],
                    &[
                        ("hostname", nullable(string("Its host name."))),
                        (
                            "last_seen",
                            nullable(string("When it was last connected; null if never.")),
                        ),
                    ],
                )),
            ),
            (
                "os",
                json!({"type": "object", "description": "PCs per operating system."}),
            ),
            (
                "versions",
                json!({"type": "object", "description": "PCs per agent version."}),
            ),
        ],
        &[],
    )
}

fn verdict() -> Value {
    object(
        &[
            ("section", string("The telemetry section.")),
            ("status", string("ok, unknown, warn or crit.")),
            ("summary", string("What the section shows, in the agent's words.")),
        ],
        &[
            ("reason", nullable(string("Why it is not ok."))),
            ("attention", nullable(string("What to do about it."))),
        ],
    )
}

pub(super) fn agent_health() -> Value {
    object(
        &[
            ("agent_id", string("The PC.")),
            ("online", boolean("Connected now.")),
            ("health", health_state()),
            ("reasons", array(string("\"<section>: <reason>\", worst first."))),
            ("sections", array(verdict())),
            ("skipped", array(string("Sections that do not concern this PC's OS."))),
            ("collected_at", nullable(string("When the snapshot judged was taken."))),
            ("assessed_at", nullable(string("When the server judged it."))),
            (
                "forecasts",
                array(object(
                    &[
                        ("mount", string("The disk.")),
                        ("percent", number("Used now, percent.")),
                        ("per_day", number("Growth over the last week, points a day.")),
                        ("days_to_full", number("Days until full at that rate.")),
                        ("full_at", string("When, RFC 3339.")),
                    ],
                    &[],
                )),
            ),
        ],
        &[("note", string("Why there is no verdict yet."))],
    )
}

pub(super) fn agent_snapshot() -> Value {
    object(
        &[
            ("agent_id", string("The PC.")),
            ("online", boolean("Connected now.")),
            ("collected_at", string("When the PC took the snapshot.")),
            ("received_at", string("When the server stored it.")),
            ("sections", array(string("Every section the snapshot holds."))),
            (
                "snapshot",
                json!({"type": "object", "description": "Section name to {status, summary, ...details}, as the agent sent it."}),
            ),
        ],
        &[],
    )
}

pub(super) fn agent_changes() -> Value {
    object(
        &[
            ("agent_id", string("The PC.")),
            ("since", string("The start of the window, RFC 3339.")),
            (
                "changes",
                array(object(
                    &[
                        ("at", string("When the snapshot that showed it was taken.")),
                        ("section", string("The telemetry section.")),
                        ("kind", string("added, removed, changed, admin_added or admin_removed.")),
                        ("item", string("What it is about.")),
                        ("detail", string("In words.")),
                        ("priority", string("high or normal.")),
                    ],
                    &[],
                )),
            ),
            ("truncated", boolean("More changes are older than the last one listed.")),
        ],
        &[],
    )
}

fn silence_row() -> Value {
    object(
        &[
            ("id", integer("The silence's id.")),
            ("agent_id", string("The PC.")),
            ("section", string("The section silenced, or * for all.")),
            ("until", string("When it ends, RFC 3339.")),
            ("reason", string("Why.")),
            ("created_by", string("Who set it.")),
            ("created_at", string("When.")),
        ],
        &[],
    )
}

pub(super) fn silence() -> Value {
    object(&[("silence", silence_row())], &[])
}

pub(super) fn silences() -> Value {
    object(&[("silences", array(silence_row()))], &[])
}

fn loose(description: &str) -> Value {
    json!({"description": description})
}

pub(super) fn webfilter() -> Value {
    object(
        &[
            ("agent_id", string("The PC.")),
            ("configured", boolean("Whether a web filter is set up for it.")),
            (
                "config",
                json!({"type": "object", "description": "enabled, mode, categories, entries [{domain, kind}], doh_lockdown, record_activity, schedules."}),
            ),
            (
                "categories_available",
                array(object(
                    &[
                        ("name", string("The category.")),
                        ("domains", integer("Names it lists.")),
                    ],
                    &[
                        ("description", string("What it covers.")),
                        ("origins", array(string("kenny, or the list sources' URLs."))),
                    ],
                )),
            ),
            (
                "state",
                json!({"type": "object", "description": "summary; effective (apply with list_hash, clear with why, or refused); effective_count; over_cap; enabled_now; categories_now; open_windows; next_change {at, window}; applied {list_hash, count, at, by, rule}; observed {active, hash, at}; drift; pending; problem {message, at}; cap."}),
            ),
        ],
        &[
            ("updated_at", string("When the configuration last changed.")),
            ("updated_by", string("Who changed it.")),
            (
                "checked",
                loose("true when the PC was asked just now, or why it could not be."),
            ),
            ("changed", array(string("What this call changed, in words."))),
            ("note", string("What happens next.")),
            (
                "pushed",
                json!({"type": "object", "description": "What the push did: action applied (count, list_hash) or cleared (why)."}),
            ),
        ],
    )
}

pub(super) fn web_activity() -> Value {
    object(
        &[
            ("agent_id", string("The PC.")),
            ("hours", integer("How far back.")),
            ("flagged_only", boolean("Only flagged domains.")),
            ("recording", boolean("Whether this PC's filter records activity now.")),
            (
                "domains",
                array(object(
                    &[
                        ("domain", string("The domain visited.")),
                        ("first_seen", string("RFC 3339.")),
                        ("last_seen", string("RFC 3339.")),
                        ("hits", integer("Visits in the day before it was last reported.")),
                    ],
                    &[("flag", nullable(string("Why it is flagged.")))],
                )),
            ),
            ("count", integer("Domains listed.")),
        ],
        &[],
    )
}

pub(super) fn fleet_run() -> Value {
    let error = object(
        &[
            ("code", string("The error code.")),
            ("message", string("What went wrong.")),
        ],
        &[],
    );
    let result = object(
        &[
            ("agent_id", string("The PC.")),
            ("ok", boolean("Whether the tool ran and answered.")),
        ],
        &[
            (
                "result",
                loose("The tool's answer on that PC, as its outputSchema describes."),
            ),
            ("error", error),
            (
                "proof",
                loose("The agent's signed proof of its answer (docs/protocol.md, \"Signed results\")."),
            ),
            (
                "signed",
                boolean("false when the PC's agent does not sign its results."),
            ),
        ],
    );
    object(
        &[
            ("tool", string("The tool that ran.")),
            ("succeeded", integer("PCs that answered.")),
            ("failed", integer("PCs that did not (their error says why).")),
            ("results", array(result)),
        ],
        &[],
    )
}

pub(super) fn approval_status() -> Value {
    object(
        &[
            ("approval_id", string("The held call's id.")),
            ("status", string("held, running, done, denied or expired.")),
            ("tool", string("The tool held.")),
            (
                "agent_id",
                string("The PC it was frozen on when it was held; it runs nowhere else."),
            ),
            ("args", loose("Its arguments, without agent_id.")),
            ("caller", string("Who asked for it.")),
            (
                "asked_by",
                string("elicitation (the caller's MCP client asked) or dashboard."),
            ),
            ("created_at", string("When it was held.")),
            ("expires_at", string("When it can no longer be approved.")),
        ],
        &[
            ("decided_by", nullable(string("Who approved or denied it."))),
            ("decided_at", nullable(string("When."))),
            (
                "result",
                loose(
                    "Once done or denied: the MCP tool result the call produced (content, structuredContent, isError, _meta with the agent's proof).",
                ),
            ),
        ],
    )
}
