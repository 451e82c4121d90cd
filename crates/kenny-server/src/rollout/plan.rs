//! The rollout's decisions as pure functions of what the engine sees, so each rule is
//! tested without a server: which PCs start now, what an outcome makes of a PC, and
//! when an update whose outcome this process never saw counts as unknown.

use std::time::Duration;

/// A PC that rolled back this many times is held.
pub(crate) const MAX_ROLLBACKS: u32 = 2;
/// Attempts whose outcome stayed unknown before a PC counts as failed.
pub(crate) const MAX_UNKNOWN_ATTEMPTS: u32 = 3;
/// How long an update may last from its start before the agent's report is given up
/// on: the longest trial the server waits for and the report's grace, with margin.
pub(crate) const REPORT_WAIT: Duration = Duration::from_secs(12 * 60);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    Pending,
    Updating,
    Done,
    /// Rolled back once; waits for its second try.
    RolledBack,
    Failed,
    Held,
    Skipped,
}

impl Status {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Updating => "updating",
            Status::Done => "done",
            Status::RolledBack => "rolled_back",
            Status::Failed => "failed",
            Status::Held => "held",
            Status::Skipped => "skipped",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Status> {
        Some(match s {
            "pending" => Status::Pending,
            "updating" => Status::Updating,
            "done" => Status::Done,
            "rolled_back" => Status::RolledBack,
            "failed" => Status::Failed,
            "held" => Status::Held,
            "skipped" => Status::Skipped,
            _ => return None,
        })
    }

    /// The engine starts an update for a PC in this status when it may.
    fn waits(self) -> bool {
        matches!(self, Status::Pending | Status::RolledBack)
    }

    /// Nothing more happens to the PC in this campaign.
    pub(crate) fn is_final(self) -> bool {
        matches!(self, Status::Done | Status::Failed | Status::Held | Status::Skipped)
    }
}

/// One PC of a campaign as the engine sees it this tick.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PcNow<'a> {
    pub agent_id: &'a str,
    pub status: Status,
    /// Still registered on this server.
    pub known: bool,
    /// The version it runs, when it is online (`Some("")` if it did not say).
    pub online: Option<&'a str>,
    /// An update of this PC is running in this process (for any campaign).
    pub busy: bool,
}

/// What the engine does for one PC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    Start(String),
    /// A waiting PC needs no update: it moves to `to` for `why`.
    Settle {
        agent_id: String,
        to: Status,
        why: String,
    },
}

/// This tick's steps for one campaign pinning `pinned`: PCs that are gone or already
/// at (or past) the version are settled; online, idle, waiting PCs start in order
/// while fewer than `max_parallel` are updating. A campaign that is not running
/// changes nothing.
pub(crate) fn plan(running: bool, max_parallel: u32, pinned: &str, pcs: &[PcNow<'_>]) -> Vec<Step> {
    if !running {
        return Vec::new();
    }
    let parse = kenny_proto::results::parse_version;
    let pinned_v = parse(pinned);
    let mut updating = pcs.iter().filter(|p| p.status == Status::Updating).count();
    let mut steps = Vec::new();
    for pc in pcs.iter().filter(|p| p.status.waits()) {
        let settle = |to: Status, why: String| Step::Settle {
            agent_id: pc.agent_id.to_owned(),
            to,
            why,
        };
        if !pc.known {
            steps.push(settle(Status::Skipped, "the agent was removed from this server".into()));
            continue;
        }
        let Some(running_version) = pc.online else { continue };
        if pc.busy {
            continue;
        }
        match (parse(running_version), pinned_v) {
            (Some(v), Some(p)) if v == p => {
                steps.push(settle(Status::Done, format!("already runs {running_version}")));
                continue;
            }
            (Some(v), Some(p)) if v > p => {
                steps.push(settle(
                    Status::Skipped,
                    format!("runs {running_version}, newer than {pinned}; campaigns never downgrade"),
                ));
                continue;
            }
            _ => {}
        }
        if updating < max_parallel as usize {
            updating += 1;
            steps.push(Step::Start(pc.agent_id.to_owned()));
        }
    }
    steps
}

/// How one update ended, as the engine learnt it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ended {
    /// The agent reported that it kept the new build.
    Kept,
    /// The agent reported that it rolled back, and why.
    RolledBack(String),
    /// The update did not start because the PC went offline first; it waits again.
    NotStarted(String),
    /// Refused or failed for a reason trying again will not change.
    Failed(String),
    /// No one knows whether the PC kept the build (disconnected mid-way, no report).
    Unknown(String),
}

/// A PC's next status after an update ended, whether it counts a rollback, and the
/// reason shown.
pub(crate) fn after(ended: &Ended, version: &str, rollbacks: u32, attempts: u32) -> (Status, bool, String) {
    match ended {
        Ended::Kept => (Status::Done, false, format!("runs kenny-agent {version}")),
        Ended::RolledBack(why) if rollbacks + 1 >= MAX_ROLLBACKS => (
            Status::Held,
            true,
            format!(
                "rolled back {} times (last: {why}); held: this campaign will not try it again, see its update history",
                rollbacks + 1
            ),
        ),
        Ended::RolledBack(why) => (
            Status::RolledBack,
            true,
            format!("rolled back ({why}); it will be tried once more when online"),
        ),
        Ended::NotStarted(why) => (Status::Pending, false, why.clone()),
        Ended::Failed(why) => (Status::Failed, false, why.clone()),
        Ended::Unknown(why) if attempts >= MAX_UNKNOWN_ATTEMPTS => (
            Status::Failed,
            false,
            format!("no outcome after {attempts} attempts (last: {why}); update it by hand or look at the PC"),
        ),
        Ended::Unknown(why) => (
            Status::Pending,
            false,
            format!("outcome unknown ({why}); it will be tried again when online"),
        ),
    }
}

