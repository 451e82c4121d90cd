//! The install scripts a used link answers with: POSIX `sh` for Linux, Windows
//! PowerShell 5.1 for Windows. Every value in them is single-quoted (nothing is
//! interpolated), and the work sits in a function called on the last line, so a script
//! cut short in transit runs nothing.
//!
//! Each build the script may fetch comes with a manifest signed by the server key (the
//! update manifest's format, purpose `kenny-agent-install`). The script checks the
//! download's size and SHA-256 against it and, where `openssl` can (3.0 and later),
//! the signature against the server key it then pins. Windows PowerShell has no
//! Ed25519, so there the size and hash are checked and the script says so.

use ed25519_dalek::SigningKey;
use kenny_proto::update::{INSTALL_PURPOSE, MANIFEST_LABEL, Manifest};

use super::TargetOs;
use crate::updates::releases::Build;

/// One build the script may install, with its signed manifest.
#[derive(Debug, Clone)]
pub(crate) struct SignedBuild {
    pub(crate) arch: String,
    pub(crate) file: String,
    pub(crate) size: u64,
    pub sha256: String,
    pub(crate) manifest: String,
    pub(crate) signature: String,
}

impl SignedBuild {
    pub(crate) fn sign(
        key: &SigningKey,
        agent_id: &str,
        build: &Build,
        sha256: String,
        issued_at: &str,
    ) -> SignedBuild {
        let manifest = Manifest {
            purpose: INSTALL_PURPOSE.into(),
            order_id: uuid::Uuid::new_v4().to_string(),
            agent_id: agent_id.to_owned(),
            version: build.version.clone(),
            os: build.os.clone(),
            arch: build.arch.clone(),
            file: build.file.clone(),
            size: build.size,
            sha256: sha256.clone(),
            allow_downgrade: false,
            issued_at: issued_at.to_owned(),
        };
        let (manifest, signature) = manifest.sign(key);
        SignedBuild {
            arch: build.arch.clone(),
            file: build.file.clone(),
            size: build.size,
            sha256,
            manifest,
            signature,
        }
    }
}

/// Everything one script is made of.
pub(crate) struct Bundle<'a> {
    pub(crate) server: &'a str,
    pub(crate) agent_id: &'a str,
    pub(crate) server_key: &'a SigningKey,
    pub(crate) enroll_token: &'a str,
    pub(crate) builds: &'a [SignedBuild],
    pub(crate) made_at: &'a str,
}

impl Bundle<'_> {
    pub(crate) fn render(&self, os: TargetOs) -> String {
        match os {
            TargetOs::Linux => self.sh(),
            TargetOs::Windows => self.ps1(),
        }
    }

    fn pubkey_b64(&self) -> String {
        kenny_proto::auth::encode_b64(self.server_key.verifying_key().as_bytes())
    }

    /// The server key as a PEM public key, which is what `openssl pkeyutl` reads:
    /// the fixed Ed25519 SubjectPublicKeyInfo prefix, then the 32 key bytes.
    fn pubkey_pem(&self) -> String {
        let mut der = vec![0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00];
        der.extend_from_slice(self.server_key.verifying_key().as_bytes());
        format!(
            "-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----",
            kenny_proto::auth::encode_b64(&der)
        )
    }

    fn sh(&self) -> String {
        let mut cases = String::new();
        for b in self.builds {
            cases.push_str(&format!(
                "    {arch})\n      file={file}\n      size={size}\n      sha256={sha}\n      manifest={manifest}\n      signature={signature}\n      ;;\n",
                arch = sh_case_word(&b.arch),
                file = sh_quote(&b.file),
                size = sh_quote(&b.size.to_string()),
                sha = sh_quote(&b.sha256),
                manifest = sh_quote(&b.manifest),
                signature = sh_quote(&b.signature),
            ));
        }
        SH_TEMPLATE
            .replace("@MADE_AT@", &one_line(self.made_at))
            .replace("@AGENT_ID_COMMENT@", &one_line(self.agent_id))
            .replace("@SERVER@", &sh_quote(self.server))
            .replace("@AGENT_ID@", &sh_quote(self.agent_id))
            .replace("@PUBKEY@", &sh_quote(&self.pubkey_b64()))
            .replace("@PEM@", &sh_quote(&self.pubkey_pem()))
            .replace("@LABEL@", MANIFEST_LABEL)
            .replace("@CASES@", &cases)
            .replace("@TOKEN@", &sh_quote(self.enroll_token))
    }

    fn ps1(&self) -> String {
        let mut table = String::new();
        for b in self.builds {
            table.push_str(&format!(
                "    {arch} = @{{ File = {file}; Size = {size}; Sha256 = {sha} }}\n",
                arch = ps_quote(&b.arch),
                file = ps_quote(&b.file),
                size = b.size,
                sha = ps_quote(&b.sha256),
            ));
        }
        PS1_TEMPLATE
            .replace("@MADE_AT@", &one_line(self.made_at))
            .replace("@AGENT_ID_COMMENT@", &one_line(self.agent_id))
            .replace("@SERVER@", &ps_quote(self.server))
            .replace("@AGENT_ID@", &ps_quote(self.agent_id))
            .replace("@PUBKEY@", &ps_quote(&self.pubkey_b64()))
            .replace("@BUILDS@", &table)
            .replace("@TOKEN@", &ps_quote(self.enroll_token))
    }
}

