//! What a `kube://` store reads: store URLs and, from Secrets a writer of
//! the namespace may have changed, a head's `head.json` and the shards of
//! a document's files.
//!
//! The first byte chooses: a URL (text), a head, or shards (the rest cut
//! at each `0xff` into index, data, index, data…). Checks: no panic; a
//! refusal is one line; an accepted URL writes a form that reads back to
//! the same value; shards that read as files are packed again into shards
//! that read as the same files.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pki_kube::KubeUrl;
use pki_kube::fuzzing::{head, pack, unpack};

fn one_line(message: &str) {
    assert!(!message.is_empty() && !message.contains('\n'), "{message}");
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    match which % 3 {
        0 => {
            let Ok(text) = std::str::from_utf8(rest) else {
                return;
            };
            match KubeUrl::parse(text) {
                Ok(url) => {
                    let written = url.to_string();
                    let back = KubeUrl::parse(&written).expect("our own form reads back");
                    assert_eq!(back, url, "{written}");
                    assert_eq!(back.to_string(), written);
                }
                Err(e) => one_line(&e.to_string()),
            }
        }
        1 => {
            if let Err(e) = head(rest) {
                assert!(!e.is_empty());
            }
        }
        _ => {
            let parts: Vec<&[u8]> = rest.split(|&b| b == 0xff).collect();
            let shards: Vec<(Vec<u8>, Vec<u8>)> = parts
                .chunks(2)
                .map(|pair| {
                    (
                        pair[0].to_vec(),
                        pair.get(1).copied().unwrap_or_default().to_vec(),
                    )
                })
                .collect();
            match unpack(&shards) {
                Ok(files) => {
                    let again = pack(&files).expect("files read back pack again");
                    let back = unpack(&again).expect("our own shards read back");
                    assert!(back == files, "the files changed through pack and unpack");
                }
                Err(e) => one_line(&e),
            }
        }
    }
});
