//! The MCP tool list: the tools the server answers itself, `select_agent`, and every
//! forwarded tool of the catalog.

use std::sync::Arc;

use kenny_proto::catalog::{TOOLS, ToolClass, ToolSpec};
use kenny_proto::outputs::{boolean, nullable, object, output_schema, string};
use rmcp::model::{Tool, ToolAnnotations};
use serde_json::{Value, json};

use crate::server_tools;

pub(crate) const SELECT_AGENT: &str = "select_agent";

pub(super) fn all() -> Vec<Tool> {
    let mut tools: Vec<Tool> = server_tools::TOOLS.iter().map(server_tool).collect();
    tools.push(
        tool(
            SELECT_AGENT,
            "Check a PC",
            "Check that an agent_id exists and whether it is online. Advisory only: it sets no default target, so every other call still needs agent_id.",
            json!({
                "type": "object",
                "properties": {"agent_id": {"type": "string", "minLength": 1, "description": "Id of the PC to check."}},
                "required": ["agent_id"],
                "additionalProperties": false,
            }),
            ToolAnnotations::with_title("Check a PC")
                .read_only(true)
                .destructive(false),
        )
        .with_raw_output_schema(schema_object(select_agent_output())),
    );
    tools.extend(TOOLS.iter().map(forwarded));
    tools
}

/// A tool the server answers itself, touching no PC.
fn server_tool(t: &server_tools::ServerTool) -> Tool {
    tool(
        t.name,
        t.title,
        t.description,
        (t.input_schema)(),
        ToolAnnotations::with_title(t.title)
            .read_only(t.read_only)
            .destructive(false),
    )
    .with_raw_output_schema(schema_object((t.output_schema)()))
}

fn forwarded(spec: &ToolSpec) -> Tool {
    let description = format!(
        "{} Requires agent_id: the PC to run on (from list_agents); it is never inferred. Runs on: {}.",
        spec.description,
        spec.platforms.iter().map(|o| o.as_str()).collect::<Vec<_>>().join(", ")
    );
    let annotations = ToolAnnotations::with_title(spec.title)
        .read_only(spec.read_only())
        .destructive(spec.class == ToolClass::NormalChange);
    tool(
        spec.name(),
        spec.title,
        &description,
        spec.mcp_input_schema(),
        annotations,
    )
    .with_raw_output_schema(schema_object(output_schema(spec.tool)))
}

fn select_agent_output() -> Value {
    object(
        &[
            ("agent_id", string("The PC checked.")),
            ("online", boolean("Whether it is connected now.")),
        ],
        &[
            ("hostname", nullable(string("Its host name."))),
            ("os", nullable(string("Its operating system."))),
            (
                "note",
                string("That nothing is remembered: pass agent_id on every call."),
            ),
        ],
    )
}

fn schema_object(schema: Value) -> Arc<serde_json::Map<String, Value>> {
    let Value::Object(schema) = schema else {
        unreachable!("tool schemas are objects")
    };
    Arc::new(schema)
}

fn tool(name: &'static str, title: &str, description: &str, schema: Value, annotations: ToolAnnotations) -> Tool {
    Tool::new(name, description.to_owned(), schema_object(schema))
        .with_title(title)
        .with_annotations(annotations)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_forwarded_tool_requires_agent_id_and_is_annotated() {
        let tools = all();
        assert_eq!(tools.len(), TOOLS.len() + server_tools::TOOLS.len() + 1);
        let fleet_wide = [
            "list_agents",
            "fleet_overview",
            "alert_silence_list",
            "fleet_run",
            "approval_status",
        ];
        for t in tools.iter().filter(|t| !fleet_wide.contains(&t.name.as_ref())) {
            let required = t.input_schema.get("required").and_then(Value::as_array).unwrap();
            assert!(required.iter().any(|r| r == "agent_id"), "{}", t.name);
            let ann = t.annotations.as_ref().unwrap();
            assert!(
                ann.read_only_hint.is_some() && ann.destructive_hint.is_some(),
                "{}",
                t.name
            );
        }
        for t in &tools {
            let output = t
                .output_schema
                .as_ref()
                .unwrap_or_else(|| panic!("{} has no outputSchema", t.name));
            assert_eq!(output.get("type"), Some(&json!("object")), "{}", t.name);
        }
        // Fan-out names its PCs: a list, required.
        let fan_out = tools.iter().find(|t| t.name == "fleet_run").unwrap();
        let required = fan_out.input_schema.get("required").and_then(Value::as_array).unwrap();
        assert!(required.iter().any(|r| r == "agent_ids"), "{required:?}");
        assert_eq!(fan_out.annotations.as_ref().unwrap().read_only_hint, Some(true));
        let shell = tools.iter().find(|t| t.name == "shell_exec").unwrap();
        assert_eq!(shell.annotations.as_ref().unwrap().destructive_hint, Some(true));
        assert!(shell.description.as_ref().unwrap().contains("Requires agent_id"));
    }
}
