//! The host page's history: CPU, memory, each disk, the hottest temperature and the
//! health state over a chosen range, drawn as SVG on the server (no script, nothing
//! loaded from elsewhere), with the disk forecasts beside them.

use std::collections::BTreeMap;

use maud::{Markup, html};
use time::OffsetDateTime;

use crate::history::DiskForecast;
use crate::store::MetricRow;

pub(super) struct Range {
    pub key: &'static str,
    pub label: &'static str,
    pub hours: i64,
}

pub(super) const RANGES: [Range; 4] = [
    Range {
        key: "24h",
        label: "24 hours",
        hours: 24,
    },
    Range {
        key: "7d",
        label: "7 days",
        hours: 24 * 7,
    },
    Range {
        key: "30d",
        label: "30 days",
        hours: 24 * 30,
    },
    Range {
        key: "1y",
        label: "1 year",
        hours: 24 * 365,
    },
];

/// The range a query names; 24 hours when it names none (or nonsense).
pub(super) fn range_of(key: Option<&str>) -> &'static Range {
    RANGES.iter().find(|r| Some(r.key) == key).unwrap_or(&RANGES[0])
}

const WIDTH: f64 = 600.0;
const HEIGHT: f64 = 110.0;
/// Most lines in the disk chart.
const MAX_DISKS: usize = 6;

/// A series: (time, value) pairs.
type Series = Vec<(OffsetDateTime, f64)>;

pub(super) fn card(
    agent_id: &str,
    range: &Range,
    points: &[MetricRow],
    forecasts: &[DiskForecast],
    now: OffsetDateTime,
) -> Markup {
    let start = now - time::Duration::hours(range.hours);
    let timed: Vec<(OffsetDateTime, &MetricRow)> = points
        .iter()
        .filter_map(|p| Some((crate::clock::parse(&p.at)?, p)))
        .collect();
    let series =
        |f: fn(&MetricRow) -> Option<f64>| -> Series { timed.iter().filter_map(|(t, p)| Some((*t, f(p)?))).collect() };
    let mut disks: BTreeMap<String, Series> = BTreeMap::new();
    for (t, p) in &timed {
        let map: BTreeMap<String, f64> = serde_json::from_str(&p.disks).unwrap_or_default();
        for (mount, percent) in map {
            disks.entry(mount).or_default().push((*t, percent));
        }
    }
    let disks: Vec<(String, Series)> = disks.into_iter().take(MAX_DISKS).collect();
    let temperature = series(|p| p.temperature);
    let hottest = temperature.iter().map(|p| p.1).fold(100.0_f64, f64::max);
    html! {
        section class="card wide" id="history" {
            h2 { "History" }
            nav class="ranges" aria-label="Range" {
                @for r in &RANGES {
                    a href={ "/hosts/" (agent_id) "?range=" (r.key) "#history" }
                        aria-current=[(r.key == range.key).then_some("page")] { (r.label) }
                }
            }
            @if timed.is_empty() {
                p class="muted" { "No history in the last " (range.label) " yet: a point is kept from every snapshot." }
            } @else {
                p class="muted" { (timed.len()) " points over the last " (range.label) "." }
                (health_band(&timed, start, now))
                (chart("CPU", "%", &[("busy", series(|p| p.cpu))], 100.0, start, now))
                (chart("Memory", "%", &[("used", series(|p| p.memory))], 100.0, start, now))
                (chart("Disks", "%", &disks.iter().map(|(m, s)| (m.as_str(), s.clone())).collect::<Vec<_>>(), 100.0, start, now))
                @if !temperature.is_empty() {
                    (chart("Temperature", "°C", &[("hottest", temperature)], hottest, start, now))
                }
            }
            (forecast_list(forecasts))
        }
    }
}

fn x_of(t: OffsetDateTime, start: OffsetDateTime, now: OffsetDateTime) -> f64 {
    let span = (now - start).as_seconds_f64().max(1.0);
    ((t - start).as_seconds_f64() / span * WIDTH).clamp(0.0, WIDTH)
}

