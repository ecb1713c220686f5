//! The etcd store's layout against a real etcd server: documents larger
//! than any one request, a change that writes only what changed, and
//! stores written by the first release (format 1) read and upgraded.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::etcd;

use etcd::Etcd;
use pki_rotate::{File, Files, Store};
use std::sync::{Arc, Mutex};

fn assert_no_garbage(etcd: &Etcd, prefix: &str, key: &str) {
    let (_, unneeded) = etcd::head_files(&etcd.dump(prefix), prefix, key);
    assert!(unneeded.is_empty(), "keys left behind: {unneeded:?}");
}

/// A document of `n` small files and one text of about 2 MB, larger than
/// one etcd request: what a signer with thousands of leaves looks like.
fn many_files(n: usize, state: &str) -> Files {
    let mut f = Files::new();
    for i in 0..n {
        f.insert(
            format!("certs/leaf-{i}/tls.crt"),
            File::public(format!("cert {i}").into_bytes()),
        )
        .unwrap();
    }
    f.insert("pki-state.json", File::public(state.as_bytes().to_vec()))
        .unwrap();
    f
}

#[test]
fn more_files_than_one_head_could_list_and_a_file_larger_than_a_request_round_trip_and_a_change_writes_a_few_keys()
 {
    let etcd = Etcd::start();
    let mut store = etcd.store("many");
    let state: String = (0..40_000)
        .map(|i| format!("{{\"name\":\"svc{i}\",\"dns\":[\"svc{i}.ns.svc\"]}},"))
        .collect();
    assert!(state.len() > pki_etcd::DEFAULT_MAX_REQUEST_BYTES);
    // A format 1 head of these 15,001 files would be over 2 MB.
    let doc = many_files(15_000, &state);
    let r1 = store.put("signer", None, &doc).unwrap();
    assert_eq!(
        store.get("signer").unwrap().unwrap(),
        (doc.clone(), r1.clone())
    );
    let before = etcd.dump("many");
    let head = before.iter().find(|(k, _, _)| k == "many/signer").unwrap();
    assert!(head.1.len() < 200, "the head is {} bytes", head.1.len());

    // One more leaf, and its request in the middle of the state.
    let mut edited = state.clone();
    edited.insert_str(
        state.len() / 2,
        "{\"name\":\"new\",\"dns\":[\"new.ns.svc\"]},",
    );
    let mut changed = many_files(15_000, &edited);
    changed
        .insert("certs/new/tls.crt", File::public(b"cert new".to_vec()))
        .unwrap();
    let puts = Arc::new(Mutex::new(0));
    let count = puts.clone();
    store.set_write_hook(Some(Box::new(move |step| {
        if step.starts_with("write blobs") || step == "commit" {
            *count.lock().unwrap() += 1;
        }
        Ok(())
    })));
    let r2 = store.put("signer", Some(&r1), &changed).unwrap();
    assert_eq!(
        *puts.lock().unwrap(),
        2,
        "one request for the blobs, one commit"
    );
    assert_eq!(store.get("signer").unwrap().unwrap(), (changed, r2));
    let after = etcd.dump("many");
    let new: Vec<&String> = after
        .iter()
        .filter(|a| !before.iter().any(|b| b.0 == a.0 && b.2 == a.2))
        .map(|(k, _, _)| k)
        .collect();
    // The head, two entries, the new file's blob and at most two chunks
    // of the state (the marker of the attempt is gone).
    assert!(new.len() <= 6, "{new:?}");
    assert_no_garbage(&etcd, "many", "signer");
}

#[test]
fn a_store_of_the_first_release_is_read_and_the_next_write_upgrades_it() {
    let etcd = Etcd::start();
    let endpoint = etcd.endpoint();
    // Format 1, as the first release wrote it: the manifest in the head.
    let sha = |b: &[u8]| {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(b))
    };
    etcd::put_raw(&endpoint, "old/signer/.blobs/00aa-0", b"CERT");
    etcd::put_raw(&endpoint, "old/signer/.blobs/00aa-1", b"KEY");
    let head = format!(
        r#"{{"format":1,"files":{{"signer/tls.crt":{{"sha256":"{}","blob":"00aa-0","secret":false}},"signer/tls.key":{{"sha256":"{}","blob":"00aa-1","secret":true}}}},"dirs":["certs"]}}"#,
        sha(b"CERT"),
        sha(b"KEY")
    );
    etcd::put_raw(&endpoint, "old/signer", head.as_bytes());
    let store = etcd.store("old");
    let (files, r1) = store.get("signer").unwrap().unwrap();
    assert_eq!(files.get("signer/tls.crt").unwrap(), b"CERT");
    assert!(files.file("signer/tls.key").unwrap().secret);
    assert_eq!(files.dirs().collect::<Vec<_>>(), ["certs"]);

    let mut changed = files.clone();
    changed
        .insert("signer/tls.crt", File::public(b"CERT 2".to_vec()))
        .unwrap();
    let r2 = store.put("signer", Some(&r1), &changed).unwrap();
    assert_eq!(store.get("signer").unwrap().unwrap(), (changed, r2));
    let dump = etcd.dump("old");
    let head = &dump.iter().find(|(k, _, _)| k == "old/signer").unwrap().1;
    let head: serde_json::Value = serde_json::from_slice(head).unwrap();
    assert_eq!(head["format"], 2);
    assert!(
        dump.iter().all(|(k, _, _)| !k.contains("00aa-")),
        "format 1 blobs left"
    );
    assert_no_garbage(&etcd, "old", "signer");
}
