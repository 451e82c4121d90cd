//! `kenny-server serve --config FILE`: every setting the flags take, in a TOML file
//! (`public_url = "https://kenny.example.com"`, `heartbeat_secs = 15`, ...). A setting
//! given on the command line or in its `KENNY_*` variable wins over the file, so the
//! file is turned into the command-line arguments that neither gave, and clap checks
//! them like any other (one place validates every value, with the same messages).
//! A key that names no setting is refused, so a typo never goes unnoticed.

use std::ffi::OsString;
use std::path::Path;

/// One setting of `serve`, as clap describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    /// The key in the file: the flag's name in snake_case (`public_url`).
    pub key: String,
    /// The flag (`--public-url`).
    pub long: String,
    pub env: Option<String>,
    /// A switch (`--disable-token-auth`) rather than a flag with a value.
    pub switch: bool,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SettingsError {
    #[error("cannot read the settings file {file}: {why}")]
    Read { file: String, why: String },
    #[error("{file} is not valid TOML: {why}")]
    Syntax { file: String, why: String },
    #[error(
        "{file}: `{key}` is not a setting of kenny-server serve; the settings are its flags in snake_case: {known}"
    )]
    Unknown { file: String, key: String, known: String },
    #[error("{file}: `{key}` must be {want}")]
    Type {
        file: String,
        key: String,
        want: &'static str,
    },
}

/// Reads `file` and returns the arguments it adds to `argv` (those of its settings
/// that neither `argv` nor the environment, as `is_set` reports it, gives).
pub fn arguments_from(
    file: &Path,
    settings: &[Setting],
    argv: &[OsString],
    is_set: impl Fn(&str) -> bool,
) -> Result<Vec<OsString>, SettingsError> {
    let name = file.display().to_string();
    let text = std::fs::read_to_string(file).map_err(|e| SettingsError::Read {
        file: name.clone(),
        why: e.to_string(),
    })?;
    arguments(&name, &text, settings, argv, is_set)
}

fn arguments(
    file: &str,
    text: &str,
    settings: &[Setting],
    argv: &[OsString],
    is_set: impl Fn(&str) -> bool,
) -> Result<Vec<OsString>, SettingsError> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| SettingsError::Syntax {
        file: file.to_owned(),
        why: e.message().to_owned(),
    })?;
    let given = |long: &str| {
        argv.iter()
            .filter_map(|a| a.to_str())
            .any(|a| a == long || a.strip_prefix(long).is_some_and(|rest| rest.starts_with('=')))
    };
    let mut added = Vec::new();
    for (raw_key, value) in &table {
        let key = raw_key.replace('-', "_");
        let Some(setting) = settings.iter().find(|s| s.key == key && s.key != "config") else {
            let known: Vec<&str> = settings
                .iter()
                .map(|s| s.key.as_str())
                .filter(|k| *k != "config")
                .collect();
            return Err(SettingsError::Unknown {
                file: file.to_owned(),
                key: raw_key.clone(),
                known: known.join(", "),
            });
        };
        let type_error = |want| SettingsError::Type {
            file: file.to_owned(),
            key: raw_key.clone(),
            want,
        };
        if given(&setting.long) || setting.env.as_deref().is_some_and(&is_set) {
            continue;
        }
        if setting.switch {
            match value {
                toml::Value::Boolean(true) => added.push(OsString::from(&setting.long)),
                toml::Value::Boolean(false) => {}
                _ => return Err(type_error("true or false")),
            }
            continue;
        }
        let text = match value {
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(n) => n.to_string(),
            toml::Value::Float(f) => f.to_string(),
            _ => return Err(type_error("a string or a number")),
        };
        added.push(OsString::from(format!("{}={text}", setting.long)));
    }
    Ok(added)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> Vec<Setting> {
        let s = |key: &str, env: &str, switch| Setting {
            key: key.into(),
            long: format!("--{}", key.replace('_', "-")),
            env: Some(env.into()),
            switch,
        };
        vec![
            s("public_url", "KENNY_PUBLIC_URL", false),
            s("heartbeat_secs", "KENNY_HEARTBEAT_SECS", false),
            s("fleet_run_max", "KENNY_FLEET_RUN_MAX", false),
            s("disable_token_auth", "KENNY_DISABLE_TOKEN_AUTH", true),
            s("data_dir", "KENNY_DATA_DIR", false),
            s("config", "KENNY_CONFIG", false),
        ]
    }

    fn args(text: &str, argv: &[&str], env: &[&str]) -> Result<Vec<String>, SettingsError> {
        let argv: Vec<OsString> = argv.iter().map(OsString::from).collect();
        arguments("f.toml", text, &settings(), &argv, |v| env.contains(&v))
            .map(|a| a.into_iter().map(|s| s.into_string().unwrap()).collect())
    }

    #[test]
    fn the_file_fills_in_what_the_command_line_and_environment_leave_out() {
        let text = "public_url = \"https://k.example\"\nheartbeat-secs = 20\ndisable_token_auth = true\ndata_dir = \"/var/lib/kenny\"\n";
        assert_eq!(
            args(text, &["serve"], &[]).unwrap(),
            [
                "--data-dir=/var/lib/kenny",
                "--disable-token-auth",
                "--heartbeat-secs=20",
                "--public-url=https://k.example"
            ]
        );
        // A flag (either spelling) or the variable wins over the file.
        let got = args(
            text,
            &["serve", "--public-url", "https://x", "--data-dir=/tmp/d"],
            &["KENNY_HEARTBEAT_SECS"],
        );
        assert_eq!(got.unwrap(), ["--disable-token-auth"]);
        assert_eq!(
            args("disable_token_auth = false", &[], &[]).unwrap(),
            Vec::<String>::new()
        );
    }

    #[test]
    fn typos_wrong_types_and_bad_toml_are_refused_with_what_to_write() {
        let err = args("public_ulr = \"x\"", &[], &[]).unwrap_err().to_string();
        assert!(
            err.contains("`public_ulr` is not a setting") && err.contains("public_url, heartbeat_secs"),
            "{err}"
        );
        assert!(!err.contains("config"), "the file cannot name another file: {err}");
        let err = args("config = \"other.toml\"", &[], &[]).unwrap_err().to_string();
        assert!(err.contains("`config` is not a setting"), "{err}");
        let err = args("disable_token_auth = \"yes\"", &[], &[]).unwrap_err().to_string();
        assert!(err.contains("must be true or false"), "{err}");
        let err = args("heartbeat_secs = [1]", &[], &[]).unwrap_err().to_string();
        assert!(err.contains("must be a string or a number"), "{err}");
        let err = args("public_url = ", &[], &[]).unwrap_err().to_string();
        assert!(err.starts_with("f.toml is not valid TOML"), "{err}");
    }
}
