//! [`render`]: a [`Timeline`] as SVG text, by plain string building (the
//! picture is a few kinds of rectangles, lines and texts).

use super::{Bar, BarKind, CheckMark, Lane, Marker, Timeline};
use pki_core::datetime::rfc3339;
use std::fmt::Write;
use time::OffsetDateTime;

/// The whole picture's width, and the column of lane labels left of the chart.
const WIDTH: f64 = 1200.0;
const LABEL_WIDTH: f64 = 340.0;
const RIGHT_MARGIN: f64 = 30.0;
/// Where the time axis' labels sit, and where the first lane starts.
const AXIS_Y: f64 = 70.0;
const LANES_Y: f64 = 84.0;
const LANE_HEIGHT: f64 = 30.0;
const ROW_HEIGHT: f64 = 24.0;
const CHECK_HEIGHT: f64 = 18.0;
const RED_LABEL_HEIGHT: f64 = 13.0;
/// Longest label and check detail drawn; the whole text is the tooltip.
const LABEL_CHARS: usize = 48;
const DETAIL_CHARS: usize = 170;

const RED: &str = "#d62728";
const GREEN: &str = "#2a7d2a";

/// The kinds of events in the order of their rows; a kind not listed comes
/// after them, in the order it first appears.
const KIND_ORDER: [&str; 10] = [
    "rotation",
    "rotation-due",
    "bridge-expiry",
    "previous-ca-untrusted",
    "ca-expiry",
    "bundle-prune",
    "leaf-refresh",
    "key-rotation",
    "key-removal",
    "next-check",
];

/// The timeline as a self-contained SVG document.
pub fn render(t: &Timeline) -> String {
    let scale = Scale::new(t.from, t.until);
    let rows = event_rows(&t.events);
    let chart_bottom =
        LANES_Y + LANE_HEIGHT * t.lanes.len() as f64 + ROW_HEIGHT * rows.len() as f64;
    // Each failing span's name goes on a line of its own under the chart.
    let red_labels: usize = t
        .checks
        .iter()
        .filter(|c| !c.ok)
        .map(|c| c.spans.len())
        .sum();
    let legend_y = chart_bottom + 38.0 + RED_LABEL_HEIGHT * red_labels as f64;
    let checks_y = legend_y + 26.0;
    let height = checks_y + CHECK_HEIGHT * t.checks.len() as f64 + 40.0;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" \
         viewBox=\"0 0 {WIDTH} {height}\" font-family=\"sans-serif\" font-size=\"11\" \
         data-from=\"{}\" data-until=\"{}\" data-now=\"{}\">",
        rfc3339(t.from),
        rfc3339(t.until),
        rfc3339(t.now)
    );
    let _ = writeln!(out, "<title>{}</title>", escape(&t.title));
    let _ = writeln!(
        out,
        "<rect x=\"0\" y=\"0\" width=\"{WIDTH}\" height=\"{height}\" fill=\"#ffffff\"/>"
    );
    let _ = writeln!(
        out,
        "<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">{}</text>\n\
         <text x=\"10\" y=\"40\" fill=\"#555555\">from {} until {}</text>",
        escape(&t.title),
        rfc3339(t.from),
        rfc3339(t.until)
    );
    axis(&mut out, &scale, (t.from, t.until), chart_bottom);
    for (i, lane) in t.lanes.iter().enumerate() {
        draw_lane(&mut out, &scale, lane, LANES_Y + LANE_HEIGHT * i as f64);
    }
    let rows_y = LANES_Y + LANE_HEIGHT * t.lanes.len() as f64;
    for (i, (kind, markers)) in rows.iter().enumerate() {
        let y = rows_y + ROW_HEIGHT * i as f64;
        label(&mut out, kind, y + ROW_HEIGHT / 2.0 + 4.0);
        for m in markers {
            marker(
                &mut out,
                &scale,
                m,
                y + 4.0,
                y + ROW_HEIGHT - 4.0,
                chart_bottom,
            );
        }
    }
    now_line(&mut out, &scale, t.now, chart_bottom);
    breaks(&mut out, &scale, &t.checks, chart_bottom);
    legend(&mut out, legend_y);
    draw_checks(&mut out, &t.checks, checks_y);
    out.push_str("</svg>\n");
    out
}

