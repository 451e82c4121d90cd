//! The Windows side of the os section: the release from the registry, and when Microsoft stops servicing it.
//!
//! `HKLM:\SOFTWARE\Microsoft\Windows NT\CurrentVersion` names the product, edition,
//! build and feature update. Windows 11 still writes "Windows 10" in `ProductName`; the
//! build tells them apart (22000 and later is 11). The end of servicing depends on the
//! release and on the edition's servicing family, so both pick the row of [`WIN_TABLE`].

use std::time::Duration;

use serde_json::{Map, Value, json};
use time::macros::date;
use time::{Date, OffsetDateTime};

use super::super::command::Output;
use super::super::format::ymd;
use super::super::windows::{Query, json_of};
use super::super::{Outcome, Status, section};
use super::{SupportSource, support_verdict};
use crate::tools::psjson;

/// Text from the PC (product name, edition) is cut to this many characters.
const MAX_TEXT: usize = 120;

/// First build of Windows 11; its registry still says "Windows 10".
const FIRST_WINDOWS_11_BUILD: u32 = 22000;

pub(super) static QUERY: Query = Query {
    script: SCRIPT,
    limit: Duration::from_secs(10),
    parse,
};

const SCRIPT: &str = r#"$ErrorActionPreference = 'Stop'
$cv = Get-ItemProperty -LiteralPath 'HKLM:\SOFTWARE\Microsoft\Windows NT\CurrentVersion'
$arch = $env:PROCESSOR_ARCHITEW6432
if (-not $arch) { $arch = $env:PROCESSOR_ARCHITECTURE }
[pscustomobject]@{
    ProductName = $cv.ProductName
    EditionID = $cv.EditionID
    DisplayVersion = $cv.DisplayVersion
    ReleaseId = $cv.ReleaseId
    CurrentBuild = $cv.CurrentBuild
    UBR = $cv.UBR
    CurrentVersion = $cv.CurrentVersion
    CurrentMajorVersionNumber = $cv.CurrentMajorVersionNumber
    CurrentMinorVersionNumber = $cv.CurrentMinorVersionNumber
    InstallationType = $cv.InstallationType
    ComputerName = $env:COMPUTERNAME
    Architecture = $arch
} | ConvertTo-Json -Compress -Depth 2
"#;

/// Microsoft services each edition family for its own length of time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    /// Home, Pro, Pro Education, Pro for Workstations (and every edition older than Windows 10).
    HomePro,
    /// Enterprise, Education, IoT Enterprise, Enterprise multi-session.
    EnterpriseEducation,
    /// Enterprise LTSB/LTSC.
    Ltsc,
    /// IoT Enterprise LTSC, serviced longer than Enterprise LTSC since 2021.
    IotLtsc,
    /// Windows Server (long-term releases, named by year).
    Server,
}

impl Family {
    fn as_str(self) -> &'static str {
        match self {
            Family::HomePro => "home_pro",
            Family::EnterpriseEducation => "enterprise_education",
            Family::Ltsc => "ltsc",
            Family::IotLtsc => "iot_ltsc",
            Family::Server => "server",
        }
    }
}

fn family_of(edition: &str, installation_type: &str, product: &str) -> Family {
    const LTSC: &[&str] = &["EnterpriseS", "EnterpriseSN"];
    const IOT_LTSC: &[&str] = &["IoTEnterpriseS", "IoTEnterpriseSK"];
    const ENTERPRISE: &[&str] = &[
        "Enterprise",
        "EnterpriseN",
        "EnterpriseG",
        "EnterpriseGN",
        "Education",
        "EducationN",
        "IoTEnterprise",
        "IoTEnterpriseK",
        "ServerRdsh",
    ];
    let is = |list: &[&str]| list.iter().any(|e| e.eq_ignore_ascii_case(edition));
    // Enterprise multi-session (ServerRdsh) says "Client" here; real servers say
    // "Server" or "Server Core".
    if installation_type.to_ascii_lowercase().starts_with("server") || product.contains("Windows Server") {
        Family::Server
    } else if is(IOT_LTSC) {
        Family::IotLtsc
    } else if is(LTSC) {
        Family::Ltsc
    } else if is(ENTERPRISE) {
        Family::EnterpriseEducation
    } else {
        Family::HomePro
    }
}