/// An `updating` PC with no update running in this process (the server restarted,
/// or the agent's report came after the call gave up): the outcome the agent reported
/// for this version since the update started, if any; else unknown once the longest
/// possible update is over; else still waiting (`None`).
pub(crate) fn orphan(reported: Option<Ended>, since_start: Duration) -> Option<Ended> {
    match reported {
        Some(ended) => Some(ended),
        None if since_start >= REPORT_WAIT => Some(Ended::Unknown(format!(
            "no report from the agent within {} minutes of the update's start",
            REPORT_WAIT.as_secs() / 60
        ))),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pc(agent_id: &'static str, status: Status, online: Option<&'static str>) -> PcNow<'static> {
        PcNow {
            agent_id,
            status,
            known: true,
            online,
            busy: false,
        }
    }

    fn starts(steps: &[Step]) -> Vec<&str> {
        steps
            .iter()
            .filter_map(|s| match s {
                Step::Start(a) => Some(a.as_str()),
                Step::Settle { .. } => None,
            })
            .collect()
    }

    #[test]
    fn only_online_waiting_pcs_start_and_never_more_than_max_parallel() {
        let pcs = [
            pc("a", Status::Done, Some("0.2.0")),
            pc("b", Status::Pending, None),
            pc("c", Status::Pending, Some("0.1.0")),
            pc("d", Status::RolledBack, Some("0.1.0")),
            pc("e", Status::Pending, Some("0.1.0")),
        ];
        assert_eq!(starts(&plan(true, 1, "0.2.0", &pcs)), ["c"]);
        assert_eq!(starts(&plan(true, 2, "0.2.0", &pcs)), ["c", "d"]);
        assert_eq!(starts(&plan(true, 50, "0.2.0", &pcs)), ["c", "d", "e"]);
        // One already updating takes a slot.
        let mut busy = pcs.clone();
        busy[0].status = Status::Updating;
        assert_eq!(starts(&plan(true, 2, "0.2.0", &busy)), ["c"]);
        assert!(plan(true, 1, "0.2.0", &busy).is_empty());
        // A PC another campaign is updating waits its turn.
        let mut other = pcs.clone();
        other[2].busy = true;
        assert_eq!(starts(&plan(true, 1, "0.2.0", &other)), ["d"]);
    }

    #[test]
    fn a_paused_or_cancelled_campaign_starts_nothing() {
        let pcs = [pc("a", Status::Pending, Some("0.1.0"))];
        assert!(plan(false, 5, "0.2.0", &pcs).is_empty());
    }

    #[test]
    fn pcs_at_or_past_the_version_and_removed_ones_are_settled_not_started() {
        let mut gone = pc("z", Status::Pending, None);
        gone.known = false;
        let pcs = [
            pc("a", Status::Pending, Some("0.2.0")),
            pc("b", Status::Pending, Some("0.3.0")),
            pc("c", Status::Pending, Some("not-a-version")),
            gone,
        ];
        let steps = plan(true, 1, "0.2.0", &pcs);
        let settled: Vec<(&str, Status)> = steps
            .iter()
            .filter_map(|s| match s {
                Step::Settle { agent_id, to, .. } => Some((agent_id.as_str(), *to)),
                Step::Start(_) => None,
            })
            .collect();
        assert_eq!(
            settled,
            [("a", Status::Done), ("b", Status::Skipped), ("z", Status::Skipped)]
        );
        // A version that cannot be read goes to the update rules, which refuse it with
        // their reason.
        assert_eq!(starts(&steps), ["c"]);
    }

    #[test]
    fn the_second_rollback_holds_the_pc() {
        let rolled = Ended::RolledBack("did not log in within 5s".into());
        let (first, counted, why) = after(&rolled, "0.2.0", 0, 1);
        assert_eq!((first, counted), (Status::RolledBack, true));
        assert!(why.contains("did not log in"), "{why}");
        let (second, counted, why) = after(&rolled, "0.2.0", 1, 2);
        assert_eq!((second, counted), (Status::Held, true));
        assert!(why.contains("rolled back 2 times") && why.contains("held"), "{why}");
        // A held PC is never planned again.
        let pcs = [pc("a", Status::Held, Some("0.1.0"))];
        assert!(plan(true, 5, "0.2.0", &pcs).is_empty());
    }

    #[test]
    fn failures_unknown_outcomes_and_offline_starts() {
        assert_eq!(after(&Ended::Kept, "0.2.0", 1, 2).0, Status::Done);
        let (s, counted, why) = after(&Ended::Failed("no build for linux/riscv64".into()), "0.2.0", 0, 1);
        assert_eq!(
            (s, counted, why.as_str()),
            (Status::Failed, false, "no build for linux/riscv64")
        );
        assert_eq!(
            after(&Ended::NotStarted("offline".into()), "0.2.0", 0, 9).0,
            Status::Pending
        );
        assert_eq!(after(&Ended::Unknown("cut".into()), "0.2.0", 0, 1).0, Status::Pending);
        assert_eq!(after(&Ended::Unknown("cut".into()), "0.2.0", 0, 3).0, Status::Failed);
    }

    #[test]
    fn an_orphaned_update_waits_for_the_report_then_counts_as_unknown() {
        let minute = Duration::from_secs(60);
        assert_eq!(orphan(None, minute), None);
        assert_eq!(orphan(Some(Ended::Kept), minute), Some(Ended::Kept));
        assert!(matches!(orphan(None, REPORT_WAIT), Some(Ended::Unknown(_))));
    }
}