fn chart(
    title: &str,
    unit: &str,
    lines: &[(&str, Series)],
    top: f64,
    start: OffsetDateTime,
    now: OffsetDateTime,
) -> Markup {
    let latest: Vec<String> = lines
        .iter()
        .filter_map(|(name, s)| s.last().map(|(_, v)| format!("{name} {v:.0}{unit}")))
        .collect();
    let label = format!("{title} over time; latest: {}", latest.join(", "));
    html! {
        figure class="chart" data-chart=(title.to_lowercase()) {
            figcaption { strong { (title) } " " span class="muted" { (latest.join(" · ")) } }
            svg viewBox={ "0 0 " (WIDTH) " " (HEIGHT) } preserveAspectRatio="none" role="img" aria-label=(label) {
                title { (label) }
                line class="grid" x1="0" x2=(WIDTH) y1=(HEIGHT / 2.0) y2=(HEIGHT / 2.0) {}
                @for (i, (name, s)) in lines.iter().enumerate() {
                    polyline class={ "line l" (i) } data-series=(name)
                        points=(s.iter().map(|(t, v)| format!("{:.1},{:.1}", x_of(*t, start, now), HEIGHT - (v / top).clamp(0.0, 1.0) * HEIGHT)).collect::<Vec<_>>().join(" ")) {}
                }
            }
            @if lines.len() > 1 {
                ul class="legend" {
                    @for (i, (name, _)) in lines.iter().enumerate() {
                        li { span class={ "swatch l" (i) } {} (name) }
                    }
                }
            }
        }
    }
}

fn health_band(timed: &[(OffsetDateTime, &MetricRow)], start: OffsetDateTime, now: OffsetDateTime) -> Markup {
    let name = |h: i64| match h {
        0 => "ok",
        1 => "unknown",
        2 => "warn",
        _ => "crit",
    };
    html! {
        figure class="chart" data-chart="health" {
            figcaption { strong { "Health" } }
            svg viewBox={ "0 0 " (WIDTH) " 14" } preserveAspectRatio="none" role="img" aria-label="Health over time" {
                @for (i, (t, p)) in timed.iter().enumerate() {
                    @if let Some(h) = p.health {
                        @let x = x_of(*t, start, now);
                        @let next = timed.get(i + 1).map_or(x_of(now, start, now), |(n, _)| x_of(*n, start, now));
                        rect class={ "band st-" (name(h)) } x=(format!("{x:.1}")) y="0" height="14"
                            width=(format!("{:.1}", (next - x).max(1.0))) {}
                    }
                }
            }
        }
    }
}

fn forecast_list(forecasts: &[DiskForecast]) -> Markup {
    html! {
        @if !forecasts.is_empty() {
            ul class="forecasts" {
                @for f in forecasts {
                    li data-mount=(f.mount) {
                        strong { (f.mount) } " fills in about " (format!("{:.0}", f.days_to_full.ceil())) " days ("
                        (f.full_at.get(..10).unwrap_or(&f.full_at)) ") at its rate of +" (format!("{:.1}", f.per_day))
                        " points a day; " (format!("{:.0}", f.percent)) "% used now."
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(hours_ago: i64, now: OffsetDateTime, cpu: f64, health: i64) -> MetricRow {
        MetricRow {
            agent_id: "pc-a".into(),
            at: crate::clock::format(now - time::Duration::hours(hours_ago)),
            tier: 0,
            health: Some(health),
            cpu: Some(cpu),
            load: None,
            memory: Some(50.0),
            temperature: None,
            disks: r#"{"/":40,"<b>":60}"#.into(),
        }
    }

    #[test]
    fn charts_are_svg_drawn_here_with_escaped_names() {
        let now = crate::clock::parse("2026-06-10T12:00:00Z").unwrap();
        let points = [point(20, now, 10.0, 0), point(10, now, 90.0, 3), point(0, now, 50.0, 2)];
        let forecast = DiskForecast {
            mount: "/".into(),
            percent: 90.0,
            per_day: 1.0,
            days_to_full: 9.6,
            full_at: "2026-06-20T00:00:00.000Z".into(),
        };
        let html = card("pc-a", range_of(Some("24h")), &points, &[forecast], now).into_string();
        assert!(html.contains("3 points over the last 24 hours"), "{html}");
        assert!(html.contains(r#"data-chart="cpu""#) && html.contains(r#"data-series="busy""#));
        // 20 hours ago is 1/6 of the way along; 10% busy is near the bottom.
        assert!(html.contains(r#"points="100.0,99.0 350.0,11.0 600.0,55.0""#), "{html}");
        assert!(html.contains(r#"class="band st-crit""#));
        assert!(html.contains("&lt;b&gt;") && !html.contains("<b>"), "a mount is text");
        assert!(html.contains("fills in about 10 days (2026-06-20)"));
        assert!(html.contains(r#"href="/hosts/pc-a?range=7d#history""#));
        assert!(!html.contains("Temperature"), "no sensor, no chart");
        let empty = card("pc-a", range_of(Some("nonsense")), &[], &[], now).into_string();
        assert!(empty.contains("No history in the last 24 hours"));
    }
}