/// When Microsoft's servicing of one release ends for some edition families: the last
/// security update (extended support for LTSC and Server). Extended Security Updates
/// (ESU), paid or enrolled, are not counted.
struct WinEol {
    families: &'static [Family],
    build: u32,
    /// The release as Microsoft names it; for servers also what `ProductName` must contain.
    release: &'static str,
    end: Date,
}

const CLIENT: &[Family] = &[Family::HomePro, Family::EnterpriseEducation];
const HOME_PRO: &[Family] = &[Family::HomePro];
const ENT_EDU: &[Family] = &[Family::EnterpriseEducation];
/// Before 2021 IoT Enterprise LTSB/LTSC was serviced exactly as long as Enterprise LTSC.
const ANY_LTSC: &[Family] = &[Family::Ltsc, Family::IotLtsc];
const LTSC: &[Family] = &[Family::Ltsc];
const IOT_LTSC: &[Family] = &[Family::IotLtsc];
const SERVER: &[Family] = &[Family::Server];

const fn win(families: &'static [Family], build: u32, release: &'static str, end: Date) -> WinEol {
    WinEol {
        families,
        build,
        release,
        end,
    }
}

/// Sources (Microsoft Learn, "Lifecycle" and "Windows release health"):
/// learn.microsoft.com/lifecycle/products/windows-10-home-and-pro,
/// .../windows-10-enterprise-and-education, .../windows-11-home-and-pro,
/// .../windows-11-enterprise-and-education, .../windows-10-enterprise-ltsc-2019,
/// .../windows-10-enterprise-ltsc-2021, .../windows-10-iot-enterprise-ltsc-2021,
/// .../windows-11-enterprise-ltsc-2024, .../windows-11-iot-enterprise-ltsc-2024,
/// .../windows-server-2016, -2019, -2022, -2025, -2012-r2, and
/// learn.microsoft.com/windows/release-health/release-information (build of each release).
/// Dates are the calendar days Microsoft publishes (Pacific time), the Patch Tuesday of
/// the last update, including the extensions Microsoft granted later. As a rule Windows
/// 10 serviced a release 18 months (Enterprise/Education 30 for autumn releases) and
/// Windows 11 services one 24 months (Enterprise/Education 36); Windows 10 22H2 ends on
/// 2025-10-14 for every edition.
const WIN_TABLE: &[WinEol] = &[
    win(CLIENT, 7601, "Windows 7 SP1", date!(2020 - 01 - 14)),
    win(CLIENT, 9200, "Windows 8", date!(2016 - 01 - 12)),
    win(CLIENT, 9600, "Windows 8.1", date!(2023 - 01 - 10)),
    win(CLIENT, 10240, "Windows 10 1507", date!(2017 - 05 - 09)),
    win(CLIENT, 10586, "Windows 10 1511", date!(2017 - 10 - 10)),
    win(HOME_PRO, 14393, "Windows 10 1607", date!(2018 - 04 - 10)),
    win(ENT_EDU, 14393, "Windows 10 1607", date!(2019 - 04 - 09)),
    win(HOME_PRO, 15063, "Windows 10 1703", date!(2018 - 10 - 09)),
    win(ENT_EDU, 15063, "Windows 10 1703", date!(2019 - 10 - 08)),
    win(HOME_PRO, 16299, "Windows 10 1709", date!(2019 - 04 - 09)),
    win(ENT_EDU, 16299, "Windows 10 1709", date!(2020 - 10 - 13)),
    win(HOME_PRO, 17134, "Windows 10 1803", date!(2019 - 11 - 12)),
    win(ENT_EDU, 17134, "Windows 10 1803", date!(2021 - 05 - 11)),
    win(HOME_PRO, 17763, "Windows 10 1809", date!(2020 - 11 - 10)),
    win(ENT_EDU, 17763, "Windows 10 1809", date!(2021 - 05 - 11)),
    win(CLIENT, 18362, "Windows 10 1903", date!(2020 - 12 - 08)),
    win(HOME_PRO, 18363, "Windows 10 1909", date!(2021 - 05 - 11)),
    win(ENT_EDU, 18363, "Windows 10 1909", date!(2022 - 05 - 10)),
    win(CLIENT, 19041, "Windows 10 2004", date!(2021 - 12 - 14)),
    win(HOME_PRO, 19042, "Windows 10 20H2", date!(2022 - 05 - 10)),
    win(ENT_EDU, 19042, "Windows 10 20H2", date!(2023 - 05 - 09)),
    win(CLIENT, 19043, "Windows 10 21H1", date!(2022 - 12 - 13)),
    win(HOME_PRO, 19044, "Windows 10 21H2", date!(2023 - 06 - 13)),
    win(ENT_EDU, 19044, "Windows 10 21H2", date!(2024 - 06 - 11)),
    win(CLIENT, 19045, "Windows 10 22H2", date!(2025 - 10 - 14)),
    win(HOME_PRO, 22000, "Windows 11 21H2", date!(2023 - 10 - 10)),
    win(ENT_EDU, 22000, "Windows 11 21H2", date!(2024 - 10 - 08)),
    win(HOME_PRO, 22621, "Windows 11 22H2", date!(2024 - 10 - 08)),
    win(ENT_EDU, 22621, "Windows 11 22H2", date!(2025 - 10 - 14)),
    win(HOME_PRO, 22631, "Windows 11 23H2", date!(2025 - 11 - 11)),
    win(ENT_EDU, 22631, "Windows 11 23H2", date!(2026 - 11 - 10)),
    win(HOME_PRO, 26100, "Windows 11 24H2", date!(2026 - 10 - 13)),
    win(ENT_EDU, 26100, "Windows 11 24H2", date!(2027 - 10 - 12)),
    win(HOME_PRO, 26200, "Windows 11 25H2", date!(2027 - 10 - 12)),
    win(ENT_EDU, 26200, "Windows 11 25H2", date!(2028 - 10 - 10)),
    win(
        ANY_LTSC,
        10240,
        "Windows 10 Enterprise LTSB 2015",
        date!(2025 - 10 - 14),
    ),
    win(
        ANY_LTSC,
        14393,
        "Windows 10 Enterprise LTSB 2016",
        date!(2026 - 10 - 13),
    ),
    win(
        ANY_LTSC,
        17763,
        "Windows 10 Enterprise LTSC 2019",
        date!(2029 - 01 - 09),
    ),
    win(LTSC, 19044, "Windows 10 Enterprise LTSC 2021", date!(2027 - 01 - 12)),
    win(
        IOT_LTSC,
        19044,
        "Windows 10 IoT Enterprise LTSC 2021",
        date!(2032 - 01 - 13),
    ),
    win(LTSC, 26100, "Windows 11 Enterprise LTSC 2024", date!(2029 - 10 - 09)),
    win(
        IOT_LTSC,
        26100,
        "Windows 11 IoT Enterprise LTSC 2024",
        date!(2034 - 10 - 10),
    ),
    win(SERVER, 7601, "Server 2008 R2", date!(2020 - 01 - 14)),
    win(SERVER, 9200, "Server 2012", date!(2023 - 10 - 10)),
    win(SERVER, 9600, "Server 2012 R2", date!(2023 - 10 - 10)),
    win(SERVER, 14393, "Server 2016", date!(2027 - 01 - 12)),
    win(SERVER, 17763, "Server 2019", date!(2029 - 01 - 09)),
    win(SERVER, 20348, "Server 2022", date!(2031 - 10 - 14)),
    win(SERVER, 26100, "Server 2025", date!(2034 - 11 - 14)),
];

