#[cfg(unix)]
use std::time::Duration;

use super::*;

/// A temporary directory for the binaries, with the agent's state directory inside.
#[cfg(unix)]
fn dir_with_state() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    (dir, state)
}

#[cfg(unix)]
fn staged_in(dir: &Path, new_build: &str) -> Staged {
    let exe = dir.join("kenny-agent");
    std::fs::write(&exe, b"#!/bin/sh\nexit 0\n# the previous build\n").unwrap();
    let staged = dir.join("kenny-agent.new");
    std::fs::write(&staged, new_build).unwrap();
    use std::os::unix::fs::PermissionsExt;
    for p in [&exe, &staged] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    Staged {
        exe,
        staged,
        sha256: file_sha256(&dir.join("kenny-agent.new")).unwrap(),
        from: "0.1.0".into(),
        to: "0.2.0".into(),
        manifest: "{\"signed\":true}".into(),
        signature: "c2ln".into(),
    }
}

#[cfg(unix)]
fn previous_build() -> &'static [u8] {
    b"#!/bin/sh\nexit 0\n# the previous build\n"
}

#[cfg(unix)]
#[tokio::test]
async fn a_build_that_exits_before_logging_in_is_rolled_back() {
    let (dir, state) = dir_with_state();
    let staged = staged_in(dir.path(), "#!/bin/sh\nexit 3\n");
    let outcome = trial(&staged, &state, Duration::from_secs(20), vec!["run".into()]).await;
    let TrialOutcome::RolledBack(reason) = outcome else {
        panic!("kept a build that exited: {outcome:?}")
    };
    assert!(
        reason.contains("exited") && reason.contains("before it logged in"),
        "{reason}"
    );
    assert_eq!(std::fs::read(&staged.exe).unwrap(), previous_build());
    assert_eq!(
        std::fs::read(dir.path().join("kenny-agent.failed")).unwrap(),
        b"#!/bin/sh\nexit 3\n"
    );
    let marker = read_marker(&state).unwrap();
    assert_eq!((marker.state, marker.reason), (State::RolledBack, reason));
}

#[cfg(unix)]
#[tokio::test]
async fn a_build_that_never_logs_in_is_rolled_back_when_the_window_closes() {
    let (dir, state) = dir_with_state();
    let staged = staged_in(dir.path(), "#!/bin/sh\nexec sleep 600\n");
    let started = std::time::Instant::now();
    let outcome = trial(&staged, &state, Duration::from_secs(1), vec!["run".into()]).await;
    assert_eq!(
        outcome,
        TrialOutcome::RolledBack("the new build did not log in within 1s".into())
    );
    assert!(started.elapsed() < Duration::from_secs(15));
    assert_eq!(std::fs::read(&staged.exe).unwrap(), previous_build());
    let report = pending_report(&state, "pc-a", "now".into()).unwrap();
    let fields = report.fields.unwrap();
    assert_eq!(fields["outcome"], "rolled_back");
    assert_eq!(fields["manifest"], "{\"signed\":true}");
    assert_eq!(report.level, "error");
}

#[cfg(unix)]
#[tokio::test]
async fn a_build_that_logs_in_on_trial_is_kept() {
    let (dir, state) = dir_with_state();
    // Stands in for a trial child: in trial mode, it marks the trial confirmed (as the
    // agent does after logging in) and exits.
    let script = format!(
        "#!/bin/sh\n[ \"${TRIAL_ENV}\" = 1 ] || exit 9\n[ \"$1\" = run ] || exit 8\nm={}\nsed 's/\"state\":\"trial\"/\"state\":\"confirmed\"/' \"$m\" > \"$m.x\" && mv \"$m.x\" \"$m\"\n",
        marker_path(&state).display()
    );
    let staged = staged_in(dir.path(), &script);
    let outcome = trial(&staged, &state, Duration::from_secs(20), vec!["service".into()]).await;
    assert_eq!(outcome, TrialOutcome::Kept);
    assert_eq!(std::fs::read_to_string(&staged.exe).unwrap(), script);
    assert_eq!(
        std::fs::read(dir.path().join("kenny-agent.old")).unwrap(),
        previous_build()
    );
    let report = pending_report(&state, "pc-a", "now".into()).unwrap();
    assert_eq!(report.fields.as_ref().unwrap()["outcome"], "succeeded");
    clear(&state);
    assert!(pending_report(&state, "pc-a", "now".into()).is_none());
}

