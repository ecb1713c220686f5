//! `pki plan --svg` and `pki status --svg`: the picture is well-formed SVG,
//! carries each event of `pki plan --json` at its time, draws a plan that
//! breaks trust in red and the store's CAs as lanes; stdout and exit codes
//! are those without --svg; a path that cannot take the file is refused.
//! `pki demo --svg` draws its store as `pki status --svg` does.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::Path;

use support::cli::{exited_with, ok, pki, stdout};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

const SVG_NS: &str = "http://www.w3.org/2000/svg";
const RED: &str = "#d62728";
// 2026-01-01: when every test store is made.
const T0: &str = "2026-01-01T00:00:00Z";

fn time(s: &str) -> OffsetDateTime {
    OffsetDateTime::parse(s, &Rfc3339).unwrap()
}

/// A store made at T0 with `web` issued for 365 days.
fn store(tmp: &Path) -> String {
    let dir = tmp.join("pki").display().to_string();
    ok(&["init", &dir, "--now", T0]);
    ok(&[
        "issue",
        &dir,
        "web",
        "--dns",
        "web.ns.svc",
        "--lifetime",
        "365d",
        "--now",
        T0,
    ]);
    dir
}

/// Runs `args` with and without `--svg FILE`: the same exit code and
/// stdout. Returns the picture and stdout.
fn with_svg(args: &[&str], file: &Path, code: i32) -> (String, String) {
    let plain = pki(args);
    exited_with(code, args, &plain);
    let mut svg_args = args.to_vec();
    let file_arg = file.display().to_string();
    svg_args.extend(["--svg", &file_arg]);
    let drawn = pki(&svg_args);
    exited_with(code, &svg_args, &drawn);
    assert_eq!(stdout(&drawn), stdout(&plain), "--svg changed stdout");
    (std::fs::read_to_string(file).unwrap(), stdout(&plain))
}

/// Parses `svg`, checking it is an SVG document with a viewBox.
fn parse(svg: &str) -> roxmltree::Document<'_> {
    let doc = roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("not XML: {e}\n{svg}"));
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    assert_eq!(root.tag_name().namespace(), Some(SVG_NS));
    let view_box: Vec<f64> = root
        .attribute("viewBox")
        .expect("a viewBox")
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    assert!(view_box.len() == 4 && view_box[2] > 0.0 && view_box[3] > 0.0);
    doc
}

/// The (kind, time) of every element with `class` `class`, sorted.
fn marked(doc: &roxmltree::Document<'_>, class: &str) -> Vec<(String, OffsetDateTime)> {
    let mut all: Vec<_> = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some(class))
        .map(|n| {
            (
                n.attribute("data-kind").unwrap().to_string(),
                time(n.attribute("data-at").unwrap()),
            )
        })
        .collect();
    all.sort();
    all
}

fn json_events(plan: &serde_json::Value) -> Vec<(String, OffsetDateTime)> {
    let mut all: Vec<_> = plan["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["kind"].as_str().unwrap().to_string(),
                time(e["at"].as_str().unwrap()),
            )
        })
        .collect();
    all.sort();
    all
}

fn bars<'a>(doc: &'a roxmltree::Document<'a>, kind: &str) -> Vec<roxmltree::Node<'a, 'a>> {
    doc.descendants()
        .filter(|n| n.attribute("class") == Some("bar") && n.attribute("data-kind") == Some(kind))
        .collect()
}

#[test]
fn the_plan_picture_shows_each_event_of_the_json_plan_at_its_time() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = store(tmp.path());
    let file = tmp.path().join("plan.svg");
    let args = ["plan", &dir, "--until", "800d", "--now", T0];
    let (svg, _) = with_svg(&args, &file, 0);
    let doc = parse(&svg);
    let json: serde_json::Value =
        serde_json::from_str(&ok(&[&args[..], &["--json"]].concat())).unwrap();
    let events = json_events(&json);
    assert!(
        events.iter().any(|(k, _)| k == "rotation"),
        "no rotation in the window: {events:?}"
    );
    assert_eq!(marked(&doc, "event"), events);

    // A lane per CA: the first, and one per rotation, each current in turn.
    let rotations = events.iter().filter(|(k, _)| k == "rotation").count();
    let lanes = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("lane"))
        .count();
    assert_eq!(lanes, 1 + rotations);
    assert_eq!(bars(&doc, "ca-current").len(), 1 + rotations);
    assert_eq!(bars(&doc, "ca-trusted").len(), rotations);
    assert!(!bars(&doc, "bridge").is_empty());
    // Every check listed, none in red.
    for c in json["checks"].as_array().unwrap() {
        let name = c["name"].as_str().unwrap();
        let drawn = doc
            .descendants()
            .find(|n| n.attribute("data-check") == Some(name))
            .unwrap_or_else(|| panic!("{name} not drawn"));
        assert_eq!(drawn.attribute("data-ok"), Some("true"));
    }
    let red = doc
        .descendants()
        .filter(|n| {
            n.attribute("class")
                .is_some_and(|c| c.split(' ').any(|w| w == "fail"))
        })
        .count();
    assert_eq!(red, 0, "a plan that passes has nothing in red");
    assert_eq!(marked(&doc, "now"), [("now".to_string(), time(T0))]);
    assert_eq!(
        doc.root_element().attribute("data-from").map(time),
        Some(time(T0))
    );
}