/// The row for this release and family. A server must also carry the row's name in
/// `ProductName`: a semi-annual Server release (no year in its name) shares its build
/// with a long-term one but ended years earlier, and is left unknown.
fn win_row(family: Family, build: u32, product: &str) -> Option<&'static WinEol> {
    WIN_TABLE.iter().find(|row| {
        row.build == build
            && row.families.contains(&family)
            && (family != Family::Server || product.contains(row.release))
    })
}

/// Releases for which Microsoft sells (or, for Windows 10 consumers, gives) Extended
/// Security Updates past the end above; the agent cannot see an enrolment, so it says so.
fn offers_esu(row: &WinEol) -> bool {
    row.release == "Windows 10 22H2" || row.release.starts_with("Server 2012")
}

/// What the registry says, as printed by [`SCRIPT`].
struct Release {
    product: String,
    edition: Option<String>,
    display_version: Option<String>,
    build: Option<u32>,
    ubr: Option<i64>,
    nt_version: Option<String>,
    installation_type: Option<String>,
    hostname: Option<String>,
    arch: Option<String>,
}

fn release_of(row: &Map<String, Value>) -> Release {
    let text = |key: &str| psjson::text(row, key).map(|t| clip(t.trim()));
    let nt_version = match (
        psjson::number(row, "CurrentMajorVersionNumber"),
        psjson::number(row, "CurrentMinorVersionNumber"),
    ) {
        (Some(major), Some(minor)) => Some(format!("{major}.{minor}")),
        _ => text("CurrentVersion"),
    };
    Release {
        product: text("ProductName").unwrap_or_else(|| "Windows".to_owned()),
        edition: text("EditionID"),
        // DisplayVersion ("22H2") exists since 20H2; before it ReleaseId ("1909") did.
        display_version: text("DisplayVersion").or_else(|| text("ReleaseId")),
        build: text("CurrentBuild").and_then(|b| b.parse().ok()),
        ubr: psjson::number(row, "UBR"),
        nt_version,
        installation_type: text("InstallationType"),
        hostname: text("ComputerName"),
        arch: text("Architecture").map(|a| arch_name(&a)),
    }
}

