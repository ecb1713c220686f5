//! Helpers the etcd store's tests share: a real etcd on 127.0.0.1, a
//! proxy that can lose etcd's answers, and certificates for a TLS etcd.

#![allow(dead_code)]

pub mod certs;
pub mod etcd;
pub mod proxy;