#[test]
fn a_plan_that_breaks_trust_draws_its_failing_checks_in_red() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = store(tmp.path());
    // An emergency rotation whose previous CA stays trusted 2 days, far
    // less than the reload interval (M: none was set).
    let t1 = "2026-03-01T00:00:00Z";
    ok(&[
        "rotate", &dir, "--force", "leak", "--grace", "2d", "--now", t1,
    ]);
    let file = tmp.path().join("plan.svg");
    let args = ["plan", &dir, "--until", "800d", "--now", t1];
    let (svg, _) = with_svg(&args, &file, 1);
    let doc = parse(&svg);
    let json: serde_json::Value =
        serde_json::from_str(&stdout(&pki(&[&args[..], &["--json"]].concat()))).unwrap();
    assert_eq!(marked(&doc, "event"), json_events(&json));
    let failed: Vec<&str> = json["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["ok"] == false)
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert!(
        failed.contains(&"trust-overlap-covers-reload-interval"),
        "{failed:?}"
    );
    for name in &failed {
        // Listed in red under the chart.
        let listed = doc
            .descendants()
            .find(|n| {
                n.attribute("class") == Some("check fail")
                    && n.attribute("data-check") == Some(name)
            })
            .unwrap_or_else(|| panic!("{name} not listed as failing"));
        assert_eq!(listed.attribute("fill"), Some(RED));
        assert_eq!(listed.attribute("data-ok"), Some("false"));
    }
    // The trust break drawn across the chart: red, labelled, from the
    // moment the previous CA stops being trusted.
    let untrusted = json_events(&json)
        .into_iter()
        .find(|(k, _)| k == "previous-ca-untrusted")
        .unwrap()
        .1;
    let cell = doc
        .descendants()
        .find(|n| {
            n.attribute("class") == Some("fail")
                && n.attribute("data-check") == Some("trust-overlap-covers-reload-interval")
        })
        .expect("a red cell for the trust break");
    assert_eq!(cell.attribute("data-from").map(time), Some(untrusted));
    assert!(time(cell.attribute("data-until").unwrap()) > untrusted);
    assert!(
        cell.descendants()
            .any(|n| n.tag_name().name() == "rect" && n.attribute("fill") == Some(RED))
    );
    assert!(cell.descendants().any(|n| n.tag_name().name() == "text"
        && n.text() == Some("trust-overlap-covers-reload-interval")));
}