/// Maps instants to x coordinates of the chart.
pub(super) struct Scale {
    from: OffsetDateTime,
    seconds: f64,
}

impl Scale {
    pub(super) fn new(from: OffsetDateTime, until: OffsetDateTime) -> Self {
        // A window of no length (or a reversed one) still draws: as one second.
        let seconds = (until - from).as_seconds_f64().max(1.0);
        Scale { from, seconds }
    }

    /// The x of `t`, held to the chart's edges.
    pub(super) fn x(&self, t: OffsetDateTime) -> f64 {
        let share = ((t - self.from).as_seconds_f64() / self.seconds).clamp(0.0, 1.0);
        LABEL_WIDTH + share * (WIDTH - LABEL_WIDTH - RIGHT_MARGIN)
    }
}

/// The events grouped by kind, in [`KIND_ORDER`].
fn event_rows(events: &[Marker]) -> Vec<(String, Vec<&Marker>)> {
    let mut rows: Vec<(String, Vec<&Marker>)> = Vec::new();
    for e in events {
        match rows.iter_mut().find(|(k, _)| *k == e.kind) {
            Some((_, list)) => list.push(e),
            None => rows.push((e.kind.clone(), vec![e])),
        }
    }
    let rank = |k: &str| {
        KIND_ORDER
            .iter()
            .position(|o| *o == k)
            .unwrap_or(KIND_ORDER.len())
    };
    rows.sort_by_key(|(k, _)| rank(k));
    rows
}

/// Dated ticks along the top, their lines down through the chart.
fn axis(out: &mut String, scale: &Scale, window: (OffsetDateTime, OffsetDateTime), bottom: f64) {
    out.push_str("<g class=\"axis\">\n");
    for (at, text) in super::ticks::ticks(window.0, window.1) {
        let x = scale.x(at);
        let _ = writeln!(
            out,
            "<g class=\"tick\" data-at=\"{}\"><line x1=\"{x:.1}\" y1=\"{}\" x2=\"{x:.1}\" \
             y2=\"{bottom}\" stroke=\"#dddddd\"/><text x=\"{x:.1}\" y=\"{AXIS_Y}\" \
             text-anchor=\"middle\" fill=\"#444444\">{}</text></g>",
            rfc3339(at),
            AXIS_Y + 4.0,
            escape(&text)
        );
    }
    out.push_str("</g>\n");
}

/// A row's label in the left column, cut to fit, whole in its tooltip.
fn label(out: &mut String, text: &str, y: f64) {
    let _ = writeln!(
        out,
        "<text class=\"label\" x=\"10\" y=\"{y}\"><title>{}</title>{}</text>",
        escape(text),
        escape(&shorten(text, LABEL_CHARS))
    );
}

fn draw_lane(out: &mut String, scale: &Scale, lane: &Lane, y: f64) {
    let _ = writeln!(
        out,
        "<g class=\"lane\" data-label=\"{}\">",
        escape(&lane.label)
    );
    label(out, &lane.label, y + LANE_HEIGHT / 2.0 + 4.0);
    for bar in &lane.bars {
        draw_bar(out, scale, bar, y);
    }
    for m in &lane.markers {
        marker(
            out,
            scale,
            m,
            y + 3.0,
            y + LANE_HEIGHT - 3.0,
            y + LANE_HEIGHT,
        );
    }
    out.push_str("</g>\n");
}