/// The names the Linux side uses (Rust's `std::env::consts::ARCH`).
fn arch_name(windows: &str) -> String {
    match windows.to_ascii_uppercase().as_str() {
        "AMD64" | "EM64T" => "x86_64".to_owned(),
        "ARM64" => "aarch64".to_owned(),
        "X86" => "x86".to_owned(),
        other => other.to_ascii_lowercase(),
    }
}

fn clip(text: &str) -> String {
    super::super::format::clip(text, MAX_TEXT)
}

/// "Windows 10 Pro" becomes "Windows 11 Pro" on builds of Windows 11.
fn product_name(product: &str, build: Option<u32>, family: Family) -> String {
    match build {
        Some(build) if build >= FIRST_WINDOWS_11_BUILD && family != Family::Server => {
            product.replacen("Windows 10", "Windows 11", 1)
        }
        _ => product.to_owned(),
    }
}

fn parse(output: &Output, now: OffsetDateTime) -> Outcome {
    const KEY: &str = r"HKLM\SOFTWARE\Microsoft\Windows NT\CurrentVersion";
    match json_of(output)? {
        Value::Object(row) => Ok(build_section(&release_of(&row), now.date())),
        Value::Null => Err(format!(
            "the registry query printed nothing; check that {KEY} is readable"
        )),
        other => Err(format!(
            "the registry query printed {} instead of the values of {KEY}",
            if other.is_array() { "a list" } else { "a single value" }
        )),
    }
}