#[test]
fn only_a_trial_marker_can_be_confirmed() {
    let dir = tempfile::tempdir().unwrap();
    assert!(confirm_trial(dir.path()).is_err());
    let marker = Marker {
        state: State::RolledBack,
        from: "0.1.0".into(),
        to: "0.2.0".into(),
        reason: "x".into(),
        manifest: String::new(),
        signature: String::new(),
    };
    write_marker(dir.path(), &marker).unwrap();
    assert!(confirm_trial(dir.path()).is_err());
    write_marker(
        dir.path(),
        &Marker {
            state: State::Trial,
            ..marker
        },
    )
    .unwrap();
    confirm_trial(dir.path()).unwrap();
    assert_eq!(read_marker(dir.path()).unwrap().state, State::Confirmed);
}

#[test]
fn a_service_hands_its_trial_child_a_foreground_run() {
    assert_eq!(
        trial_args(vec!["service".into(), "--config".into(), "c".into()]),
        vec![OsString::from("run"), "--config".into(), "c".into()]
    );
    assert_eq!(trial_args(vec!["run".into()]), vec![OsString::from("run")]);
}

#[cfg(unix)]
#[tokio::test]
async fn a_staged_build_changed_after_its_check_is_never_swapped_in() {
    let (dir, state) = dir_with_state();
    let staged = staged_in(dir.path(), "#!/bin/sh\nexit 0\n");
    // Another program rewrites the staged file after the download was checked.
    std::fs::write(&staged.staged, "#!/bin/sh\necho replaced\n").unwrap();
    let outcome = trial(&staged, &state, Duration::from_secs(20), vec!["run".into()]).await;
    let TrialOutcome::RolledBack(reason) = outcome else {
        panic!("swapped in a changed build: {outcome:?}")
    };
    assert!(reason.contains("changed after it was checked"), "{reason}");
    assert_eq!(std::fs::read(&staged.exe).unwrap(), previous_build());
    assert_eq!(read_marker(&state).unwrap().state, State::RolledBack);
}

#[cfg(unix)]
#[tokio::test]
async fn rollback_restores_the_previous_build_even_when_the_failed_name_is_taken() {
    let (dir, state) = dir_with_state();
    // A directory with something in it where the failed build would be kept.
    std::fs::create_dir_all(dir.path().join("kenny-agent.failed/x")).unwrap();
    let staged = staged_in(dir.path(), "#!/bin/sh\nexit 3\n");
    let outcome = trial(&staged, &state, Duration::from_secs(20), vec!["run".into()]).await;
    let TrialOutcome::RolledBack(reason) = outcome else {
        panic!("kept a build that exited: {outcome:?}")
    };
    assert!(!reason.contains("failed too"), "{reason}");
    assert_eq!(std::fs::read(&staged.exe).unwrap(), previous_build());
}

#[cfg(unix)]
#[test]
fn an_interrupted_trial_puts_the_previous_build_back_at_the_next_start() {
    let (dir, state) = dir_with_state();
    let exe = dir.path().join("kenny-agent");
    std::fs::write(&exe, "the new build, never proven").unwrap();
    std::fs::write(dir.path().join("kenny-agent.old"), previous_build()).unwrap();
    let marker = Marker {
        state: State::Trial,
        from: "0.1.0".into(),
        to: "0.2.0".into(),
        reason: String::new(),
        manifest: "{}".into(),
        signature: String::new(),
    };
    write_marker(&state, &marker).unwrap();
    assert!(recover_interrupted(&state, &exe));
    assert_eq!(std::fs::read(&exe).unwrap(), previous_build());
    let after = read_marker(&state).unwrap();
    assert_eq!(after.state, State::RolledBack);
    assert!(after.reason.contains("interrupted"), "{}", after.reason);
    let report = pending_report(&state, "pc-a", "now".into()).unwrap();
    assert_eq!(report.fields.unwrap()["outcome"], "rolled_back");
    // Nothing to do on a normal start.
    assert!(!recover_interrupted(&state, &exe));
}