/// What a refused link answers: two lines that both `sh` and PowerShell run as "print
/// this, then fail", so whoever piped it into a shell reads why.
pub(crate) fn refusal(message: &str) -> String {
    format!("echo {}\nexit 1\n", sh_quote(&format!("kenny: {}", one_line(message))))
}

/// A POSIX shell word that is taken literally: single-quoted, `'` as `'\''`.
pub(crate) fn sh_quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', "'\\''"))
}

/// A PowerShell string that is taken literally: single-quoted, `'` doubled.
pub(crate) fn ps_quote(value: &str) -> String {
    format!("'{}'", value.replace(['\'', '‘', '’', '‚', '‛'], "''"))
}

/// An architecture as a `case` pattern: release names hold only letters, digits and
/// `_`, so anything else cannot come from a release file and is dropped.
fn sh_case_word(arch: &str) -> String {
    arch.chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

/// Text for a comment line: no line breaks.
fn one_line(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect()
}

const SH_TEMPLATE: &str = r#"#!/bin/sh
# kenny: installs the agent of PC @AGENT_ID_COMMENT@ and enrolls it with this server.
# Made at @MADE_AT@ for one use: the enrollment token below works once, for this PC only.
set -eu

say() { printf 'kenny: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

verify_signature() {
  if ! command -v openssl >/dev/null 2>&1; then
    say "openssl is not installed, so the manifest's signature was not checked (the build's size and SHA-256 were)"
    return 0
  fi
  if ! openssl pkeyutl -help 2>&1 | grep -q -- '-rawin'; then
    say "this openssl cannot check Ed25519 signatures, so the manifest's signature was not checked (the build's size and SHA-256 were)"
    return 0
  fi
  printf '%s\n' "$server_pem" > "$tmp/server.pem"
  printf '@LABEL@\000%s' "$manifest" > "$tmp/signed"
  printf '%s' "$signature" | openssl base64 -d -A > "$tmp/signature"
  openssl pkeyutl -verify -pubin -inkey "$tmp/server.pem" -rawin -in "$tmp/signed" -sigfile "$tmp/signature" >/dev/null 2>&1 \
    || die "the build's manifest is not signed by the server key $server_pubkey; nothing was installed"
  say "the build matches its manifest, signed by the server key $server_pubkey"
}

install_kenny_agent() {
  server=@SERVER@
  agent_id=@AGENT_ID@
  server_pubkey=@PUBKEY@
  server_pem=@PEM@
  # KENNY_INSTALL_ROOT stages the install under another directory (packaging, tests).
  root="${KENNY_INSTALL_ROOT:-}"
  if [ -z "$root" ] && [ "$(id -u)" != 0 ]; then
    die "run this as root (the command ends in '| sudo sh'); this link is used up: make a new one"
  fi
  machine=$(uname -m)
  case "$machine" in
    x86_64|amd64) arch=x86_64 ;;
    aarch64|arm64) arch=aarch64 ;;
    armv6*|armv7*) arch=arm ;;
    i386|i486|i586|i686) arch=x86 ;;
    *) arch=$machine ;;
  esac
  case "$arch" in
