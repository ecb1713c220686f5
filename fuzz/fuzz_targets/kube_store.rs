//! What a `kube://` store reads: store URLs and, from Secrets a writer of
//! the namespace may have changed, a head's `head.json` (format 1 or 2)
//! and the shards of a document's files.
//!
//! The first byte chooses: a URL (text), a head, or shards (the rest cut
//! at each `0xff` into index, data, index, data…). Checks: no panic; a
//! refusal is one line; an accepted URL writes a form that reads back to
//! the same value; an accepted head names at least one bucket; shards that
//! read as files are split into buckets (each file in the bucket its path
//! gives, none lost), and each bucket packed again into shards that read
//! as the same files.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pki_kube::KubeUrl;
use pki_kube::fuzzing::{bucket_of, buckets, head, pack, unpack};

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
        1 => match head(rest) {
            Ok(count) => assert!(count >= 1),
            Err(e) => assert!(!e.is_empty()),
        },
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
                    let count = 1 + rest.len() % 7;
                    let split = buckets(&files, count).expect("files read back split");
                    assert_eq!(split.len(), count);
                    let mut total = 0;
                    for (index, bucket) in split.iter().enumerate() {
                        for (path, file) in bucket.iter() {
                            assert_eq!(bucket_of(path, count), index, "{path}");
                            assert!(files.file(path) == Some(file));
                        }
                        total += bucket.len();
                        let again = pack(bucket).expect("files read back pack again");
                        let back = unpack(&again).expect("our own shards read back");
                        assert!(back == *bucket, "the files changed through pack and unpack");
                    }
                    assert_eq!(total, files.len(), "a file lost in the split");
                }
                Err(e) => one_line(&e),
            }
        }
    }
});