fn build_section(release: &Release, today: Date) -> super::super::Section {
    let family = family_of(
        release.edition.as_deref().unwrap_or(""),
        release.installation_type.as_deref().unwrap_or(""),
        &release.product,
    );
    let name = product_name(&release.product, release.build, family);
    let build = release.build.map(|b| match release.ubr {
        Some(ubr) => format!("{b}.{ubr}"),
        None => b.to_string(),
    });
    let kernel = match (&release.nt_version, &build) {
        (Some(nt), Some(build)) => Some(format!("{nt}.{build}")),
        _ => None,
    };
    let row = release.build.and_then(|b| win_row(family, b, &release.product));
    let end = row.map(|r| r.end);
    let (status, support_text) = support_verdict(end, today);
    let mut summary = name.clone();
    if let Some(display) = &release.display_version {
        summary = format!("{summary} {display}");
    }
    if let Some(build) = &build {
        summary = format!("{summary} (build {build})");
    }
    if let Some(arch) = &release.arch {
        summary = format!("{summary} on {arch}");
    }
    match support_text {
        Some(text) => summary = format!("{summary}; {text}"),
        None => summary = format!("{summary}; end of support unknown to this agent"),
    }
    let esu_offered = row.is_some_and(offers_esu);
    if esu_offered && status == Status::Crit {
        summary.push_str(", unless the PC is enrolled in Extended Security Updates (ESU)");
    }
    let source = if row.is_some() {
        SupportSource::Table
    } else {
        SupportSource::Unknown
    };
    section(
        status,
        summary,
        json!({
            "name": name,
            "version": release.display_version.clone().or_else(|| build.clone()),
            "kernel": kernel,
            "hostname": release.hostname,
            "arch": release.arch,
            "edition": release.edition,
            "build": build,
            "display_version": release.display_version,
            "installation_type": release.installation_type,
            "servicing": family.as_str(),
            "lifecycle_release": row.map(|r| r.release),
            "esu_offered": esu_offered,
            "support_end": end.map(ymd),
            "support_end_approximate": false,
            "support_source": source.as_str(),
            "support_days_left": end.map(|end| (end - today).whole_days()),
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn release(product: &str, edition: &str, build: u32, installation_type: &str) -> Release {
        Release {
            product: product.to_owned(),
            edition: Some(edition.to_owned()),
            display_version: None,
            build: Some(build),
            ubr: Some(1),
            nt_version: Some("10.0".to_owned()),
            installation_type: Some(installation_type.to_owned()),
            hostname: None,
            arch: None,
        }
    }

    #[test]
    fn the_query_reads_the_current_version_key() {
        assert!(SCRIPT.contains(r"Get-ItemProperty -LiteralPath 'HKLM:\SOFTWARE\Microsoft\Windows NT\CurrentVersion'"));
        for property in [
            "ProductName",
            "EditionID",
            "DisplayVersion",
            "ReleaseId",
            "CurrentBuild",
            "UBR",
            "InstallationType",
        ] {
            assert!(SCRIPT.contains(&format!("$cv.{property}")), "{property}");
        }
        assert!(SCRIPT.trim_end().ends_with("ConvertTo-Json -Compress -Depth 2"));
    }

    #[test]
    fn editions_fall_into_their_servicing_family() {
        assert_eq!(family_of("Professional", "Client", "Windows 10 Pro"), Family::HomePro);
        assert_eq!(family_of("Core", "Client", "Windows 10 Home"), Family::HomePro);
        assert_eq!(family_of("ProfessionalEducation", "Client", "x"), Family::HomePro);
        assert_eq!(family_of("Enterprise", "Client", "x"), Family::EnterpriseEducation);
        assert_eq!(family_of("education", "Client", "x"), Family::EnterpriseEducation);
        assert_eq!(
            family_of("ServerRdsh", "Client", "Windows 10 Enterprise multi-session"),
            Family::EnterpriseEducation
        );
        assert_eq!(family_of("EnterpriseS", "Client", "x"), Family::Ltsc);
        assert_eq!(family_of("IoTEnterpriseS", "Client", "x"), Family::IotLtsc);
        assert_eq!(
            family_of("ServerStandard", "Server Core", "Windows Server 2022 Standard"),
            Family::Server
        );
        assert_eq!(family_of("", "", "Windows Server 2019 Datacenter"), Family::Server);
    }

    #[test]
    fn support_depends_on_release_and_edition() {
        let end = |r: &Release| build_section(r, date!(2026 - 06 - 05))["support_end"].clone();
        assert_eq!(
            end(&release("Windows 10 Pro", "Professional", 26100, "Client")),
            "2026-10-13"
        );
        assert_eq!(
            end(&release("Windows 10 Enterprise", "Enterprise", 26100, "Client")),
            "2027-10-12"
        );
        assert_eq!(
            end(&release("Windows 10 Pro", "Professional", 19045, "Client")),
            "2025-10-14"
        );
        assert_eq!(
            end(&release("Windows 10 Education", "Education", 19045, "Client")),
            "2025-10-14"
        );
        assert_eq!(
            end(&release(
                "Windows 10 Enterprise LTSC 2021",
                "EnterpriseS",
                19044,
                "Client"
            )),
            "2027-01-12"
        );
        assert_eq!(
            end(&release(
                "Windows 10 IoT Enterprise LTSC 2021",
                "IoTEnterpriseS",
                19044,
                "Client"
            )),
            "2032-01-13"
        );
        assert_eq!(
            end(&release(
                "Windows 10 Enterprise LTSC 2019",
                "IoTEnterpriseS",
                17763,
                "Client"
            )),
            "2029-01-09"
        );
        assert_eq!(
            end(&release(
                "Windows Server 2022 Datacenter",
                "ServerDatacenter",
                20348,
                "Server"
            )),
            "2031-10-14"
        );
        assert_eq!(
            end(&release(
                "Windows Server 2019 Standard",
                "ServerStandard",
                17763,
                "Server Core"
            )),
            "2029-01-09"
        );
        // A semi-annual server release shares 17763 with Server 2019 but is not it.
        assert_eq!(
            end(&release(
                "Windows Server Datacenter",
                "ServerDatacenter",
                17763,
                "Server Core"
            )),
            Value::Null
        );
        assert_eq!(
            end(&release("Windows 10 Pro Insider", "Professional", 27000, "Client")),
            Value::Null
        );
    }

    #[test]
    fn windows_11_is_told_by_its_build() {
        assert_eq!(
            product_name("Windows 10 Pro", Some(22631), Family::HomePro),
            "Windows 11 Pro"
        );
        assert_eq!(
            product_name("Windows 10 Pro", Some(19045), Family::HomePro),
            "Windows 10 Pro"
        );
        assert_eq!(
            product_name("Windows Server 2025 Standard", Some(26100), Family::Server),
            "Windows Server 2025 Standard"
        );
        assert_eq!(
            product_name("Windows 10 Home", None, Family::HomePro),
            "Windows 10 Home"
        );
    }

    #[test]
    fn status_follows_the_end_of_servicing() {
        let pro = release("Windows 10 Pro", "Professional", 26100, "Client");
        let at = |today: Date| build_section(&pro, today)["status"].clone();
        assert_eq!(at(date!(2026 - 07 - 14)), "ok", "91 days left");
        assert_eq!(at(date!(2026 - 07 - 15)), "warn", "90 days left");
        assert_eq!(at(date!(2026 - 10 - 14)), "crit");
        let win10 = build_section(
            &release("Windows 10 Pro", "Professional", 19045, "Client"),
            date!(2026 - 06 - 05),
        );
        assert_eq!(win10["esu_offered"], true);
        assert!(win10["summary"].as_str().unwrap().ends_with(
            "security support ended 2025-10-14: upgrade to a supported release, unless the PC is enrolled in Extended Security Updates (ESU)"
        ));
        let unknown = build_section(
            &release("Windows 10 Pro", "Professional", 27000, "Client"),
            date!(2026 - 06 - 05),
        );
        assert_eq!(unknown["status"], "ok");
        assert_eq!(unknown["support_source"], "unknown");
        assert!(
            unknown["summary"]
                .as_str()
                .unwrap()
                .ends_with("end of support unknown to this agent")
        );
    }

    #[test]
    fn every_table_row_is_unique() {
        for (i, row) in WIN_TABLE.iter().enumerate() {
            for other in &WIN_TABLE[i + 1..] {
                let shared = row.families.iter().any(|f| other.families.contains(f));
                assert!(
                    !(shared && row.build == other.build),
                    "{} / {}",
                    row.release,
                    other.release
                );
            }
        }
    }

    #[test]
    fn architectures_use_the_linux_names() {
        assert_eq!(arch_name("AMD64"), "x86_64");
        assert_eq!(arch_name("ARM64"), "aarch64");
        assert_eq!(arch_name("x86"), "x86");
    }
}
