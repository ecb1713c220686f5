//! Helpers pki-kube's tests share: a real kube-apiserver on 127.0.0.1, and
//! what the tests do on it as the admin.

#![allow(dead_code)]

pub mod admin;
pub mod kube;
pub mod proxy;
