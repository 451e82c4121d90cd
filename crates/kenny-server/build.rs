//! Names the build the dashboard footer and `/metrics` show: `KENNY_BUILD` when a
//! packager sets it, else the commit this source was checked out at, else `unknown`
//! (a source tarball). Only git's own files are watched, so this reruns when the
//! checked-out commit changes, not on every edit.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-env-changed=KENNY_BUILD");
    let build = std::env::var("KENNY_BUILD")
        .ok()
        .filter(|b| !b.trim().is_empty())
        .or_else(|| {
            if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
                println!("cargo:rerun-if-changed={dir}/HEAD");
                println!("cargo:rerun-if-changed={dir}/packed-refs");
                if let Some(head_ref) = git(&["symbolic-ref", "-q", "HEAD"]) {
                    println!("cargo:rerun-if-changed={dir}/{head_ref}");
                }
            }
            git(&["rev-parse", "--short=12", "HEAD"])
        });
    // Only plain characters reach the page and the metrics label.
    let build: String = build
        .unwrap_or_else(|| "unknown".into())
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '+'))
        .take(40)
        .collect();
    println!("cargo:rustc-env=KENNY_BUILD={build}");
}
