//! etcd's v3 API messages and gRPC clients, generated from the `.proto`
//! files in `pki-etcd/proto/` by `pki-etcd/regen-proto.sh` and checked in
//! (`src/proto/*.rs`), so that building this crate needs no protobuf
//! compiler. Only the RPCs pki-etcd calls are there (see
//! `proto/README.md`); [`crate::client`] is the interface to use.

// Generated code: its docs are etcd's, and its errors are gRPC statuses
// (`clippy::missing_errors_doc` is pedantic, outside `clippy::all`).
#![allow(
    missing_docs,
    clippy::all,
    clippy::missing_errors_doc,
    clippy::unwrap_used,
    clippy::expect_used
)]

/// etcd's `mvccpb` package: keys, values and watch events.
pub mod mvccpb {
    include!("proto/mvccpb.rs");
}

/// etcd's `authpb` package: users, roles, permissions.
pub mod authpb {
    include!("proto/authpb.rs");
}

/// etcd's `etcdserverpb` package: the KV, Watch and Auth services.
pub mod etcdserverpb {
    include!("proto/etcdserverpb.rs");

    // The generator derives no Debug for the messages that carry a
    // password or a token (pki-etcd-proto-gen's SECRET_MESSAGES): these
    // print the user name only.
    impl std::fmt::Debug for AuthenticateRequest {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("AuthenticateRequest")
                .field("name", &self.name)
                .finish_non_exhaustive()
        }
    }

    impl std::fmt::Debug for AuthUserAddRequest {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("AuthUserAddRequest")
                .field("name", &self.name)
                .field("options", &self.options)
                .finish_non_exhaustive()
        }
    }

    impl std::fmt::Debug for AuthenticateResponse {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("AuthenticateResponse")
                .field("header", &self.header)
                .finish_non_exhaustive()
        }
    }
}