#[test]
fn the_status_picture_shows_the_current_ca_the_previous_one_and_the_leaves() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = store(tmp.path());
    let t1 = "2026-03-01T00:00:00Z";
    let file = tmp.path().join("status.svg");
    let (svg, _) = with_svg(&["status", &dir, "--now", t1], &file, 0);
    let doc = parse(&svg);
    let status: serde_json::Value =
        serde_json::from_str(&ok(&["status", &dir, "--json", "--now", t1])).unwrap();
    let label = format!("CA {}", status["ca"]["id"].as_str().unwrap());
    let lane = doc
        .descendants()
        .find(|n| n.attribute("class") == Some("lane") && n.attribute("data-label") == Some(&label))
        .unwrap_or_else(|| panic!("no lane {label}"));
    let validity = lane
        .descendants()
        .find(|n| n.attribute("data-kind") == Some("ca-validity"))
        .unwrap();
    assert_eq!(
        validity.attribute("data-from").map(time),
        Some(time(status["ca"]["not_before"].as_str().unwrap()))
    );
    assert_eq!(
        validity.attribute("data-until").map(time),
        Some(time(status["ca"]["not_after"].as_str().unwrap()))
    );
    let due = time(status["rotation_due_at"].as_str().unwrap());
    let events = marked(&doc, "event");
    assert!(
        events.contains(&("rotation-due".to_string(), due)),
        "{events:?}"
    );
    assert!(
        events.iter().any(|(k, _)| k == "leaf-refresh"),
        "{events:?}"
    );
    assert_eq!(marked(&doc, "now"), [("now".to_string(), time(t1))]);

    // After an emergency rotation: the previous CA's lane and its trust
    // end; --check's exit code is unchanged, and answered from the store's
    // summary (the same stdout), the picture still reads the whole store.
    ok(&[
        "rotate", &dir, "--force", "leak", "--grace", "2d", "--now", t1,
    ]);
    let t2 = "2026-03-02T00:00:00Z";
    let code = pki(&["status", &dir, "--check", "--now", t2])
        .status
        .code()
        .unwrap();
    let (svg, _) = with_svg(&["status", &dir, "--check", "--now", t2], &file, code);
    let doc = parse(&svg);
    assert_eq!(bars(&doc, "ca-trusted").len(), 1);
    assert_eq!(bars(&doc, "bridge").len(), 1);
    let events = marked(&doc, "event");
    assert!(
        events.contains(&(
            "previous-ca-untrusted".to_string(),
            time("2026-03-03T00:00:01Z")
        )),
        "{events:?}"
    );
    assert!(
        events.contains(&("rotation".to_string(), time(t1))),
        "{events:?}"
    );

    // Long after the CA's end, nothing rotated: broken, in red from then.
    let late = "2029-01-01T00:00:00Z";
    let status: serde_json::Value =
        serde_json::from_str(&ok(&["status", &dir, "--json", "--now", late])).unwrap();
    let (svg, _) = with_svg(&["status", &dir, "--now", late], &file, 0);
    let doc = parse(&svg);
    let broken = doc
        .descendants()
        .find(|n| {
            n.attribute("class") == Some("fail") && n.attribute("data-check") == Some("health")
        })
        .expect("broken health in red");
    let ca_end = time(status["ca"]["not_after"].as_str().unwrap());
    assert_eq!(
        broken.attribute("data-from").map(time),
        Some(ca_end + time::Duration::SECOND)
    );
    assert_eq!(broken.attribute("data-until").map(time), Some(time(late)));
    let listed = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("check fail") && n.attribute("fill") == Some(RED))
        .count();
    assert_eq!(listed, 1 + status["problems"].as_array().unwrap().len());
}

#[test]
fn a_path_that_cannot_take_the_picture_is_refused_in_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = store(tmp.path());
    let a_dir = tmp.path().display().to_string();
    let missing = tmp.path().join("no/such/dir/t.svg").display().to_string();
    for (svg, says) in [(&a_dir, "is a directory"), (&missing, "t.svg")] {
        for args in [
            vec!["plan", &dir, "--until", "30d", "--now", T0, "--svg", svg],
            vec!["status", &dir, "--now", T0, "--svg", svg],
            vec!["demo", "--now", T0, "--svg", svg],
        ] {
            let out = pki(&args);
            let err = exited_with(1, &args, &out);
            assert_eq!(err.trim_end().lines().count(), 1, "{err}");
            assert!(err.contains(says) && err.contains("--svg"), "{err}");
            assert_eq!(stdout(&out), "", "printed before refusing: {args:?}");
        }
    }
    assert!(!Path::new(&missing).exists());
}

/// `pki demo --svg`: the demo store after both rotations, exactly as
/// `pki status --svg` draws it at the demo's last moment (two CA lanes:
/// the previous one trusted for its grace, the current with its bridge).
/// `pki demo set` has no picture: refused, nothing drawn.
#[test]
fn the_demo_draws_its_store_as_status_does() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo").display().to_string();
    let file = tmp.path().join("demo.svg");
    let file_arg = file.display().to_string();
    let out = ok(&["demo", "--now", T0, "--dir", &dir, "--svg", &file_arg]);
    assert!(out.contains("done: trust held"), "{out}");
    let svg = std::fs::read_to_string(&file).unwrap();
    let doc = parse(&svg);
    let lanes = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("lane"))
        .filter_map(|n| n.attribute("data-label"))
        .filter(|label| label.contains("CA "))
        .count();
    assert_eq!(lanes, 2, "{svg}");
    assert_eq!(bars(&doc, "ca-trusted").len(), 1);
    assert_eq!(bars(&doc, "bridge").len(), 1);
    let [(_, now)] = marked(&doc, "now")[..] else {
        panic!("one now marker: {svg}")
    };
    let status_file = tmp.path().join("status.svg");
    let now = now.format(&Rfc3339).unwrap();
    let (drawn, _) = with_svg(&["status", &dir, "--now", &now], &status_file, 0);
    assert_eq!(drawn, svg, "the demo's picture is not status's");

    let set_file = tmp.path().join("set.svg").display().to_string();
    let args = ["demo", "set", "--now", T0, "--svg", &set_file];
    let refused = pki(&args);
    let err = exited_with(1, &args, &refused);
    assert!(err.contains("--svg"), "{err}");
    assert_eq!(stdout(&refused), "");
    assert!(!Path::new(&set_file).exists());
}