@CASES@    *)
      die "this server has no Linux agent build for $arch: add one with 'kenny-server releases add', then make a new link"
      ;;
  esac
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  say "downloading $file from $server"
  if command -v curl >/dev/null 2>&1; then
    curl -fsS --proto '=http,https' -o "$tmp/kenny-agent" "$server/d/agent/$file" || die "downloading $server/d/agent/$file failed"
  elif command -v wget >/dev/null 2>&1; then
    wget -q -O "$tmp/kenny-agent" "$server/d/agent/$file" || die "downloading $server/d/agent/$file failed"
  else
    die "neither curl nor wget is installed"
  fi
  got_size=$(wc -c < "$tmp/kenny-agent" | tr -d ' ')
  [ "$got_size" = "$size" ] || die "the download is $got_size bytes but its signed manifest says $size; nothing was installed"
  if command -v sha256sum >/dev/null 2>&1; then
    got_sha=$(sha256sum "$tmp/kenny-agent" | cut -d ' ' -f 1)
  elif command -v shasum >/dev/null 2>&1; then
    got_sha=$(shasum -a 256 "$tmp/kenny-agent" | cut -d ' ' -f 1)
  else
    die "neither sha256sum nor shasum is installed, so the download cannot be checked"
  fi
  [ "$got_sha" = "$sha256" ] || die "the download's SHA-256 is $got_sha but its signed manifest says $sha256; nothing was installed"
  verify_signature
  chmod 0755 "$tmp/kenny-agent"
  set -- install --server "$server" --agent-id "$agent_id" --server-pubkey "$server_pubkey"
  if [ -n "$root" ]; then
    set -- "$@" --root "$root"
  fi
  KENNY_ENROLL_TOKEN=@TOKEN@ "$tmp/kenny-agent" "$@" \
    || die "kenny-agent install failed (see above); this link is used up: make a new one"
  say "installed: PC $agent_id connects to $server"
}

install_kenny_agent
"#;

const PS1_TEMPLATE: &str = r#"# kenny: installs the agent of PC @AGENT_ID_COMMENT@ and enrolls it with this server.
# Made at @MADE_AT@ for one use: the enrollment token below works once, for this PC only.
# Windows PowerShell has no Ed25519: the build's size and SHA-256 are checked against
# the manifest the server signed; the signature itself is not.
function Install-KennyAgent {
  $ErrorActionPreference = 'Stop'
  $server = @SERVER@
  $agentId = @AGENT_ID@
  $serverPubkey = @PUBKEY@
  $builds = @{
@BUILDS@  }
  $identity = [Security.Principal.WindowsIdentity]::GetCurrent()
  if (-not ([Security.Principal.WindowsPrincipal]$identity).IsInRole([Security.Principal.WindowsBuiltInRole]::Administrator)) {
    throw 'kenny: run this in PowerShell as Administrator; this link is used up: make a new one'
  }
  $arch = switch ($env:PROCESSOR_ARCHITECTURE) { 'AMD64' { 'x86_64' } 'ARM64' { 'aarch64' } 'x86' { 'x86' } default { $env:PROCESSOR_ARCHITECTURE } }
  $build = $builds[$arch]
  if ($null -eq $build) {
    throw "kenny: this server has no Windows agent build for $arch; add one with 'kenny-server releases add', then make a new link"
  }
  $dir = Join-Path $env:TEMP ('kenny-install-' + [guid]::NewGuid().ToString('N'))
  New-Item -ItemType Directory -Path $dir | Out-Null
  try {
    $exe = Join-Path $dir 'kenny-agent.exe'
    Write-Host "kenny: downloading $($build.File) from $server"
    Invoke-WebRequest -UseBasicParsing -Uri "$server/d/agent/$($build.File)" -OutFile $exe -MaximumRedirection 0
    $size = (Get-Item -LiteralPath $exe).Length
    if ($size -ne $build.Size) {
      throw "kenny: the download is $size bytes but its signed manifest says $($build.Size); nothing was installed"
    }
    $sha = (Get-FileHash -LiteralPath $exe -Algorithm SHA256).Hash.ToLowerInvariant()
    if ($sha -ne $build.Sha256) {
      throw "kenny: the download's SHA-256 is $sha but its signed manifest says $($build.Sha256); nothing was installed"
    }
    $env:KENNY_ENROLL_TOKEN = @TOKEN@
    & $exe install --server $server --agent-id $agentId --server-pubkey $serverPubkey
    if ($LASTEXITCODE -ne 0) {
      throw "kenny: kenny-agent install failed ($LASTEXITCODE, see above); this link is used up: make a new one"
    }
    Write-Host "kenny: installed: PC $agentId connects to $server"
  } finally {
    Remove-Item Env:KENNY_ENROLL_TOKEN -ErrorAction SilentlyContinue
    Remove-Item -LiteralPath $dir -Recurse -Force -ErrorAction SilentlyContinue
  }
}