/// One span; its style says what it is, its tooltip says when.
fn draw_bar(out: &mut String, scale: &Scale, bar: &Bar, lane_y: f64) {
    let (top, height, style) = match bar.kind {
        BarKind::Validity => (5.0, 20.0, "fill=\"none\" stroke=\"#888888\""),
        BarKind::Current => (8.0, 14.0, "fill=\"#1f77b4\""),
        BarKind::Trusted => (
            8.0,
            14.0,
            "fill=\"#aec7e8\" stroke=\"#1f77b4\" stroke-dasharray=\"4 2\"",
        ),
        BarKind::Bridge => (23.0, 5.0, "fill=\"#ff7f0e\""),
        BarKind::Leaf => (8.0, 14.0, "fill=\"#98df8a\" stroke=\"#2ca02c\""),
    };
    let (x1, x2) = (scale.x(bar.start), scale.x(bar.end));
    let _ = writeln!(
        out,
        "<rect class=\"bar\" data-kind=\"{}\" data-from=\"{}\" data-until=\"{}\" x=\"{x1:.1}\" \
         y=\"{}\" width=\"{:.1}\" height=\"{height}\" {style}><title>{} {} to {}</title></rect>",
        bar.kind.as_str(),
        rfc3339(bar.start),
        rfc3339(bar.end),
        lane_y + top,
        (x2 - x1).max(1.0),
        bar.kind.as_str(),
        rfc3339(bar.start),
        rfc3339(bar.end)
    );
}

/// One event: a tick and a dot, its detail as the tooltip. A rotation
/// also draws a faint line from the top of the chart to `guide_bottom`.
fn marker(out: &mut String, scale: &Scale, m: &Marker, y1: f64, y2: f64, guide_bottom: f64) {
    let x = scale.x(m.at);
    let colour = match m.kind.as_str() {
        "rotation" | "key-rotation" => "#1f77b4",
        "previous-ca-untrusted" | "bridge-expiry" | "key-removal" => "#ff7f0e",
        "ca-expiry" => RED,
        "leaf-refresh" => "#2ca02c",
        _ => "#555555",
    };
    let _ = write!(
        out,
        "<g class=\"event\" data-kind=\"{}\" data-at=\"{}\"><title>{} {}: {}</title>",
        escape(&m.kind),
        rfc3339(m.at),
        rfc3339(m.at),
        escape(&m.kind),
        escape(&m.detail)
    );
    if m.kind == "rotation" {
        let _ = write!(
            out,
            "<line x1=\"{x:.1}\" y1=\"{LANES_Y}\" x2=\"{x:.1}\" y2=\"{guide_bottom}\" \
             stroke=\"{colour}\" stroke-opacity=\"0.35\" stroke-dasharray=\"3 3\"/>"
        );
    }
    let _ = writeln!(
        out,
        "<line x1=\"{x:.1}\" y1=\"{y1}\" x2=\"{x:.1}\" y2=\"{y2}\" stroke=\"{colour}\" \
         stroke-width=\"1.5\"/><circle cx=\"{x:.1}\" cy=\"{:.1}\" r=\"3.5\" fill=\"{colour}\"/></g>",
        (y1 + y2) / 2.0
    );
}

fn now_line(out: &mut String, scale: &Scale, now: OffsetDateTime, bottom: f64) {
    let x = scale.x(now);
    let _ = writeln!(
        out,
        "<g class=\"now\" data-kind=\"now\" data-at=\"{}\"><line x1=\"{x:.1}\" y1=\"{}\" \
         x2=\"{x:.1}\" y2=\"{bottom}\" stroke=\"#000000\" stroke-width=\"1.5\"/>\
         <text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\" font-weight=\"bold\">now</text></g>",
        rfc3339(now),
        LANES_Y - 2.0,
        LANES_Y - 2.0
    );
}

