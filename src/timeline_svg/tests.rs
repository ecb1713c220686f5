//! The renderer on odd inputs: nothing to draw, one event, text that needs
//! escaping, windows of no length and at the ends of time; any text and
//! times give well-formed SVG that carries every event.

use super::draw::escape;
use super::*;
use proptest::prelude::*;
use time::macros::datetime;

const SVG_NS: &str = "http://www.w3.org/2000/svg";

fn empty(from: OffsetDateTime, until: OffsetDateTime) -> Timeline {
    Timeline {
        title: "t".into(),
        from,
        until,
        now: from,
        lanes: Vec::new(),
        events: Vec::new(),
        checks: Vec::new(),
    }
}

/// Parses `svg`, checks its root, and returns the (kind, at) of its events.
fn events_of(svg: &str) -> Vec<(String, String)> {
    let doc = roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("{e}\n{svg}"));
    let root = doc.root_element();
    assert_eq!(root.tag_name().namespace(), Some(SVG_NS));
    assert_eq!(root.tag_name().name(), "svg");
    assert!(root.attribute("viewBox").is_some());
    doc.descendants()
        .filter(|n| n.attribute("class") == Some("event"))
        .map(|n| {
            (
                n.attribute("data-kind").unwrap().to_string(),
                n.attribute("data-at").unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn nothing_to_draw_is_still_a_picture() {
    let t = empty(
        datetime!(2026-01-01 0:00 UTC),
        datetime!(2028-03-11 0:00 UTC),
    );
    let svg = render(&t);
    assert!(events_of(&svg).is_empty());
    // The axis has dated ticks inside the window.
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let ticks: Vec<_> = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("tick"))
        .map(|n| n.attribute("data-at").unwrap().to_string())
        .collect();
    assert!(ticks.len() >= 3 && ticks.len() <= 21, "{ticks:?}");
    assert!(
        ticks
            .iter()
            .all(|t| t.as_str() >= "2026-01-01" && t.as_str() <= "2028-03-11")
    );
}

#[test]
fn one_event_is_one_element_at_its_time() {
    let mut t = empty(
        datetime!(2026-01-01 0:00 UTC),
        datetime!(2026-01-02 0:00 UTC),
    );
    t.events.push(Marker {
        kind: "rotation".into(),
        at: datetime!(2026-01-01 13:00 UTC),
        detail: "d".into(),
    });
    assert_eq!(
        events_of(&render(&t)),
        [("rotation".to_string(), "2026-01-01T13:00:00Z".to_string())]
    );
}

#[test]
fn text_that_needs_escaping_comes_back_as_it_was() {
    let odd = "a<b>&\"c\" 'd' ]]> <!-- \u{1}\u{FFFF}";
    let mut t = empty(
        datetime!(2026-01-01 0:00 UTC),
        datetime!(2027-01-01 0:00 UTC),
    );
    t.title = odd.into();
    t.lanes.push(Lane {
        label: odd.into(),
        bars: Vec::new(),
        markers: vec![Marker {
            kind: odd.into(),
            at: datetime!(2026-06-01 0:00 UTC),
            detail: odd.into(),
        }],
    });
    t.checks.push(CheckMark {
        name: odd.into(),
        ok: false,
        detail: odd.into(),
        spans: vec![(t.from, t.until)],
    });
    let svg = render(&t);
    assert_eq!(events_of(&svg).len(), 1);
    let doc = roxmltree::Document::parse(&svg).unwrap();
    // What XML cannot hold becomes U+FFFD; the rest is kept.
    let kept = "a<b>&\"c\" 'd' ]]> <!-- \u{FFFD}\u{FFFD}";
    let lane = doc
        .descendants()
        .find(|n| n.attribute("class") == Some("lane"))
        .unwrap();
    assert_eq!(lane.attribute("data-label"), Some(kept));
    let fail = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("fail"))
        .count();
    assert_eq!(fail, 1);
    assert_eq!(escape("<&>"), "&lt;&amp;&gt;");
}

#[test]
fn windows_of_no_length_reversed_or_at_the_ends_of_time_draw() {
    let far = [
        (
            datetime!(2026-01-01 0:00 UTC),
            datetime!(2026-01-01 0:00 UTC),
        ),
        (
            datetime!(2027-01-01 0:00 UTC),
            datetime!(2026-01-01 0:00 UTC),
        ),
        (
            datetime!(-9999-01-01 0:00 UTC),
            datetime!(9999-12-31 23:59:59 UTC),
        ),
        (
            datetime!(2026-01-01 0:00 UTC),
            datetime!(2026-01-01 0:00:05 UTC),
        ),
    ];
    for (from, until) in far {
        let mut t = empty(from, until);
        t.lanes.push(Lane {
            label: "CA".into(),
            bars: vec![Bar {
                kind: BarKind::Validity,
                start: from,
                end: datetime!(9999-12-31 23:59:59 UTC),
            }],
            markers: Vec::new(),
        });
        t.events.push(Marker {
            kind: "ca-expiry".into(),
            at: until,
            detail: String::new(),
        });
        assert_eq!(events_of(&render(&t)).len(), 1, "{from} {until}");
    }
}

#[test]
fn refusing_a_directory_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let err = check_path(dir.path()).unwrap_err();
    assert!(err.message.contains("is a directory"), "{}", err.message);
    let file = dir.path().join("t.svg");
    write(&file, "<svg/>").unwrap();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "<svg/>");
}

fn instant() -> impl Strategy<Value = OffsetDateTime> {
    // From 1950 to 2200.
    (-631_152_000i64..7_258_118_400)
        .prop_map(|s| OffsetDateTime::from_unix_timestamp(s).unwrap_or(OffsetDateTime::UNIX_EPOCH))
}

proptest! {
    #[test]
    fn any_text_and_times_give_well_formed_svg_with_every_event(
        from in instant(),
        until in instant(),
        label in any::<String>(),
        events in proptest::collection::vec((any::<String>(), instant(), any::<String>()), 0..8),
        failing in any::<bool>(),
    ) {
        let mut t = empty(from, until);
        t.lanes.push(Lane {
            label: label.clone(),
            bars: vec![Bar { kind: BarKind::Current, start: from, end: until }],
            markers: Vec::new(),
        });
        t.events = events
            .iter()
            .map(|(kind, at, detail)| Marker { kind: kind.clone(), at: *at, detail: detail.clone() })
            .collect();
        t.checks.push(CheckMark {
            name: label,
            ok: !failing,
            detail: String::new(),
            spans: vec![(from, until)],
        });
        let svg = render(&t);
        let drawn = events_of(&svg);
        prop_assert_eq!(drawn.len(), events.len());
        // Rows group events by kind: each event's time is among those drawn.
        for (_, at, _) in &events {
            let at = pki_core::datetime::rfc3339(*at);
            prop_assert!(drawn.iter().any(|(_, a)| *a == at));
        }
    }
}