Install-KennyAgent
"#;

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle_with<'a>(key: &'a SigningKey, builds: &'a [SignedBuild], server: &'a str) -> Bundle<'a> {
        Bundle {
            server,
            agent_id: "pc-new",
            server_key: key,
            enroll_token: "kenny_agt_tok",
            builds,
            made_at: "2026-12-01T10:00:00Z",
        }
    }

    fn build(key: &SigningKey) -> SignedBuild {
        let b = Build {
            os: "linux".into(),
            arch: "x86_64".into(),
            version: "0.2.0".into(),
            file: "kenny-agent-0.2.0-linux-x86_64".into(),
            size: 11,
            path: "/nowhere".into(),
            parsed: (0, 2, 0),
        };
        SignedBuild::sign(key, "pc-new", &b, "ab".repeat(32), "2026-12-01T10:00:00Z")
    }

    #[test]
    fn values_are_quoted_literally_in_both_shells() {
        assert_eq!(sh_quote("a'b $x"), r"'a'\''b $x'");
        assert_eq!(ps_quote("a'b $x"), "'a''b $x'");
        // PowerShell also closes a string on typographic quotes.
        assert_eq!(ps_quote("a’b"), "'a''b'");
        assert_eq!(sh_case_word("x86_64|*) rm"), "x86_64rm");
    }

    #[test]
    fn the_manifest_is_signed_for_installs_only() {
        let key = SigningKey::from_bytes(&[7; 32]);
        let b = build(&key);
        let manifest: Manifest = serde_json::from_str(&b.manifest).unwrap();
        assert_eq!(manifest.purpose, INSTALL_PURPOSE);
        assert_eq!((manifest.size, manifest.sha256.as_str()), (11, b.sha256.as_str()));
        // An agent given it as an update order refuses it: not an update's purpose.
        let err = kenny_proto::update::verify_manifest(&key.verifying_key(), &b.manifest, &b.signature).unwrap_err();
        assert!(err.to_string().contains("purpose"), "{err}");
        // But the signature over the label and the text is the server key's.
        kenny_proto::auth::verify(
            &key.verifying_key(),
            &kenny_proto::update::signed_bytes(&b.manifest),
            &b.signature,
        )
        .unwrap();
    }

    #[test]
    fn the_shell_script_carries_every_value_quoted_and_runs_only_when_whole() {
        let key = SigningKey::from_bytes(&[7; 32]);
        let builds = [build(&key)];
        let script = bundle_with(&key, &builds, "https://k.example/it's").render(TargetOs::Linux);
        assert!(script.starts_with("#!/bin/sh\n"));
        assert!(script.contains(r"server='https://k.example/it'\''s'"), "{script}");
        assert!(script.contains("KENNY_ENROLL_TOKEN='kenny_agt_tok'"));
        assert!(script.contains("    x86_64)\n      file='kenny-agent-0.2.0-linux-x86_64'\n"));
        assert!(
            script.trim_end().ends_with("install_kenny_agent"),
            "the last line starts the work"
        );
        let placeholder = script
            .match_indices('@')
            .any(|(i, _)| script[i + 1..].starts_with(|c: char| c.is_ascii_uppercase()));
        assert!(!placeholder, "a placeholder was left: {script}");
        let pem_line = script.lines().find(|l| l.starts_with("MCowBQYDK2VwAyEA")).unwrap();
        assert_eq!(pem_line.len(), 60, "one base64 line of the 44-byte key info");
    }

    #[test]
    fn the_powershell_script_carries_every_value_quoted() {
        let key = SigningKey::from_bytes(&[7; 32]);
        let builds = [build(&key)];
        let script = bundle_with(&key, &builds, "https://k.example").render(TargetOs::Windows);
        assert!(script.contains("$server = 'https://k.example'"));
        assert!(script.contains("'x86_64' = @{ File = 'kenny-agent-0.2.0-linux-x86_64'; Size = 11; Sha256 = 'abab"));
        assert!(script.contains("$env:KENNY_ENROLL_TOKEN = 'kenny_agt_tok'"));
        assert!(script.trim_end().ends_with("Install-KennyAgent"));
        assert!(
            script.contains("Remove-Item Env:KENNY_ENROLL_TOKEN"),
            "the token leaves the environment"
        );
    }

    #[test]
    fn a_refusal_prints_its_reason_and_fails_in_either_shell() {
        let text = refusal("this link was used at 2026-12-01T10:00:00Z;\nmake a new one");
        assert_eq!(
            text,
            "echo 'kenny: this link was used at 2026-12-01T10:00:00Z; make a new one'\nexit 1\n"
        );
        let out = std::process::Command::new("sh").arg("-c").arg(&text).output().unwrap();
        assert_eq!(out.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&out.stdout).contains("kenny: this link was used"));
    }
}