/// Each failing check's spans, in red across the chart, with its name
/// under it (a line each, so names at one time do not overlap).
fn breaks(out: &mut String, scale: &Scale, checks: &[CheckMark], bottom: f64) {
    let spans = checks
        .iter()
        .filter(|c| !c.ok)
        .flat_map(|c| c.spans.iter().map(move |span| (c, span)));
    for (line, (c, (start, end))) in spans.enumerate() {
        let (x1, x2) = (scale.x(*start), scale.x(*end));
        // Right of the middle, the name ends at the span: it stays in the picture.
        let (text_x, anchor) = if x1 > (LABEL_WIDTH + WIDTH) / 2.0 {
            (x2, "end")
        } else {
            (x1, "start")
        };
        let _ = writeln!(
            out,
            "<g class=\"fail\" data-check=\"{name}\" data-from=\"{}\" data-until=\"{}\">\
             <title>{name}: {}</title><rect x=\"{x1:.1}\" y=\"{LANES_Y}\" width=\"{:.1}\" \
             height=\"{:.1}\" fill=\"{RED}\" fill-opacity=\"0.3\" stroke=\"{RED}\"/>\
             <text x=\"{text_x:.1}\" y=\"{:.1}\" text-anchor=\"{anchor}\" fill=\"{RED}\" \
             font-weight=\"bold\">{name}</text></g>",
            rfc3339(*start),
            rfc3339(*end),
            escape(&c.detail),
            (x2 - x1).max(2.0),
            (bottom - LANES_Y).max(1.0),
            bottom + 12.0 + RED_LABEL_HEIGHT * line as f64,
            name = escape(&c.name),
        );
    }
}

fn legend(out: &mut String, y: f64) {
    let items = [
        ("fill=\"none\" stroke=\"#888888\"", "validity"),
        ("fill=\"#1f77b4\"", "current CA"),
        (
            "fill=\"#aec7e8\" stroke=\"#1f77b4\" stroke-dasharray=\"4 2\"",
            "trusted after rotation",
        ),
        ("fill=\"#ff7f0e\"", "bridge B"),
        ("fill=\"#98df8a\" stroke=\"#2ca02c\"", "leaf"),
        (
            "fill=\"#d62728\" fill-opacity=\"0.3\" stroke=\"#d62728\"",
            "check fails",
        ),
    ];
    out.push_str("<g class=\"legend\">\n");
    for (i, (style, text)) in items.iter().enumerate() {
        let x = 10.0 + 165.0 * i as f64;
        let _ = writeln!(
            out,
            "<rect x=\"{x}\" y=\"{}\" width=\"18\" height=\"10\" {style}/>\
             <text x=\"{}\" y=\"{y}\">{text}</text>",
            y - 9.0,
            x + 24.0
        );
    }
    out.push_str("</g>\n");
}

/// One line per check: `ok` in green, `FAIL` in red.
fn draw_checks(out: &mut String, checks: &[CheckMark], y: f64) {
    for (i, c) in checks.iter().enumerate() {
        let (mark, colour, class) = if c.ok {
            ("ok", GREEN, "check")
        } else {
            ("FAIL", RED, "check fail")
        };
        let _ = writeln!(
            out,
            "<text class=\"{class}\" data-check=\"{name}\" data-ok=\"{}\" x=\"10\" y=\"{:.1}\" \
             fill=\"{colour}\"><title>{name}: {}</title>{mark} {name}: {}</text>",
            c.ok,
            y + CHECK_HEIGHT * i as f64,
            escape(&c.detail),
            escape(&shorten(&c.detail, DETAIL_CHARS)),
            name = escape(&c.name),
        );
    }
}

/// `text` cut to `max` characters, an ellipsis marking the cut.
fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let mut s: String = text.chars().take(max.saturating_sub(1)).collect();
        s.push('…');
        s
    }
}

/// `text` safe in XML content and attribute values: the five markup
/// characters as entities, and characters XML 1.0 cannot hold (control
/// characters, U+FFFE, U+FFFF) as U+FFFD.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if c < ' ' || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}
